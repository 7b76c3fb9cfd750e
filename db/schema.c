/* schema: the database's tables as a list of forward migrations.
 *
 * db_migrations[i] takes a database from user_version i to i + 1. Migrations are only ever
 * appended: a released one never changes, because databases in the field already ran it.
 * db_migrate() runs the missing ones and sets user_version inside one BEGIN IMMEDIATE
 * transaction (SQLite's DDL is transactional), so several connections opening a new database
 * at once migrate it exactly once: the others wait for the write lock and then find nothing
 * left to do.
 *
 * v1, the tables and why they look the way they do:
 * - jobs: `seq` (the rowid) orders the queue and the listings; `id` is the public id (128
 *   random bits, hex). Times are ms since the epoch, NULL when not reached. `runtime_ms` sums the
 *   finished attempts; the running one adds now − attempt_started_at. `idempotency_key` is
 *   UNIQUE (NULLs allowed) with `body_hash`, the SHA-256 of the resolved document, to tell a
 *   retry from a reuse. `log_lines` counts stored log lines so an append needs no MAX().
 * - job_events: one row per transition (from NULL for the submit).
 * - metrics: one row per (job, epoch); a resumed attempt's epoch replaces the earlier one with
 *   INSERT OR REPLACE, and AUTOINCREMENT keeps ids growing so an event stream that remembers
 *   the last id it sent also sees replaced epochs.
 * - logs, artifacts: keyed by (job, line) and (job, name), WITHOUT ROWID.
 * - workers: `kinds` is the bit set of device kinds the worker offers (db/workers.h).
 * Every child table references jobs(seq) ON DELETE CASCADE: deleting a job removes its rows.
 *
 * v2: jobs.checkpoint_epoch, the last finished epoch of the checkpoint the server keeps for the
 * job (0: none), which a requeued attempt resumes from.
 *
 * v4: jobs.dataset_credentials, the userinfo of the job's dataset URL sealed under the data
 * directory's key (util/secret.h): the stored document shows the URL with ***@ instead, and
 * the column is handed only to the worker holding the lease and cleared when the job ends.
 *
 * v5: script jobs (tokens.scripts, workers.scripts, jobs.script, metrics.extra), see below.
 *
 * v6: models, one row per published model version (db/models.h): a succeeded job that produced
 * a model is version max + 1 of its name. The row outlives its job (job_seq ON DELETE SET NULL,
 * state retired) so a version number is never handed out twice, and keeps job_id and owner so
 * who may see it does not depend on the job row.
 *
 * v9: why a job waits. tokens.max_running and tokens.max_queued cap a token's jobs (0: no
 * cap); jobs.retry_at is when a requeued attempt may be leased again (its back-off; NULL when
 * none; indexed, for the housekeeping to wake parked leases when one ends); jobs.slurm_reason
 * is squeue's reason for the job's pending Slurm job (NULL when none
 * or not pending). Columns with defaults only: a database from before opens and runs as it
 * did, every token uncapped. */
#include <stdio.h>

#include "db/db.h"

