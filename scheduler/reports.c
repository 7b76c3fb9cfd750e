/* reports: what a running job's worker reports while it holds the lease — heartbeats (lease,
 * phase, metrics, log lines) and artifact uploads. Both are transitions running → running of
 * lifecycle.h and follow its shape: one BEGIN IMMEDIATE transaction, checked against the lease
 * holder, with a job_events row where something a person would want in the history happened
 * (a phase change, an artifact stored; not every heartbeat).
 *
 * Artifacts: the upload arrives in a temporary file under the data directory; its SHA-256 is
 * the caller's, computed as the body streamed to that file (http_body_sha256), so nothing here
 * reads the file back to hash it, and the write lock never waits on a hash. Inside the transaction
 * the file is fsync'ed, renamed to <artifacts_dir>/<id>/<name> (a copy when the two folders are on
 * different file systems) and its row written, so a concurrent delete of the job (which takes the
 * same lock) never leaves a file behind, and a row never exists for a file that is not complete on
 * disk.
 *
 * Checkpoints: the newest one of a running job is artifacts/<id>/.checkpoint (util/datadir.h),
 * never listed (sched_checkpoint_store), with its upload's digest beside it in
 * .checkpoint.sha256. Once the job has ended, nothing resumes from it: it is deleted, or, when
 * the job document says "delete_checkpoint": false, renamed to the artifact
 * checkpoint.safetensors and recorded like an upload with that digest (sched_settle_stage).
 * The digest file is a hint that is never stale: it is removed before a new checkpoint replaces
 * the old one (the directory fsync of that replacement makes the removal durable with it) and
 * written after; where it is missing or unreadable (a crash between the two, a checkpoint from
 * an older version) settle hashes the file instead. */
#include "scheduler/reports.h"

#include "scheduler/lifecycle.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "db/events.h"
#include "db/logs.h"
#include "db/workers.h"
#include "scheduler/sweep.h"
#include "scheduler/event_file.h"
#include "util/datadir.h"
#include "util/names.h"
#include "util/sha256.h"

int sched_job_heartbeat(db *d, const char *job_id, const char *worker_id, const sched_progress *p,
                        int64_t now, int lease_seconds, sched_beat *out, char *err)
{
    db_job j;
    int64_t lease_until = now + (int64_t)lease_seconds * 1000;
    int log_lines = 0;
    int rc = sched_job_begin_leased(d, job_id, worker_id, &j, err);
    if (rc < 0)
        return rc;
    rc = db_worker_seen(d, worker_id, now, err);
    if (rc < 0)
        goto out;
    log_lines = j.log_lines;
    rc = db_log_append(d, j.seq, &log_lines, now, p->logs, p->n_logs, err);
    if (rc < 0)
        goto out;
    for (size_t i = 0; i < p->n_epochs; i++) {
        db_metric m = p->epochs[i];
        m.attempt = j.attempt;
        m.at = now;
        rc = db_metric_put(d, j.seq, &m, err);
        if (rc < 0)
            goto out;
    }
    for (size_t i = 0; i < p->n_histograms; i++) {
        rc = db_histogram_put(d, j.seq, &p->histograms[i], err);
        if (rc < 0)
            goto out;
    }
    /* A sweep's trial at an ASHA rung: judged now, so this answer carries a stop. A failure
     * leaves it to the controller's next pass (scheduler/sweep.h). */
    if (j.sweep_seq > 0 && p->n_epochs > 0) {
        char why[ERR_LEN];
        sched_sweep_judge(d, &j, p->epochs, p->n_epochs, now, why);
    }
    if (p->phase != DB_PHASE_NONE && p->phase != j.phase) {
        char reason[64];
        snprintf(reason, sizeof reason, "phase %s", db_phase_name(p->phase));
        rc = db_event_append(d, j.seq, now, DB_RUNNING, DB_RUNNING, p->phase, j.attempt, reason,
                             err);
        if (rc < 0)
            goto out;
    }
    rc = db_job_set_lease(d, j.seq, worker_id, p->phase, lease_until, log_lines, err);
    if (rc >= 0 && rc != 1)
        rc = err_set(err, -EIO, "extending the lease changed %d rows instead of 1", rc);
    if (rc < 0)
        goto out;
    rc = db_commit(d, err);
    if (rc == 0) {
        out->cancel = j.cancel_requested;
        snprintf(out->stop, sizeof out->stop, "%s", j.stop_requested);
        out->lease_expires_at = lease_until;
    }
    db_job_clear(&j);
    return rc;
out:
    db_rollback(d);
    db_job_clear(&j);
    return rc;
}

