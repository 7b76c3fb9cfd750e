/* slurm: the Slurm executor's passes and thread (what it does and its invariants are in
 * slurm.h; the commands it runs are made in slurm_cmd.c).
 *
 * Why its own thread rather than serve's once-a-second sweep: sbatch, squeue and scancel talk
 * to slurmctld, which may take seconds to answer (or SLURM_CMD_TIMEOUT_MS when it is down);
 * lapsed leases and runtime limits must not wait on that.
 *
 * A pass: the bound jobs first (read, one squeue for their Slurm jobs, each settled in its own
 * transactions), then the unbound queued jobs, each submitted. The only state kept in memory
 * is the backoff of jobs whose sbatch failed or whose Slurm job ended before rank 0 leased
 * them; a restarted serve starts with none. */
#include "scheduler/slurm.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "db/logs.h"
#include "db/tokens.h"
#include "db/workers.h"
#include "job/job.h"
#include "scheduler/lifecycle.h"
#include "util/err.h"
#include "util/exepath.h"

#define SLURM_SEEN_EVERY_MS 30000 /* a bound worker whose Slurm job waits is marked seen */
#define SLURM_OUT_CAP       4096  /* bytes kept of a command's stdout and of its stderr */

extern char **environ;

/* A job that must wait before its next sbatch. */
typedef struct slurm_wait {
    int64_t seq, not_before, delay_ms;
} slurm_wait;

/* The attempt count a job had when it was last submitted: a job still at it when its Slurm
 * job ended was never leased by that Slurm job's rank 0. */
typedef struct slurm_sent {
    int64_t seq;
    int attempt;
} slurm_sent;

#define SLURM_SENT_MAX 1024

/* What a pass copies out of a bound job's row. */
typedef struct slurm_bound {
    int64_t seq, finished_at;
    int status, attempt;
    char id[DB_ID_LEN + 1];
    char slurm_id[SLURM_ID_MAX];
    char worker_id[DB_ID_LEN + 1];
    char state[32];  /* its Slurm state from squeue; "" when not listed */
    char reason[64]; /* squeue's reason for it (Resources, Priority, ...); "" for none */
    char stored[64]; /* the reason its row holds (jobs.slurm_reason) */
} slurm_bound;

typedef struct slurm_list {
    slurm_bound jobs[SLURM_MAX_JOBS];
    int n;
} slurm_list;

typedef struct slurm_todo {
    int64_t seq[SLURM_MAX_JOBS];
    int n;
} slurm_todo;

struct slurm_executor {
    slurm_opts o;
    db *d;
    int own_db; /* 1: d was opened here (the thread's), closed by stop */
    slurm_wait waits[SLURM_MAX_JOBS];
    slurm_sent sent[SLURM_SENT_MAX];
    int sent_next;       /* the slot the next submit takes when its job has none */
    slurm_list bound;    /* a pass's bound jobs */
    int64_t bound_after; /* the seq the next pass's bound jobs come after */
    slurm_todo todo;     /* and the jobs it submits */
    int reasons;         /* a pass's jobs whose squeue reason changed */
    char ids[SLURM_MAX_JOBS * SLURM_ID_MAX]; /* squeue -j's list */
    pthread_t thread;
    int started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop;
};

__attribute__((format(printf, 2, 3))) static void slurm_say(slurm_executor *x, const char *fmt, ...)
{
    char line[ERR_LEN + 256];
    va_list ap;
    if (!x->o.log)
        return;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    x->o.log(line);
}

/* ---- the backoff ---------------------------------------------------------------------------- */

static slurm_wait *slurm_wait_find(slurm_executor *x, int64_t seq)
{
    for (int i = 0; i < SLURM_MAX_JOBS; i++)
        if (x->waits[i].seq == seq)
            return &x->waits[i];
    return NULL;
}

/* Job seq waits before its next sbatch: SLURM_BACKOFF_MIN_MS, doubling each time up to
 * SLURM_BACKOFF_MAX_MS. Returns the wait in ms. */