static const char *const db_migrations[] = {
    /* v1 */
    "CREATE TABLE jobs ("
    "  seq INTEGER PRIMARY KEY,"
    "  id TEXT NOT NULL UNIQUE,"
    "  name TEXT NOT NULL,"
    "  status TEXT NOT NULL CHECK (status IN"
    "    ('queued', 'running', 'succeeded', 'failed', 'cancelled')),"
    "  phase TEXT CHECK (phase IN ('downloading', 'training', 'uploading')),"
    "  attempt INTEGER NOT NULL DEFAULT 0,"
    "  max_attempts INTEGER NOT NULL,"
    "  priority INTEGER NOT NULL,"
    "  device_kind TEXT NOT NULL CHECK (device_kind IN ('any', 'gpu', 'cpu')),"
    "  max_runtime_seconds INTEGER NOT NULL,"
    "  document TEXT NOT NULL,"
    "  idempotency_key TEXT UNIQUE,"
    "  body_hash TEXT,"
    "  created_at INTEGER NOT NULL,"
    "  started_at INTEGER,"
    "  finished_at INTEGER,"
    "  attempt_started_at INTEGER,"
    "  runtime_ms INTEGER NOT NULL DEFAULT 0,"
    "  error TEXT,"
    "  device TEXT,"
    "  worker_id TEXT,"
    "  lease_expires_at INTEGER,"
    "  cancel_requested INTEGER NOT NULL DEFAULT 0,"
    "  log_lines INTEGER NOT NULL DEFAULT 0"
    ");"
    "CREATE INDEX jobs_queue ON jobs (status, priority DESC, seq);"
    "CREATE INDEX jobs_status_seq ON jobs (status, seq);"
    "CREATE INDEX jobs_name_seq ON jobs (name, seq);"
    "CREATE TABLE job_events ("
    "  id INTEGER PRIMARY KEY,"
    "  job_seq INTEGER NOT NULL REFERENCES jobs (seq) ON DELETE CASCADE,"
    "  at INTEGER NOT NULL,"
    "  from_status TEXT,"
    "  to_status TEXT NOT NULL,"
    "  phase TEXT,"
    "  attempt INTEGER NOT NULL,"
    "  reason TEXT"
    ");"
    "CREATE INDEX job_events_job ON job_events (job_seq, id);"
    "CREATE TABLE metrics ("
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
    "  job_seq INTEGER NOT NULL REFERENCES jobs (seq) ON DELETE CASCADE,"
    "  attempt INTEGER NOT NULL,"
    "  epoch INTEGER NOT NULL CHECK (epoch >= 1),"
    "  loss REAL NOT NULL,"
    "  val_loss REAL,"
    "  accuracy REAL,"
    "  val_accuracy REAL,"
    "  seconds REAL NOT NULL,"
    "  samples_per_second REAL,"
    "  at INTEGER NOT NULL,"
    "  UNIQUE (job_seq, epoch)"
    ");"
    "CREATE TABLE logs ("
    "  job_seq INTEGER NOT NULL REFERENCES jobs (seq) ON DELETE CASCADE,"
    "  line INTEGER NOT NULL,"
    "  at INTEGER NOT NULL,"
    "  text TEXT NOT NULL,"
    "  PRIMARY KEY (job_seq, line)"
    ") WITHOUT ROWID;"
    "CREATE TABLE artifacts ("
    "  job_seq INTEGER NOT NULL REFERENCES jobs (seq) ON DELETE CASCADE,"
    "  name TEXT NOT NULL,"
    "  size INTEGER NOT NULL,"
    "  sha256 TEXT NOT NULL,"
    "  created_at INTEGER NOT NULL,"
    "  PRIMARY KEY (job_seq, name)"
    ") WITHOUT ROWID;"
    "CREATE TABLE workers ("
    "  id TEXT PRIMARY KEY,"
    "  name TEXT NOT NULL,"
    "  devices TEXT NOT NULL,"
    "  kinds INTEGER NOT NULL,"
    "  registered_at INTEGER NOT NULL,"
    "  last_seen_at INTEGER NOT NULL,"
    "  gone INTEGER NOT NULL DEFAULT 0,"
    "  job_id TEXT"
    ");",
    /* v2: the epoch of the job's stored checkpoint (0: none), see sched_checkpoint_store */
    "ALTER TABLE jobs ADD COLUMN checkpoint_epoch INTEGER NOT NULL DEFAULT 0;",
    /* v3: API tokens (db/tokens.h); a job's owner is the id of the token that submitted it
     * (NULL for jobs from before tokens: only admins see those); a worker remembers the token
     * that registered it, and only that token (or an admin) may act as that worker; a metrics
     * token may only scrape GET /metrics */
    "CREATE TABLE tokens ("
    "  id TEXT PRIMARY KEY,"
    "  name TEXT NOT NULL,"
    "  role TEXT NOT NULL CHECK (role IN ('admin', 'user', 'worker', 'metrics')),"
    "  hash TEXT NOT NULL UNIQUE,"
    "  created_at INTEGER NOT NULL,"
    "  revoked_at INTEGER"
    ");"
    "ALTER TABLE jobs ADD COLUMN owner TEXT;"
    "CREATE INDEX jobs_owner_seq ON jobs (owner, seq);"
    "CREATE INDEX jobs_owner_status ON jobs (owner, status);"
    "ALTER TABLE workers ADD COLUMN token_id TEXT;",
    /* v4: a job's dataset credentials, sealed; NULL when none or once the job has ended */
    "ALTER TABLE jobs ADD COLUMN dataset_credentials TEXT;",
    /* v5: users' own training scripts: the right to submit them (tokens.scripts), the workers
     * that run them (workers.scripts, started with --allow-scripts), which jobs are scripts
     * (jobs.script, set at submit, so the lease can match them), and a script's metrics under
     * names of its own (metrics.extra: a JSON object, NULL when none). A script need not report
     * a loss or time its epochs, so metrics is rebuilt with loss and seconds nullable (SQLite
     * cannot drop NOT NULL in place); ids are copied, and AUTOINCREMENT's counter follows the
     * largest, so followers that remember an id see nothing twice. */
    "ALTER TABLE tokens ADD COLUMN scripts INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE workers ADD COLUMN scripts INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE jobs ADD COLUMN script INTEGER NOT NULL DEFAULT 0;"
    "CREATE TABLE metrics_v5 ("
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
    "  job_seq INTEGER NOT NULL REFERENCES jobs (seq) ON DELETE CASCADE,"
    "  attempt INTEGER NOT NULL,"
    "  epoch INTEGER NOT NULL CHECK (epoch >= 1),"
    "  loss REAL,"
    "  val_loss REAL,"
    "  accuracy REAL,"
    "  val_accuracy REAL,"
    "  seconds REAL,"
    "  samples_per_second REAL,"
    "  at INTEGER NOT NULL,"
    "  extra TEXT,"
    "  UNIQUE (job_seq, epoch)"
    ");"
    "INSERT INTO metrics_v5 (id, job_seq, attempt, epoch, loss, val_loss, accuracy, val_accuracy,"
    "  seconds, samples_per_second, at)"
    "  SELECT id, job_seq, attempt, epoch, loss, val_loss, accuracy, val_accuracy, seconds,"
    "  samples_per_second, at FROM metrics;"
    "DROP TABLE metrics;"
    "ALTER TABLE metrics_v5 RENAME TO metrics;",
    /* v6: published model versions (db/models.h) */
    "CREATE TABLE models ("
    "  name TEXT NOT NULL,"
    "  version INTEGER NOT NULL CHECK (version >= 1),"
    "  job_seq INTEGER REFERENCES jobs (seq) ON DELETE SET NULL,"
    "  job_id TEXT NOT NULL,"
    "  owner TEXT,"
    "  state TEXT NOT NULL CHECK (state IN ('available', 'retired')),"
    "  created_at INTEGER NOT NULL,"
    "  retired_at INTEGER,"
    "  PRIMARY KEY (name, version)"
    ");"
    "CREATE UNIQUE INDEX models_job ON models (job_seq);"
    "CREATE INDEX models_owner_name ON models (owner, name);",
    /* v7: data-parallel jobs and the Slurm executor. jobs.replicas (distribution.replicas, set
     * at submit) is matched against workers.slots, the ranks a worker can start. A job Slurm
     * holds has its sbatch id in slurm_job_id and is leased only by the worker made for that
     * Slurm job (for_worker); such a worker (bound = 1) leases nothing else. A partial index
     * keeps the walk of the bound jobs short. */
    "ALTER TABLE jobs ADD COLUMN replicas INTEGER NOT NULL DEFAULT 1;"
    "ALTER TABLE jobs ADD COLUMN slurm_job_id TEXT;"
    "ALTER TABLE jobs ADD COLUMN for_worker TEXT;"
    "ALTER TABLE workers ADD COLUMN slots INTEGER NOT NULL DEFAULT 1;"
    "ALTER TABLE workers ADD COLUMN bound INTEGER NOT NULL DEFAULT 0;"
    /* the executor's once-a-second walk of the bound jobs: few, however many jobs there are */
    "CREATE INDEX jobs_bound ON jobs (seq) WHERE for_worker IS NOT NULL;",
    /* v8: experiments.
     * - jobs.stop_requested: a graceful stop asked of a running job (a sweep's ASHA rung);
     *   the worker finishes the epoch and the job succeeds. stop_reason says why it ended
     *   early (early stopping's, a sweep's or a stop request's words; NULL when it ran all its
     *   epochs), stopped_epoch the epoch it ended after, best_epoch the epoch whose model was
     *   kept (early_stopping.restore_best; NULL otherwise).
     * - jobs.keep: the job document's keep, or a later change: serve --retain-days skips it.
     * - sweeps: one row per POST /sweeps; its trials are jobs with sweep_seq set. A sweep's
     *   row outlives nothing: deleting it sets its trials' sweep_seq NULL.
     * - histograms: per (job, epoch, tensor) one weight histogram for the tfevents artifact
     *   ("tensorboard": {"histograms": true}); data is JSON (min, max, num, sum, sum_squares,
     *   limits, counts).
     * - tokens.webhook_secret: the HMAC-SHA256 key of the token's webhooks, sealed under the
     *   data directory's key (util/secret.h); NULL until set.
     * - deliveries / delivery_attempts: one row per webhook to send (job or sweep, url, event,
     *   body) and one per try of it, kept with the job or sweep they belong to.
     * - jobs_finished: the retention walk's index (finished jobs by age). */
    "CREATE TABLE sweeps ("
    "  seq INTEGER PRIMARY KEY,"
    "  id TEXT NOT NULL UNIQUE,"
    "  name TEXT NOT NULL,"
    "  owner TEXT,"
    "  status TEXT NOT NULL CHECK (status IN ('running', 'succeeded', 'failed', 'cancelled')),"
    "  document TEXT NOT NULL,"
    "  trials_created INTEGER NOT NULL DEFAULT 0,"
    "  best_job_seq INTEGER,"
    "  error TEXT,"
    "  created_at INTEGER NOT NULL,"
    "  finished_at INTEGER"
    ");"
    "CREATE INDEX sweeps_owner_seq ON sweeps (owner, seq);"
    "CREATE INDEX sweeps_status ON sweeps (status) WHERE status = 'running';"
    "ALTER TABLE jobs ADD COLUMN stop_requested TEXT;"
    "ALTER TABLE jobs ADD COLUMN stop_reason TEXT;"
    "ALTER TABLE jobs ADD COLUMN stopped_epoch INTEGER;"
    "ALTER TABLE jobs ADD COLUMN best_epoch INTEGER;"
    "ALTER TABLE jobs ADD COLUMN keep INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE jobs ADD COLUMN sweep_seq INTEGER REFERENCES sweeps (seq) ON DELETE SET NULL;"
    "CREATE INDEX jobs_sweep ON jobs (sweep_seq, seq) WHERE sweep_seq IS NOT NULL;"
    "CREATE INDEX jobs_finished ON jobs (finished_at) WHERE finished_at IS NOT NULL;"
    "CREATE TABLE histograms ("
    "  job_seq INTEGER NOT NULL REFERENCES jobs (seq) ON DELETE CASCADE,"
    "  epoch INTEGER NOT NULL,"
    "  tensor TEXT NOT NULL,"
    "  data TEXT NOT NULL,"
    "  PRIMARY KEY (job_seq, epoch, tensor)"
    ") WITHOUT ROWID;"
    "ALTER TABLE tokens ADD COLUMN webhook_secret TEXT;"
    "CREATE TABLE deliveries ("
    "  id INTEGER PRIMARY KEY,"
    "  job_seq INTEGER REFERENCES jobs (seq) ON DELETE CASCADE,"
    "  sweep_seq INTEGER REFERENCES sweeps (seq) ON DELETE CASCADE,"
    "  owner TEXT,"
    "  url TEXT NOT NULL,"
    "  event TEXT NOT NULL,"
    "  body TEXT NOT NULL,"
    "  status TEXT NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),"
    "  attempts INTEGER NOT NULL DEFAULT 0,"
    "  next_at INTEGER NOT NULL,"
    "  created_at INTEGER NOT NULL,"
    "  finished_at INTEGER"
    ");"
    "CREATE INDEX deliveries_pending ON deliveries (next_at) WHERE status = 'pending';"
    "CREATE INDEX deliveries_job ON deliveries (job_seq) WHERE job_seq IS NOT NULL;"
    "CREATE INDEX deliveries_sweep ON deliveries (sweep_seq) WHERE sweep_seq IS NOT NULL;"
    "CREATE TABLE delivery_attempts ("
    "  delivery_id INTEGER NOT NULL REFERENCES deliveries (id) ON DELETE CASCADE,"
    "  attempt INTEGER NOT NULL,"
    "  at INTEGER NOT NULL,"
    "  http_status INTEGER,"
    "  error TEXT,"
    "  ms INTEGER NOT NULL,"
    "  PRIMARY KEY (delivery_id, attempt)"
    ") WITHOUT ROWID;"
    /* GET /jobs filtered by name and status, or by owner and name (a user's own runs of one
     * experiment): jobs_name_seq alone walks every job of the name to find the few that
     * match, which at 1,000,000 jobs is milliseconds per page (bench/joblist.py). The rowid
     * closes each index, so both serve ORDER BY seq DESC without a sort. */
    "CREATE INDEX jobs_name_status ON jobs (name, status);"
    "CREATE INDEX jobs_owner_name ON jobs (owner, name);",
    /* v9: token caps, a retry's back-off, Slurm's reason for a pending job */
    "ALTER TABLE tokens ADD COLUMN max_running INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE tokens ADD COLUMN max_queued INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE jobs ADD COLUMN retry_at INTEGER;"
    "ALTER TABLE jobs ADD COLUMN slurm_reason TEXT;"
    /* the housekeeping's once-a-second look for back-offs that just ended (few rows: a lease
     * clears retry_at) */
    "CREATE INDEX jobs_retry ON jobs (retry_at) WHERE retry_at IS NOT NULL;"
    /* leasing's list of the tokens at their running cap looks at capped tokens only */
    "CREATE INDEX tokens_capped ON tokens (id) WHERE max_running > 0;",
};