/* ---- artifacts -------------------------------------------------------------------------- */

int sched_artifact_name_ok(const char *name)
{
    return name_artifact_ok(name);
}

/* fsync of a path (a file's data, or a folder's entries). */
static int sched_fsync_path(const char *path, int flags, char *err)
{
    int fd = open(path, flags | O_CLOEXEC);
    if (fd < 0)
        return err_set(err, -errno, "cannot open %s: %s", path, strerror(errno));
    int rc = 0;
    if (fsync(fd) < 0)
        rc = err_set(err, -errno, "cannot sync %s: %s", path, strerror(errno));
    close(fd);
    return rc;
}

/* Copies src to dst (through dst.part and a rename), for an upload on another file system. */
static int sched_copy_file(const char *src, const char *dst, char *err)
{
    char part[DATADIR_PATH_MAX];
    char buf[1 << 16];
    int rc = datadir_beside(dst, ".part", part);
    if (rc < 0)
        return err_set(err, rc, "%s: path too long", dst);
    int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return err_set(err, -errno, "cannot open the upload %s: %s", src, strerror(errno));
    int outfd = open(part, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (outfd < 0) {
        rc = err_set(err, -errno, "cannot create %s: %s", part, strerror(errno));
        close(in);
        return rc;
    }
    for (;;) {
        ssize_t n = read(in, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = err_set(err, -errno, "cannot read the upload: %s", strerror(errno));
            break;
        }
        if (n == 0)
            break;
        for (ssize_t off = 0; off < n && rc == 0;) {
            ssize_t w = write(outfd, buf + off, (size_t)(n - off));
            if (w < 0 && errno != EINTR)
                rc = err_set(err, -errno, "cannot write %s: %s", part, strerror(errno));
            else if (w > 0)
                off += w;
        }
        if (rc < 0)
            break;
    }
    if (rc == 0 && fsync(outfd) < 0)
        rc = err_set(err, -errno, "cannot sync %s: %s", part, strerror(errno));
    if (close(outfd) < 0 && rc == 0)
        rc = err_set(err, -errno, "cannot write %s: %s", part, strerror(errno));
    close(in);
    if (rc == 0 && rename(part, dst) < 0)
        rc = err_set(err, -errno, "cannot rename %s: %s", part, strerror(errno));
    if (rc < 0)
        unlink(part);
    else
        unlink(src);
    return rc;
}

/* Puts the upload at <artifacts_dir>/<job_id>/<name> (final) for good: mkdir, fsync, rename (or
 * copy), fsync the folder. final gets the file's path once the file is there. */
static int sched_artifact_place(const char *artifacts_dir, const char *job_id, const char *name,
                                const char *tmp_path, char final[DATADIR_PATH_MAX], char *err)
{
    char dir[DATADIR_PATH_MAX], path[DATADIR_PATH_MAX];
    int rc = datadir_job_dir(artifacts_dir, job_id, dir);
    if (rc == 0)
        rc = datadir_job_file(artifacts_dir, job_id, name, path);
    if (rc < 0)
        return err_set(err, rc, "%s: the artifact's path is too long", artifacts_dir);
    if (mkdir(dir, 0755) < 0 && errno != EEXIST)
        return err_set(err, -errno, "cannot create %s: %s", dir, strerror(errno));
    rc = sched_fsync_path(tmp_path, O_RDONLY, err);
    if (rc < 0)
        return rc;
    if (rename(tmp_path, path) < 0) {
        if (errno != EXDEV)
            return err_set(err, -errno, "cannot move the upload to %s: %s", path, strerror(errno));
        rc = sched_copy_file(tmp_path, path, err);
        if (rc < 0)
            return rc;
    }
    memcpy(final, path, sizeof path);
    return sched_fsync_path(dir, O_RDONLY | O_DIRECTORY, err);
}

/* -EDQUOT when job j already has SCHED_MAX_ARTIFACTS artifacts and name is not one of them
 * (a replacement always has room). */
static int sched_artifact_room(db *d, const db_job *j, const char *name, char *err)
{
    db_artifact old;
    int64_t n = 0;
    int rc = db_artifact_get(d, j->seq, name, &old, err);
    if (rc != -ENOENT)
        return rc;
    rc = db_artifact_count(d, j->seq, &n, err);
    if (rc < 0)
        return rc;
    if (n >= SCHED_MAX_ARTIFACTS)
        return err_set(err, -EDQUOT, "job %s already has %d artifacts, the most a job may keep",
                       j->id, SCHED_MAX_ARTIFACTS);
    return 0;
}

int sched_artifact_add(db *d, const char *job_id, const char *worker_id, const char *artifacts_dir,
                       const char *tmp_path, const db_artifact *a, char *err)
{
    if (!sched_artifact_name_ok(a->name))
        return err_set(err, -EINVAL,
                       "artifact names are 1 to 128 letters, digits, '.', '_' or '-', not "
                       "starting with '.'");
    db_job j;
    char final[DATADIR_PATH_MAX], reason[256];
    final[0] = '\0';
    int rc = sched_job_begin_leased(d, job_id, worker_id, &j, err);
    if (rc < 0)
        return rc;
    rc = sched_artifact_room(d, &j, a->name, err);
    if (rc < 0)
        goto out;
    rc = sched_artifact_place(artifacts_dir, j.id, a->name, tmp_path, final, err);
    if (rc < 0) {
        final[0] = '\0'; /* nothing of ours to remove */
        goto out;
    }
    rc = db_artifact_put(d, j.seq, a, err);
    if (rc < 0)
        goto out;
    snprintf(reason, sizeof reason, "artifact %s stored (%lld bytes)", a->name, (long long)a->size);
    rc = db_event_append(d, j.seq, a->created_at, DB_RUNNING, DB_RUNNING, j.phase, j.attempt,
                         reason, err);
    if (rc < 0)
        goto out;
    rc = db_worker_seen(d, worker_id, a->created_at, err);
    if (rc < 0)
        goto out;
    rc = db_commit(d, err);
    if (rc < 0 && final[0])
        unlink(final);
    db_job_clear(&j);
    return rc < 0 ? rc : 0;
out:
    db_rollback(d);
    if (final[0])
        unlink(final);
    db_job_clear(&j);
    return rc;
}

/* ---- checkpoints ------------------------------------------------------------------------ */

/* The checkpoint's digest file, beside it: <checkpoint>.sha256 (a hint that saves hashing a
 * kept checkpoint again; see the top of this file). */
static int sched_digest_path(const char *artifacts_dir, const char *job_id,
                             char out[DATADIR_PATH_MAX])
{
    char ckpt[DATADIR_PATH_MAX];
    int rc = datadir_job_checkpoint(artifacts_dir, job_id, ckpt);
    return rc < 0 ? rc : datadir_beside(ckpt, ".sha256", out);
}

/* Writes hex into the digest file at path (by rename, so it is whole or absent). Best effort:
 * without it, sched_settle_stage hashes the checkpoint itself. */
static void sched_digest_write(const char *path, const char *hex)
{
    char tmp[DATADIR_PATH_MAX];
    if (datadir_beside(path, ".tmp", tmp) < 0)
        return;
    FILE *f = fopen(tmp, "we");
    if (!f)
        return;
    int ok = fprintf(f, "%s\n", hex) == 65;
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path) < 0)
        unlink(tmp);
}