static int64_t slurm_wait_more(slurm_executor *x, int64_t seq, int64_t now)
{
    slurm_wait *w = slurm_wait_find(x, seq);
    if (!w) {
        w = &x->waits[0];
        for (int i = 0; i < SLURM_MAX_JOBS; i++) /* a free slot, else the one due first */
            if (x->waits[i].seq == 0 || x->waits[i].not_before < w->not_before)
                w = &x->waits[i];
        memset(w, 0, sizeof *w);
        w->seq = seq;
    }
    w->delay_ms = w->delay_ms ? w->delay_ms * 2 : SLURM_BACKOFF_MIN_MS;
    if (w->delay_ms > SLURM_BACKOFF_MAX_MS)
        w->delay_ms = SLURM_BACKOFF_MAX_MS;
    w->not_before = now + w->delay_ms;
    return w->delay_ms;
}

/* The output file of Slurm job slurm_id for job_id (sbatch's %j filled in) into out. */
static void slurm_output_of(const slurm_executor *x, const char *job_id, const char *slurm_id,
                            char out[DATADIR_PATH_MAX])
{
    char pattern[DATADIR_PATH_MAX];
    out[0] = '\0';
    if (datadir_slurm_output(x->o.data_dir, job_id, pattern) < 0)
        return;
    char *at = strstr(pattern, "%j");
    if (at)
        snprintf(out, DATADIR_PATH_MAX, "%.*s%s%s", (int)(at - pattern), pattern, slurm_id, at + 2);
}

/* Remembers that job seq was submitted at attempt count attempt. */
static void slurm_sent_note(slurm_executor *x, int64_t seq, int attempt)
{
    slurm_sent *e = NULL;
    for (int i = 0; i < SLURM_SENT_MAX && !e; i++)
        if (x->sent[i].seq == seq)
            e = &x->sent[i];
    if (!e) {
        e = &x->sent[x->sent_next];
        x->sent_next = (x->sent_next + 1) % SLURM_SENT_MAX;
    }
    e->seq = seq;
    e->attempt = attempt;
}

/* 1 when job b, queued, is at the attempt count it was submitted with: its Slurm job's rank 0
 * never leased it. 0 when it did, or when this serve did not submit it (it cannot tell). */
static int slurm_never_leased(const slurm_executor *x, const slurm_bound *b)
{
    for (int i = 0; i < SLURM_SENT_MAX; i++)
        if (x->sent[i].seq == b->seq)
            return x->sent[i].attempt == b->attempt;
    return 0;
}

/* ---- small transactions ------------------------------------------------------------------- */

/* Appends line to job seq's log, inside the caller's transaction. */
static int slurm_job_log(db *d, int64_t seq, const char *line, int64_t now, char *err)
{
    db_job j;
    int rc = db_job_get_seq(d, seq, &j, err);
    if (rc < 0)
        return rc;
    int lines = j.log_lines;
    const char *one[] = {line};
    rc = db_log_append(d, seq, &lines, now, one, 1, err);
    if (rc == 0)
        rc = db_job_set_log_lines(d, seq, lines, err);
    db_job_clear(&j);
    return rc;
}

/* Ends worker_id: its token revoked (when still active), the row marked gone. Inside the
 * caller's transaction; a worker already forgotten is no error. */
static int slurm_worker_end(db *d, const char *worker_id, int64_t now, char *err)
{
    db_worker w;
    int rc = db_worker_get(d, worker_id, &w, err);
    if (rc == -ENOENT)
        return 0;
    if (rc < 0)
        return rc;
    if (w.token_id[0]) {
        rc = db_token_revoke(d, w.token_id, now, err);
        if (rc == -ENOENT)
            rc = 0; /* revoked already */
    }
    if (rc == 0)
        rc = db_worker_set_gone(d, worker_id, err);
    db_worker_clear(&w);
    return rc < 0 ? rc : 0;
}

/* After job b's Slurm job is over (or never was): its worker ended, and the job unbound: a
 * queued job loses its slurm_job_id too (the next pass submits it again), a finished one
 * keeps it to show. line, when given, goes to the job's log. One transaction. */