#define DB_N_MIGRATIONS ((int)(sizeof db_migrations / sizeof db_migrations[0]))

int db_schema_latest(void)
{
    return DB_N_MIGRATIONS;
}

int db_migrate(db *d, char *err)
{
    int version = 0;
    int rc = db_version(d, &version, err);
    if (rc < 0)
        return rc;
    if (version == DB_N_MIGRATIONS)
        return 0; /* the common case: no write lock needed */

    rc = db_begin(d, err);
    if (rc < 0)
        return rc;
    rc = db_version(d, &version, err); /* another connection may have migrated meanwhile */
    if (rc < 0)
        goto out;
    if (version > DB_N_MIGRATIONS) {
        rc = err_set(err, -EPROTO,
                     "the database has schema version %d but this trainyard knows only up to %d: "
                     "run a newer trainyard, or point it at another data directory",
                     version, DB_N_MIGRATIONS);
        goto out;
    }
    for (int v = version; v < DB_N_MIGRATIONS; v++) {
        rc = db_exec(d, db_migrations[v], err);
        if (rc < 0)
            goto out;
    }
    char pragma[64];
    snprintf(pragma, sizeof pragma, "PRAGMA user_version = %d", DB_N_MIGRATIONS);
    rc = db_exec(d, pragma, err);
    if (rc < 0)
        goto out;
    rc = db_commit(d, err);
    return rc;
out:
    db_rollback(d);
    return rc;
}