/* Reads a digest file's 64 lowercase hex digits into hex; -EINVAL when missing or malformed. */
static int sched_digest_read(const char *path, char hex[65])
{
    char line[80];
    FILE *f = fopen(path, "re");
    if (!f)
        return -EINVAL;
    char *got = fgets(line, sizeof line, f);
    fclose(f);
    if (!got || strlen(line) != 65 || line[64] != '\n' || strspn(line, "0123456789abcdef") != 64)
        return -EINVAL;
    memcpy(hex, line, 64);
    hex[64] = '\0';
    return 0;
}

int sched_checkpoint_store(db *d, const char *job_id, const char *worker_id,
                           const char *artifacts_dir, const char *tmp_path, const char *sha256,
                           int epoch, int *stored, char *err)
{
    db_job j;
    char final[DATADIR_PATH_MAX], digest[DATADIR_PATH_MAX];
    int have = 0;
    int rc = sched_job_begin_leased(d, job_id, worker_id, &j, err);
    if (rc < 0)
        return rc;
    rc = db_job_checkpoint_epoch(d, j.seq, &have, err);
    if (rc < 0)
        goto out;
    /* A script's snapshot of the same epoch is newer than the stored one (it changed since):
     * it replaces it. A built-in checkpoint is only ever after a whole epoch. */
    int newer = j.script ? epoch >= have : epoch > have;
    if (newer) {
        rc = db_job_set_checkpoint_epoch(d, j.seq, epoch, err);
        if (rc < 0)
            goto out;
        /* The file replaces the older one before the commit: should the commit fail, the file
         * is newer than the recorded epoch, and a resume merely starts later than the metrics
         * say (the resumed attempt's epochs replace their rows). */
        rc = sched_digest_path(artifacts_dir, j.id, digest);
        if (rc < 0)
            goto out;
        (void)unlink(digest); /* the old checkpoint's; gone before the new file is in place */
        rc = sched_artifact_place(artifacts_dir, j.id, DATADIR_CHECKPOINT_NAME, tmp_path, final,
                                  err);
        if (rc < 0)
            goto out;
        if (sha256)
            sched_digest_write(digest, sha256);
    }
    rc = db_commit(d, err);
    db_job_clear(&j);
    if (rc == 0)
        *stored = newer;
    return rc;
out:
    db_rollback(d);
    db_job_clear(&j);
    return rc;
}