static int slurm_unbind(slurm_executor *x, const slurm_bound *b, const char *line, int64_t now,
                        char *err)
{
    db_job j;
    int rc = db_begin(x->d, err);
    if (rc < 0)
        return rc;
    rc = db_job_get_seq(x->d, b->seq, &j, err);
    if (rc == -ENOENT) { /* deleted meanwhile */
        rc = slurm_worker_end(x->d, b->worker_id, now, err);
        goto done;
    }
    if (rc < 0)
        goto out;
    if (strcmp(j.for_worker, b->worker_id) == 0) {
        int keep = db_status_terminal(j.status) && j.slurm_job_id[0];
        rc = db_job_set_slurm(x->d, j.seq, keep ? j.slurm_job_id : NULL, NULL, err);
    }
    db_job_clear(&j);
    if (rc >= 0)
        rc = slurm_worker_end(x->d, b->worker_id, now, err);
    if (rc >= 0 && line)
        rc = slurm_job_log(x->d, b->seq, line, now, err);
    if (rc < 0)
        goto out;
done:
    return db_commit(x->d, err);
out:
    db_rollback(x->d);
    return rc;
}

/* ---- settling bound jobs ------------------------------------------------------------------ */

static int slurm_bound_add(void *ctx, const db_job *j)
{
    slurm_list *l = ctx;
    if (l->n >= SLURM_MAX_JOBS)
        return 0;
    slurm_bound *b = &l->jobs[l->n++];
    memset(b, 0, sizeof *b);
    b->seq = j->seq;
    b->status = j->status;
    b->attempt = j->attempt;
    b->finished_at = j->finished_at;
    snprintf(b->id, sizeof b->id, "%s", j->id);
    snprintf(b->slurm_id, sizeof b->slurm_id, "%s", j->slurm_job_id);
    snprintf(b->worker_id, sizeof b->worker_id, "%s", j->for_worker);
    snprintf(b->stored, sizeof b->stored, "%s", j->slurm_reason);
    return 0;
}

/* Fills each job's state and reason from one squeue over their Slurm ids (-t all: the ended
 * ones too, which slurmctld keeps listing for MinJobAge, 300 s by default). -EAGAIN when squeue
 * failed (the states are then unknown and nothing may be concluded from them). */
static int slurm_poll(slurm_executor *x, slurm_list *l, char *err)
{
    char *ids = x->ids;
    size_t cap = sizeof x->ids;
    char out[SLURM_OUT_CAP], errout[SLURM_OUT_CAP];
    size_t len = 0;
    ids[0] = '\0';
    for (int i = 0; i < l->n; i++) {
        if (!l->jobs[i].slurm_id[0])
            continue;
        len += (size_t)snprintf(ids + len, cap - len, "%s%s", len ? "," : "", l->jobs[i].slurm_id);
    }
    if (!ids[0])
        return 0;
    const char *argv[] = {
        x->o.squeue ? x->o.squeue : "squeue", "-h", "-t", "all", "-o", "%i %T %r", "-j", ids, NULL};
    int rc = slurm_cmd_run(argv, NULL, NULL, out, errout, sizeof out, SLURM_CMD_TIMEOUT_MS, err);
    if (rc < 0)
        return -EAGAIN;
    /* squeue -j with ids all unknown to slurmctld (purged after MinJobAge) fails saying so:
     * then none of them is listed, which is an answer; any other failure is not. */
    if (rc != 0 && !strstr(errout, "Invalid job id")) {
        char *nl = strchr(errout, '\n');
        if (nl)
            *nl = '\0';
        err_set(err, -EAGAIN, "squeue failed (status %d): %s", rc, errout);
        return -EAGAIN;
    }
    for (char *line = strtok(out, "\n"); rc == 0 && line; line = strtok(NULL, "\n")) {
        char id[SLURM_ID_MAX], state[32], reason[64] = "";
        int at = 0;
        if (sscanf(line, "%31s %31s %n", id, state, &at) < 2)
            continue;
        /* the reason is the rest of the line: some hold words of their own ("ReqNodeNotAvail,
         * UnavailableNodes:n1"); "None" is what squeue says for a job nothing holds */
        if (at > 0 && strcmp(line + at, "None") != 0)
            snprintf(reason, sizeof reason, "%s", line + at);
        for (int i = 0; i < l->n; i++)
            if (strcmp(l->jobs[i].slurm_id, id) == 0) {
                snprintf(l->jobs[i].state, sizeof l->jobs[i].state, "%s", state);
                snprintf(l->jobs[i].reason, sizeof l->jobs[i].reason, "%s", reason);
            }
    }
    return 0;
}

/* Job b's Slurm job is gone while b was queued or running (or b was never submitted: serve
 * stopped during its sbatch): its worker is lost, which ends a running attempt as a lapsed
 * lease would, then the job is unbound to be submitted again. */
static int slurm_lost(slurm_executor *x, const slurm_bound *b, int64_t now, sched_expiry_stats *st,
                      char *err)
{
    char why[256], line[DATADIR_PATH_MAX + 512];
    int to = -1;
    if (!b->slurm_id[0])
        snprintf(why, sizeof why, "serve stopped while submitting it to Slurm");
    else if (b->state[0])
        snprintf(why, sizeof why, "Slurm job %s ended (%s)", b->slurm_id, b->state);
    else
        snprintf(why, sizeof why, "Slurm job %s is no longer listed by squeue", b->slurm_id);
    int rc = sched_worker_lost(x->d, b->worker_id, why, x->o.artifacts_dir, now, &to, err);
    if (rc < 0 && rc != -ENOENT)
        return rc;
    if (to == DB_QUEUED)
        st->requeued++;
    else if (to == DB_FAILED)
        st->failed++;
    else if (to == DB_CANCELLED)
        st->cancelled++;
    line[0] = '\0';
    if (to < 0 && b->status == DB_QUEUED && b->slurm_id[0] && slurm_never_leased(x, b)) {
        /* it ended before rank 0 leased the job: no attempt was used, so only the backoff
         * keeps a job whose ranks cannot start from being submitted every second */
        char out[DATADIR_PATH_MAX];
        int64_t wait = slurm_wait_more(x, b->seq, now);
        slurm_output_of(x, b->id, b->slurm_id, out);
        snprintf(line, sizeof line,
                 "%s before its rank 0 leased the job (see %s); submitting again in %lld s", why,
                 out, (long long)(wait / 1000));
    }
    slurm_say(x, "slurm: job %s: %s%s%s", b->id, why, to >= 0 ? "; the job is " : "",
              to >= 0 ? db_status_name(to) : "");
    return slurm_unbind(x, b, line[0] ? line : NULL, now, err);
}

/* scancel Slurm job id; 0 when it was sent. */
static int slurm_cancel(slurm_executor *x, const char *id, char *err)
{
    char out[SLURM_OUT_CAP], errout[SLURM_OUT_CAP];
    const char *argv[] = {x->o.scancel ? x->o.scancel : "scancel", id, NULL};
    int rc = slurm_cmd_run(argv, NULL, NULL, out, errout, sizeof out, SLURM_CMD_TIMEOUT_MS, err);
    if (rc > 0)
        return err_set(err, -EIO, "scancel %s failed (status %d): %s", id, rc, errout);
    return rc;
}