/* ---- a finished job's files ------------------------------------------------------------ */

/* 1 unless the job document (JSON text) keeps its checkpoint: "delete_checkpoint": false. */
static int sched_checkpoint_unwanted(const char *document)
{
    json_t *doc = json_loads(document ? document : "{}", 0, NULL);
    int unwanted = !json_is_false(json_object_get(doc, "delete_checkpoint"));
    json_decref(doc);
    return unwanted;
}

/* Moves job j's checkpoint at path to its artifact name and records it, in the caller's
 * transaction; s->kept and s->checkpoint say where it went from and to, for the undo. */
static int sched_checkpoint_keep(db *d, const char *artifacts_dir, const db_job *j, int64_t now,
                                 const char *path, const char *digest, sched_settle *s, char *err)
{
    db_artifact a;
    struct stat st;
    uint64_t size = 0;
    memset(&a, 0, sizeof a);
    snprintf(a.name, sizeof a.name, "%s",
             j->script ? SCHED_CHECKPOINT_KEPT_SCRIPT : SCHED_CHECKPOINT_KEPT);
    /* The upload's digest, kept since it streamed in; hashed here only when it is missing (a
     * crash between a checkpoint and its digest), the one case that holds the lock for a hash. */
    if (sched_digest_read(digest, a.sha256) == 0 && stat(path, &st) == 0) {
        size = (uint64_t)st.st_size;
    } else {
        int rc = sha256_file(path, a.sha256, &size, err);
        if (rc < 0)
            return rc;
    }
    a.size = (int64_t)size;
    a.created_at = now;
    int rc = sched_artifact_place(artifacts_dir, j->id, a.name, path, s->kept, err);
    if (rc == 0)
        rc = db_artifact_put(d, j->seq, &a, err);
    if (rc == 0) {
        snprintf(s->checkpoint, sizeof s->checkpoint, "%s", path);
        snprintf(s->digest, sizeof s->digest, "%s", digest);
    } else if (s->kept[0]) { /* no row names it: back where it was */
        if (rename(s->kept, path) < 0)
            (void)unlink(s->kept);
        s->kept[0] = '\0';
    }
    return rc;
}

void sched_settle_stage(db *d, const char *artifacts_dir, const db_job *j, int64_t now,
                        sched_settle *s)
{
    char path[DATADIR_PATH_MAX], digest[DATADIR_PATH_MAX], err[ERR_LEN];
    memset(s, 0, sizeof *s);
    if (!artifacts_dir)
        return;
    err[0] = '\0';
    if (sched_tfevents_write(d, artifacts_dir, j, now, s->tfevents, err) < 0)
        fprintf(stderr, "trainyard: job %s: the tfevents artifact was not written: %s\n", j->id,
                err);
    if (datadir_job_checkpoint(artifacts_dir, j->id, path) < 0 ||
        sched_digest_path(artifacts_dir, j->id, digest) < 0 || access(path, F_OK) != 0)
        return;
    if (sched_checkpoint_unwanted(j->document)) {
        snprintf(s->drop, sizeof s->drop, "%s", path); /* after the commit */
        snprintf(s->digest, sizeof s->digest, "%s", digest);
        return;
    }
    err[0] = '\0';
    if (sched_checkpoint_keep(d, artifacts_dir, j, now, path, digest, s, err) < 0)
        fprintf(stderr, "trainyard: job %s: the checkpoint was not kept: %s\n", j->id, err);
}

void sched_settle_end(const sched_settle *s, int committed)
{
    if (committed) {
        if (s->drop[0])
            (void)unlink(s->drop);
        if (s->digest[0])
            (void)unlink(s->digest);
        return;
    }
    if (s->tfevents[0])
        (void)unlink(s->tfevents);
    if (s->kept[0] && rename(s->kept, s->checkpoint) < 0)
        (void)unlink(s->kept); /* no row names it: the file must not outlive the failure */
}