/* Settles one bound job by its Slurm state (slurm.h has the table). */
static int slurm_settle(slurm_executor *x, const slurm_bound *b, int64_t now,
                        sched_expiry_stats *st, char *err)
{
    int cls = b->state[0] ? slurm_state_class(b->state) : SLURM_ENDED;
    int finished = db_status_terminal(b->status);
    if (!finished) {
        if (cls == SLURM_ENDED || !b->slurm_id[0])
            return slurm_lost(x, b, now, st, err);
        slurm_wait *wait = b->status == DB_RUNNING ? slurm_wait_find(x, b->seq) : NULL;
        if (wait) /* its ranks started: a later failure to start waits from the shortest again */
            wait->seq = 0;
        if (b->status == DB_QUEUED && strcmp(b->reason, b->stored) != 0) {
            /* why Slurm holds it, for GET /jobs/{id}'s waiting (written when it changes) */
            int rc = db_job_set_slurm_reason(x->d, b->seq, b->reason, err);
            if (rc < 0)
                return rc;
            x->reasons += rc;
        }
        if (b->status == DB_QUEUED) { /* waiting in Slurm: keep the row from going stale */
            db_worker w;
            if (db_worker_get(x->d, b->worker_id, &w, err) == 0) {
                if (now - w.last_seen_at >= SLURM_SEEN_EVERY_MS)
                    db_worker_seen(x->d, b->worker_id, now, err);
                db_worker_clear(&w);
            }
        }
        return 0;
    }
    if (cls != SLURM_ENDED && b->slurm_id[0]) {
        if (b->status != DB_CANCELLED && now - b->finished_at < SLURM_END_GRACE_MS)
            return 0; /* rank 0 reported the end and is exiting */
        int rc = slurm_cancel(x, b->slurm_id, err);
        if (rc == 0)
            slurm_say(x, "slurm: job %s is %s: scancel %s", b->id, db_status_name(b->status),
                      b->slurm_id);
        return rc; /* the next pass finds it ended and unbinds it */
    }
    return slurm_unbind(x, b, NULL, now, err);
}

static int slurm_settle_all(slurm_executor *x, int64_t now, sched_expiry_stats *st, char *err)
{
    slurm_list *l = &x->bound;
    l->n = 0;
    /* more bound jobs than a pass takes: the next pass takes those after, then from the start */
    int rc = db_job_list_bound(x->d, x->bound_after, SLURM_MAX_JOBS, slurm_bound_add, l, err);
    if (rc < 0)
        return rc;
    x->bound_after = l->n == SLURM_MAX_JOBS ? l->jobs[l->n - 1].seq : 0;
    if (l->n == 0)
        return 0;
    rc = slurm_poll(x, l, err);
    if (rc < 0)
        return rc;
    int first = 0;
    for (int i = 0; i < l->n; i++) {
        char one[ERR_LEN];
        int r = slurm_settle(x, &l->jobs[i], now, st, one);
        if (r < 0 && first == 0) { /* the others are still settled */
            first = r;
            snprintf(err, ERR_LEN, "job %s: %.*s", l->jobs[i].id, ERR_LEN - 48, one);
        }
    }
    return first;
}

/* ---- submitting --------------------------------------------------------------------------- */

static int slurm_todo_add(void *ctx, const db_job *j)
{
    slurm_todo *t = ctx;
    if (t->n < SLURM_MAX_JOBS)
        t->seq[t->n++] = j->seq;
    return 0;
}

/* Binds queued job seq to a new worker of its own with a new token (secret into secret, the
 * job's shape into *s; s->job_id and s->worker_id point into j and wid). 1 when bound, 0 when
 * the job is no longer an unbound queued job this executor takes. One transaction. */
static int slurm_bind(slurm_executor *x, int64_t seq, int64_t now, db_job *j,
                      char wid[DB_ID_LEN + 1], char secret[DB_TOKEN_SECRET_LEN + 1],
                      slurm_submit *s, char *err)
{
    char name[DB_NAME_MAX + 1];
    db_token tok;
    int rc = db_begin(x->d, err);
    if (rc < 0)
        return rc;
    rc = db_job_get_seq(x->d, seq, j, err);
    if (rc == -ENOENT)
        goto none;
    if (rc < 0)
        goto out;
    if (j->status != DB_QUEUED || (j->script && !x->o.scripts) || j->for_worker[0])
        goto none;
    memset(s, 0, sizeof *s);
    s->job_id = j->id;
    s->worker_id = wid;
    s->replicas = j->replicas > 0 ? j->replicas : 1;
    s->gpu = j->device_kind == JOB_DEVICE_GPU;
    int64_t left_s = (int64_t)j->max_runtime_seconds - j->runtime_ms / 1000;
    s->time_limit_s = (left_s > 0 ? left_s : 1) + SLURM_TIME_MARGIN_S;
    json_t *doc = json_loads(j->document ? j->document : "{}", 0, NULL);
    json_t *nodes = json_object_get(json_object_get(doc, "distribution"), "nodes");
    s->nodes = json_is_integer(nodes) ? (int)json_integer_value(nodes) : 0;
    json_decref(doc);
    rc = datadir_slurm_output(x->o.data_dir, j->id, s->output);
    if (rc < 0) {
        err_set(err, rc, "the path of its Slurm output is too long");
        goto out;
    }
    snprintf(name, sizeof name, "slurm-%.*s", DB_ID_LEN, j->id);
    rc = db_id_new(wid, err);
    if (rc == 0)
        rc = db_token_create(x->d, name, DB_ROLE_WORKER, 0, now, &tok, secret, err);
    if (rc < 0)
        goto out;
    db_worker w;
    memset(&w, 0, sizeof w);
    memcpy(w.id, wid, DB_ID_LEN + 1);
    snprintf(w.name, sizeof w.name, "%s", name);
    w.devices = (char *)"[]";
    w.kinds = DB_KIND_GPU | DB_KIND_CPU | DB_KIND_OTHER;
    w.registered_at = w.last_seen_at = now;
    memcpy(w.token_id, tok.id, sizeof w.token_id);
    w.slots = s->replicas;
    w.scripts = j->script != 0;
    w.bound = 1;
    rc = db_worker_insert(x->d, &w, err);
    if (rc == 0)
        rc = db_job_set_slurm(x->d, seq, NULL, wid, err);
    if (rc < 0)
        goto out;
    rc = db_commit(x->d, err);
    return rc < 0 ? rc : 1;
none:
    db_rollback(x->d);
    return 0;
out:
    db_rollback(x->d);
    return rc;
}

/* serve's environment with TRAINYARD_TOKEN set to secret (serve's own, the local workers',
 * left out): malloc'd array and string; slurm_env_free wipes and frees them. */
static char **slurm_env(const char *secret)
{
    size_t n = 0;
    while (environ[n])
        n++;
    char **env = calloc(n + 2, sizeof *env);
    size_t len = strlen("TRAINYARD_TOKEN=") + strlen(secret) + 1;
    char *tok = malloc(len);
    if (!env || !tok) {
        free(env);
        free(tok);
        return NULL;
    }
    snprintf(tok, len, "TRAINYARD_TOKEN=%s", secret);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "TRAINYARD_TOKEN=", 16) != 0)
            env[k++] = environ[i];
    env[k++] = tok;
    env[k] = NULL;
    return env;
}

static void slurm_env_free(char **env)
{
    if (!env)
        return;
    for (size_t i = 0; env[i]; i++) {
        if (strncmp(env[i], "TRAINYARD_TOKEN=", 16) == 0) {
            explicit_bzero(env[i], strlen(env[i]));
            free(env[i]);
        }
    }
    free(env);
}

/* Runs sbatch for s with the token secret; the Slurm job id into id. */
static int slurm_sbatch(slurm_executor *x, const slurm_submit *s, const char *secret,
                        char id[SLURM_ID_MAX], char *err)
{
    slurm_argv a;
    char script[SLURM_SCRIPT_MAX], out[SLURM_OUT_CAP], errout[SLURM_OUT_CAP];
    int rc = slurm_sbatch_argv(&x->o, s, &a, err);
    if (rc == 0)
        rc = slurm_script_build(&x->o, s->worker_id, script, sizeof script, err);
    if (rc < 0)
        return rc;
    char **env = slurm_env(secret);
    if (!env)
        return err_set(err, -ENOMEM, "out of memory");
    rc = slurm_cmd_run(a.v, env, script, out, errout, sizeof out, SLURM_CMD_TIMEOUT_MS, err);
    slurm_env_free(env);
    if (rc < 0)
        return rc;
    char *nl = strchr(errout, '\n');
    if (nl && nl[1] == '\0')
        *nl = '\0';
    if (rc != 0)
        return err_set(err, -EIO, "sbatch failed (status %d): %s", rc,
                       errout[0] ? errout : "(it said nothing)");
    /* --parsable prints "id" or "id;cluster" */
    size_t n = strspn(out, "0123456789");
    if (n == 0 || n >= SLURM_ID_MAX)
        return err_set(err, -EIO, "sbatch printed no job id: '%.200s'", out);
    memcpy(id, out, n);
    id[n] = '\0';
    return 0;
}

/* Submits queued job seq (slurm.h, steps 1 to 3). Returns 1 when submitted, 0 when it needed
 * nothing or must wait; negative on a database error. */
static int slurm_submit_one(slurm_executor *x, int64_t seq, int64_t now, char *err)
{
    db_job j;
    slurm_submit s;
    char wid[DB_ID_LEN + 1], secret[DB_TOKEN_SECRET_LEN + 1], id[SLURM_ID_MAX];
    char line[DATADIR_PATH_MAX + ERR_LEN], why[ERR_LEN];
    memset(&j, 0, sizeof j);
    slurm_wait *w = slurm_wait_find(x, seq);
    if (w && w->not_before > now)
        return 0;
    int rc = slurm_bind(x, seq, now, &j, wid, secret, &s, err);
    if (rc <= 0) {
        db_job_clear(&j);
        return rc;
    }
    rc = slurm_sbatch(x, &s, secret, id, why);
    explicit_bzero(secret, sizeof secret);
    slurm_bound b = {.seq = seq, .status = DB_QUEUED};
    snprintf(b.id, sizeof b.id, "%s", j.id);
    snprintf(b.worker_id, sizeof b.worker_id, "%s", wid);
    if (rc < 0) {
        int64_t wait = slurm_wait_more(x, seq, now);
        snprintf(line, sizeof line, "%s; trying again in %lld s", why, (long long)(wait / 1000));
        slurm_say(x, "slurm: job %s: %s", j.id, line);
        db_job_clear(&j);
        rc = slurm_unbind(x, &b, line, now, err);
        return rc < 0 ? rc : 0;
    }
    char out[DATADIR_PATH_MAX];
    slurm_output_of(x, j.id, id, out);
    snprintf(line, sizeof line, "submitted to Slurm as job %s (its output: %s)", id, out);
    rc = db_begin(x->d, err);
    if (rc == 0) {
        rc = db_job_set_slurm(x->d, seq, id, wid, err);
        if (rc >= 0)
            rc = slurm_job_log(x->d, seq, line, now, err);
        if (rc >= 0)
            rc = db_commit(x->d, err);
        else
            db_rollback(x->d);
    }
    if (rc < 0) { /* nobody would watch it: take it back */
        char ignored[ERR_LEN];
        slurm_cancel(x, id, ignored);
        db_job_clear(&j);
        return rc;
    }
    slurm_sent_note(x, seq, j.attempt);
    slurm_say(x, "slurm: job %s submitted as Slurm job %s (%d task%s)", j.id, id, s.replicas,
              s.replicas == 1 ? "" : "s");
    db_job_clear(&j);
    return 1;
}

static int slurm_submit_all(slurm_executor *x, int64_t now, int *submitted, char *err)
{
    slurm_todo *t = &x->todo;
    t->n = 0;
    int rc = db_job_list_unbound(x->d, now, SLURM_MAX_JOBS, x->o.scripts, slurm_todo_add, t, err);
    for (int i = 0; rc >= 0 && i < t->n; i++) {
        rc = slurm_submit_one(x, t->seq[i], now, err);
        if (rc > 0)
            (*submitted)++;
    }
    return rc < 0 ? rc : 0;
}

/* ---- the executor ------------------------------------------------------------------------- */

int slurm_executor_tick(slurm_executor *x, int64_t now, sched_expiry_stats *st, char *err)
{
    int submitted = 0;
    memset(st, 0, sizeof *st);
    x->reasons = 0;
    int rc = slurm_settle_all(x, now, st, err);
    char settle_err[ERR_LEN];
    if (rc < 0)
        snprintf(settle_err, sizeof settle_err, "%s", err);
    int rc2 = slurm_submit_all(x, now, &submitted, err);
    if ((sched_expiry_changed(st) || submitted || x->reasons) && x->o.changed)
        x->o.changed(x->o.user, st);
    if (rc < 0) {
        snprintf(err, ERR_LEN, "%s", settle_err);
        return rc;
    }
    return rc2;
}

int slurm_executor_new(const slurm_opts *o, db *d, slurm_executor **out, char *err)
{
    char dir[DATADIR_PATH_MAX];
    if (datadir_path(o->data_dir, DATADIR_SLURM, dir) < 0)
        return err_set(err, -ENAMETOOLONG, "%s: path too long", o->data_dir);
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return err_set(err, -errno, "cannot create %s: %s", dir, strerror(errno));
    slurm_executor *x = calloc(1, sizeof *x);
    if (!x)
        return err_set(err, -ENOMEM, "out of memory");
    x->o = *o;
    x->d = d;
    pthread_mutex_init(&x->mu, NULL);
    pthread_cond_init(&x->cv, NULL);
    *out = x;
    return 0;
}

static void *slurm_thread(void *arg)
{
    slurm_executor *x = arg;
    char err[ERR_LEN], last[ERR_LEN] = "";
    pthread_mutex_lock(&x->mu);
    while (!x->stop) {
        pthread_mutex_unlock(&x->mu);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        sched_expiry_stats st;
        int64_t now = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
        err[0] = '\0';
        if (slurm_executor_tick(x, now, &st, err) < 0 && strcmp(err, last) != 0)
            slurm_say(x, "slurm: %s", err); /* once, not every second */
        snprintf(last, sizeof last, "%s", err);
        pthread_mutex_lock(&x->mu);
        ts.tv_sec += 1;
        if (!x->stop)
            pthread_cond_timedwait(&x->cv, &x->mu, &ts);
    }
    pthread_mutex_unlock(&x->mu);
    return NULL;
}

int slurm_executor_start(const slurm_opts *o, slurm_executor **out, char *err)
{
    const char *sbatch = o->sbatch ? o->sbatch : "sbatch";
    char found[DATADIR_PATH_MAX];
    if (exepath_which(sbatch, found, sizeof found) < 0)
        return err_set(err, -ENOENT,
                       "--executor slurm needs %s, which is not here (Debian: apt-get install "
                       "slurm-client)",
                       sbatch);
    if (!o->replica_exe || access(o->replica_exe, X_OK) != 0)
        return err_set(err, -ENOENT,
                       "--executor slurm runs trainyard-replica, and %s cannot be run; build it "
                       "(ninja -C build) or name it with --replica-exe",
                       o->replica_exe ? o->replica_exe : "(none)");
    db *d = NULL;
    int rc = db_open(o->db_path, &d, err);
    if (rc < 0)
        return rc;
    slurm_executor *x = NULL;
    rc = slurm_executor_new(o, d, &x, err);
    if (rc < 0) {
        db_close(d);
        return rc;
    }
    x->own_db = 1;
    rc = pthread_create(&x->thread, NULL, slurm_thread, x);
    if (rc != 0) {
        slurm_executor_stop(x);
        return err_set(err, -rc, "cannot start the Slurm executor's thread: %s", strerror(rc));
    }
    x->started = 1;
    *out = x;
    return 0;
}

void slurm_executor_stop(slurm_executor *x)
{
    if (!x)
        return;
    if (x->started) {
        pthread_mutex_lock(&x->mu);
        x->stop = 1;
        pthread_cond_signal(&x->cv);
        pthread_mutex_unlock(&x->mu);
        pthread_join(x->thread, NULL);
    }
    if (x->own_db)
        db_close(x->d);
    pthread_mutex_destroy(&x->mu);
    pthread_cond_destroy(&x->cv);
    free(x);
}
