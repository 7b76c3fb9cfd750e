/* agent: the worker loop (see agent.h).
 *
 *   register ──▶ lease (long poll) ──▶ run: trainer on this thread,      ──▶ upload ──▶ complete
 *      ▲             │ 204                  heartbeat thread beside it            │
 *      │ 404         └──── again ◀────────────────────────────────────────────────┘
 *
 * A 404 on lease means the server forgot this worker (its database was replaced): register
 * again. Network failures back off from 0.1 s to 5 s and retry; they never end the worker.
 * When the server answers a heartbeat with 409/404 the lease is lost (the job was given to
 * another worker after a lapse): training stops and nothing is uploaded.
 *
 * Re-attaching: a server that goes away (restarted, killed, network cut) does not stop a job.
 * Training goes on; heartbeats are retried with a backoff capped at AGENT_BEAT_BACKOFF_MS (beat.c;
 * well under a lease) and keep what they carry queued; uploads and the completion are retried on
 * network failures and 502/503/504 for up to AGENT_RETRY_S. A server back on the same address
 * before the lease lapsed (the lapse is in its database) takes the next heartbeat as if nothing
 * happened: the same attempt goes on. One back later answers 409 and the attempt is dropped.
 *
 * Stopping (SIGTERM/SIGINT, *o->stop): the trainer finishes the epoch it is in and checkpoints
 * it (a second signal, *o->stop == 2, stops it at the next step instead, losing the epochs after
 * the last checkpoint), the heartbeat thread flushes its queue and that checkpoint, and the job
 * is handed back (POST .../release) so that it is queued again at once and resumes from the
 * checkpoint: a stopping worker never fails its job and, given the time, loses no epoch. A job
 * whose training had ended is uploaded and completed first. These wrap-up requests are not cut
 * short by the stop (the stop aborts only the lease poll and downloads) and give up, together,
 * AGENT_STOP_RETRY_S after the stop; then the lease lapses and the job is requeued all the same.
 *
 * Checkpoints: the trainer writes one after an epoch every o->checkpoint_seconds; the hook
 * copies it to checkpoint.pending (on the trainer thread: a local copy of a few MB, no network)
 * and the heartbeat thread uploads it (PUT .../checkpoint) right after a heartbeat that carried
 * every epoch queued before it, so the server never holds a checkpoint after an epoch whose
 * metrics it lacks. A newer checkpoint replaces a pending one that was not sent yet. A lease
 * that names a "checkpoint" (the job's earlier attempt lost its lease) is downloaded and resumed
 * from; one that cannot be downloaded or belongs to another job document is logged and the job
 * trains from scratch (its epochs then replace the stored ones: each epoch still appears once). */
#include "worker/agent.h"
#include "worker/agent_priv.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kernels/kernels.h"
#include "util/path.h"
#include "util/err.h"
#include "util/timeutil.h"
#include "util/url.h"
#include "util/utf8.h"
#include "train/checkpoint.h"
#include "kernels/devices.h"
#include "client/client.h"
#include "data/fetch.h"
#include "train/trainer.h"

#define AGENT_LEASE_WAIT_S 30
#define AGENT_RANKS_WAIT_S 60  /* a script job's rank 0 waits this long for the others' end */
#define AGENT_RETRY_S      600 /* uploads and completion: retried this long while unanswered */
#define AGENT_STOP_RETRY_S 5   /* ... and this long once the worker is stopping */
#define AGENT_CKPT_COPY    "checkpoint.copy"   /* the trainer thread's copy, being written */
#define AGENT_CKPT_RESUME  "checkpoint.resume" /* the server's checkpoint, downloaded */
#define AGENT_INIT_MODEL   "init.safetensors"  /* init_from's model, downloaded */

static const char *const artifact_names[] = {"model.safetensors", "model.onnx", "metrics.csv",
                                             "job.json", "train.log"};

json_t *agent_device_json(const ocl_device *d)
{
    json_t *o = json_pack("{s:i, s:s, s:s, s:b, s:s}", "index", d->index, "name", d->name, "type",
                          ocl_device_kind(d), "opencl", d->opencl, "found_by", d->found_by);
    if (d->opencl) { /* a GPU without OpenCL has no platform and no OpenCL C */
        json_object_set_new(o, "platform", json_string(d->platform_name));
        json_object_set_new(o, "compute_units", json_integer((json_int_t)d->compute_units));
        json_object_set_new(o, "opencl_c_version", json_string(d->c_version));
    }
    if (d->opencl || d->global_mem) /* nvidia-smi -L does not tell the memory */
        json_object_set_new(o, "global_mem_bytes", json_integer((json_int_t)d->global_mem));
    if (d->uuid[0])
        json_object_set_new(o, "uuid", json_string(d->uuid));
    return o;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

void agent_say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "worker: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* 1 when a request that failed (rc < 0: no answer; else the HTTP status) should be repeated:
 * the server is away, restarting or overloaded, and the job's lease outlives a short absence. */
static int agent_retryable(int rc, long status)
{
    return rc < 0 || status == 502 || status == 503 || status == 504;
}

/* Sleeps *backoff_ms (doubled for next time, up to 2 s) and returns 1 while before deadline
 * (time_mono() seconds), else 0 without sleeping. */
static int agent_retry_wait(double deadline, long *backoff_ms)
{
    if (time_mono() + *backoff_ms / 1000.0 > deadline)
        return 0;
    sleep_ms(*backoff_ms);
    *backoff_ms = *backoff_ms * 2 > 2000 ? 2000 : *backoff_ms * 2;
    return 1;
}

/* Until when a wrap-up request is retried: AGENT_RETRY_S from now, but once the worker is
 * stopping, all of its wrap-up shares one AGENT_STOP_RETRY_S from the first time this saw the
 * stop, so that a stopping worker exits in bounded time even with its server gone. Called by
 * the main thread only. */
static double agent_retry_deadline(const agent_opts *o)
{
    static double stop_by; /* set at the first call after a stop, cleared while none is */
    if (!*o->stop) {
        stop_by = 0;
        return time_mono() + AGENT_RETRY_S;
    }
    if (stop_by == 0)
        stop_by = time_mono() + AGENT_STOP_RETRY_S;
    return stop_by;
}

static json_t *num_or_null(double v)
{
    return isnan(v) ? json_null() : json_real(v);
}

void agent_queue_epoch(beat *b, json_t *epoch)
{
    pthread_mutex_lock(&b->mu);
    json_array_append(b->epochs, epoch);
    b->urgent = 1;
    pthread_cond_signal(&b->cv);
    pthread_mutex_unlock(&b->mu);
}

static int hook_epoch(void *user, const trainer_epoch *e)
{
    beat *b = user;
    json_t *m = json_pack("{s:i, s:f, s:o, s:o, s:o, s:f, s:f}", "epoch", e->epoch, "loss", e->loss,
                          "val_loss", num_or_null(e->val_loss), "accuracy",
                          num_or_null(e->accuracy), "val_accuracy", num_or_null(e->val_accuracy),
                          "seconds", e->seconds, "samples_per_second", e->samples_per_second);
    if (e->histograms)
        json_object_set(m, "histograms", e->histograms);
    agent_queue_epoch(b, m);
    json_decref(m);
    return b->cancel || b->lost || *b->o->stop;
}

/* Polled between steps: a cancel or a lost lease stops at once, a first stop signal only at
 * the end of the epoch (hook_epoch), so that its checkpoint loses nothing. */
static int hook_stop(void *user)
{
    beat *b = user;
    return b->cancel || b->lost || *b->o->stop > 1;
}

/* After an epoch: a graceful stop the server asked for ends training as if it were the last. */
static int hook_finish(void *user, char *why, size_t cap)
{
    return agent_stop_asked(user, why, cap);
}

/* Copies src to dst; -errno on failure. */
static int copy_file(const char *src, const char *dst)
{
    FILE *in = fopen(src, "rb");
    if (!in)
        return -errno;
    FILE *out = fopen(dst, "wb");
    if (!out) {
        int rc = -errno;
        fclose(in);
        return rc;
    }
    static __thread char buf[1 << 16];
    size_t n;
    int rc = 0;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0) {
        if (fwrite(buf, 1, n, out) != n) {
            rc = -EIO;
            break;
        }
    }
    if (ferror(in))
        rc = -EIO;
    fclose(in);
    if (fclose(out) != 0 && rc == 0)
        rc = -EIO;
    return rc;
}

/* Queues a copy of the checkpoint for the heartbeat thread (which uploads it). */
static void hook_checkpoint(void *user, const char *path, int epoch)
{
    beat *b = user;
    char copy[4200], pending[4200];
    snprintf(copy, sizeof copy, "%s/" AGENT_CKPT_COPY, b->dir);
    snprintf(pending, sizeof pending, "%s/" AGENT_CKPT_PENDING, b->dir);
    int rc = copy_file(path, copy);
    if (rc < 0) {
        agent_say("cannot copy the checkpoint after epoch %d for upload: %s", epoch, strerror(-rc));
        unlink(copy);
        return;
    }
    pthread_mutex_lock(&b->mu);
    if (rename(copy, pending) == 0) {
        b->ckpt_pending = 1;
        b->urgent = 1;
        pthread_cond_signal(&b->cv);
    }
    pthread_mutex_unlock(&b->mu);
}

/* ---- one job ------------------------------------------------------------------------------- */

static void remove_dir(const char *dir)
{
    char path[4200];
    for (size_t i = 0; i < sizeof artifact_names / sizeof artifact_names[0]; i++) {
        if (path_join(path, sizeof path, dir, artifact_names[i], NULL) == 0)
            unlink(path);
    }
    static const char *const others[] = {CHECKPOINT_FILE,    AGENT_CKPT_COPY,   AGENT_CKPT_PENDING,
                                         AGENT_CKPT_SENDING, AGENT_CKPT_RESUME, AGENT_INIT_MODEL};
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        if (path_join(path, sizeof path, dir, others[i], NULL) == 0)
            unlink(path);
    }
    rmdir(dir);
}

int agent_upload(const agent_opts *o, client *c, const char *prefix, const char *name,
                 const char *file, char *err)
{
    char path[1024], why[512];
    snprintf(path, sizeof path, "%s/artifacts/%s", prefix, name);
    long status = 0, backoff = 100;
    json_t *reply = NULL;
    double deadline = agent_retry_deadline(o);
    int rc = client_put_file(c, path, file, &status, &reply, err);
    while (agent_retryable(rc, status) && agent_retry_wait(deadline, &backoff)) {
        agent_say("uploading %s: %s, retrying", name, rc < 0 ? err : "the server is unavailable");
        json_decref(reply);
        reply = NULL;
        status = 0;
        rc = client_put_file(c, path, file, &status, &reply, err);
    }
    if (rc == 0 && status != 201) {
        client_problem(status, reply, why, sizeof why);
        rc = err_set(err, status == 507 ? -ENOSPC : -EIO, "uploading %s: %s%s", name, why,
                     status == 507 ? " (the server's disk is full: free space there and "
                                     "submit the job again)"
                                   : "");
    }
    json_decref(reply);
    return rc;
}

/* Uploads the trainer's artifacts (agent_upload). The job then fails for good on a refusal, a
 * full disk included (docs/OPERATIONS.md says why it is not retried). */
static int upload(const agent_opts *o, client *c, const char *prefix, const char *dir, char *err)
{
    for (size_t i = 0; i < sizeof artifact_names / sizeof artifact_names[0]; i++) {
        char file[4200];
        int rc = path_join(file, sizeof file, dir, artifact_names[i], err);
        if (rc == 0)
            rc = agent_upload(o, c, prefix, artifact_names[i], file, err);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* POSTs body (may be NULL) to prefix/<call>, retried while the server is away. */
static void report(const agent_opts *o, client *c, const char *prefix, const char *call,
                   json_t *body)
{
    char path[1024], err[ERR_LEN];
    snprintf(path, sizeof path, "%s/%s", prefix, call);
    long backoff = 100;
    double deadline = agent_retry_deadline(o);
    for (;;) {
        long status = 0;
        json_t *reply = NULL;
        int rc = client_post_json(c, path, body, &status, &reply, err);
        json_decref(reply);
        if (!agent_retryable(rc, status)) {
            if (status != 200)
                agent_say("%s answered %ld", call, status);
            break;
        }
        if (!agent_retry_wait(deadline, &backoff)) {
            agent_say("%s: giving up (%s); the lease lapses and the job is requeued", call,
                      rc < 0 ? err : "the server is unavailable");
            break;
        }
        agent_say("%s failed, retrying: %s", call, rc < 0 ? err : "the server is unavailable");
    }
}

/* The completion; res (may be NULL) adds how a job that ended early ended. */
static void complete_with(const agent_opts *o, client *c, const char *prefix,
                          const char *status_word, const char *error, const trainer_result *res)
{
    json_t *body = json_pack("{s:s}", "status", status_word);
    if (error)
        json_object_set_new(body, "error", agent_json_text(error, 4096));
    if (res && res->stop_reason[0])
        json_object_set_new(body, "stop_reason", agent_json_text(res->stop_reason, 2000));
    if (res && res->stopped_epoch > 0)
        json_object_set_new(body, "stopped_epoch", json_integer(res->stopped_epoch));
    if (res && res->best_epoch > 0)
        json_object_set_new(body, "best_epoch", json_integer(res->best_epoch));
    report(o, c, prefix, "complete", body);
    json_decref(body);
}

void agent_complete(const agent_opts *o, client *c, const char *prefix, const char *status_word,
                    const char *error)
{
    complete_with(o, c, prefix, status_word, error, NULL);
}

/* When the lease names a checkpoint, downloads it to dir/checkpoint.resume (path into out) and
 * returns 1 if it belongs to this job; else (none, or a failure, which is said) 0: the job
 * trains from scratch. */
static int fetch_checkpoint(client *c, const json_t *lease, const job_spec *job, const char *dir,
                            char *out, size_t cap)
{
    const char *from = json_string_value(json_object_get(lease, "checkpoint"));
    if (!from)
        return 0;
    char err[ERR_LEN] = "";
    long status = 0;
    checkpoint *ck = NULL;
    json_t *doc = NULL;
    snprintf(out, cap, "%s/" AGENT_CKPT_RESUME, dir);
    int rc = mkdir(dir, 0755) < 0 && errno != EEXIST
                 ? err_set(err, -errno, "cannot create %s: %s", dir, strerror(errno))
                 : 0;
    if (rc == 0)
        rc = client_download(c, from, out, &status, err);
    if (rc == 0 && status != 200)
        rc = err_set(err, -EIO, "the server answered %ld", status);
    if (rc == 0)
        rc = checkpoint_read(out, &ck, err);
    doc = rc == 0 ? job_to_json(job) : NULL;
    if (rc == 0 && !doc)
        rc = err_set(err, -ENOMEM, "out of memory");
    if (rc == 0)
        rc = checkpoint_check_job(ck, doc, err);
    if (rc == 0)
        agent_say("resuming from the checkpoint after epoch %d", checkpoint_state_of(ck)->epoch);
    else
        agent_say("cannot resume from the server's checkpoint, training from scratch: %s", err);
    json_decref(doc);
    checkpoint_free(ck);
    return rc == 0;
}

/* A warm start (the lease names "init_model"): downloads the model to start from into
 * dir/init.safetensors (path into out) and returns 1; 0 when the lease names none; -errno
 * when it cannot be had (err says why: the job then fails, since its document asks for it). */
static int fetch_init_model(client *c, const json_t *lease, const char *dir, char *out, size_t cap,
                            char *err)
{
    const char *from = json_string_value(json_object_get(lease, "init_model"));
    if (!from)
        return 0;
    long status = 0;
    snprintf(out, cap, "%s/" AGENT_INIT_MODEL, dir);
    int rc = mkdir(dir, 0755) < 0 && errno != EEXIST
                 ? err_set(err, -errno, "cannot create %s: %s", dir, strerror(errno))
                 : 0;
    char why[ERR_LEN] = "";
    if (rc == 0 && client_download(c, from, out, &status, why) < 0)
        rc = err_set(err, -EIO, "init_from: cannot download the model to start from: %s", why);
    else if (rc == 0 && status != 200)
        rc = err_set(err, -EIO,
                     "init_from: the server answered %ld for the model to start from (was its "
                     "job deleted?)",
                     status);
    return rc < 0 ? rc : 1;
}

/* The lease's job document (a new reference) with the dataset URL's credentials, which the
 * server keeps apart and the stored document shows as ***@, put back for the fetch; job_to_json
 * hides them again in everything the trainer writes. NULL when out of memory. */
static json_t *lease_document(const json_t *lease)
{
    json_t *doc = json_object_get(lease, "document");
    const char *userinfo = json_string_value(json_object_get(lease, "dataset_credentials"));
    const char *url = json_string_value(json_object_get(doc, "dataset_url"));
    if (!userinfo || !url)
        return json_incref(doc);
    char *full = url_userinfo_set(url, userinfo);
    json_t *copy = full ? json_copy(doc) : NULL;
    if (copy && json_object_set_new(copy, "dataset_url", json_string(full)) < 0) {
        json_decref(copy);
        copy = NULL;
    }
    if (full)
        explicit_bzero(full, strlen(full));
    free(full);
    return copy;
}

/* A distributed script job's rank 0, its script ended: waits for the other ranks' scripts to end
 * too (their last log lines are sent before they arrive), a while when it ended well, a moment
 * when it did not (the others are then stopped by the job's end). */
static void meet_ranks(beat *b, const trainer_group *g, int well)
{
    char why[ERR_LEN];
    if (g->meet(g->user, well ? AGENT_RANKS_WAIT_S : 5, b->o->stop, why) < 0)
        agent_hook_log(b, why);
}

/* Runs one leased job: the trainer (alone, or as rank 0 of g) or a script, with the heartbeat
 * thread beside it, then the upload and the final report. A job of several replicas leased by
 * this worker itself (g NULL) goes to its ranks instead (agent_group_launch). Returns 0 when
 * the trainer or script ran to its end, or a negative code when it failed or was stopped. */
static int run_job(const agent_opts *o, client *c, const char *worker_id, ocl_ctx *ctx, kern *k,
                   json_t *lease, const trainer_group *g)
{
    const char *job_id = json_string_value(json_object_get(lease, "job_id"));
    json_t *doc = lease_document(lease);
    char prefix[512], dir[4096], err[ERR_LEN] = "";
    snprintf(prefix, sizeof prefix, "/workers/%s/jobs/%s", worker_id, job_id);
    if (path_join(dir, sizeof dir, o->work_dir, job_id, err) < 0) {
        json_decref(doc);
        agent_complete(o, c, prefix, "failed", err);
        return -ENAMETOOLONG;
    }
    agent_say("job %s attempt %lld", job_id,
              (long long)json_integer_value(json_object_get(lease, "attempt")));

    field_errors errs = {0};
    job_spec *job = NULL;
    int bad = job_from_json(doc, &job, &errs) < 0;
    json_decref(doc);
    if (bad) {
        snprintf(err, sizeof err, "the server sent an invalid job: %s: %s", errs.items[0].field,
                 errs.items[0].message);
        agent_complete(o, c, prefix, "failed", err);
        return -EINVAL;
    }
    if (!g && job->replicas > 1) {
        /* Rank 0 reports the job; when the ranks ended before it did, the attempt is lost
         * (retried from the checkpoint while attempts are left), or handed back when this
         * worker is stopping. The server refuses either once rank 0 has reported. */
        int launched = agent_group_launch(o, worker_id, lease, job, dir, err);
        client_set_abort(c, NULL);
        if (launched < 0 && *o->stop)
            report(o, c, prefix, "release", NULL);
        else if (launched < 0)
            agent_complete(o, c, prefix, "lost", err);
        client_set_abort(c, o->stop);
        agent_say("job %s finished", job_id);
        remove_dir(dir);
        job_free(job);
        return launched;
    }

    int script = job_is_script(job);
    if (!script && !ctx) {
        /* The server leases built-in jobs only to workers with OpenCL; one that does not know
         * the "opencl" member of a device may still send one. */
        err_set(err, -ENODEV,
                "this worker's device (%s, found by %s) has no OpenCL, which a built-in job "
                "needs: run it on a worker with an OpenCL device",
                o->device_info->name, o->device_info->found_by);
        agent_complete(o, c, prefix, "failed", err);
        remove_dir(dir);
        job_free(job);
        return -ENODEV;
    }
    char resume[4200], init[4200];
    int resuming = !script && fetch_checkpoint(c, lease, job, dir, resume, sizeof resume);
    int warm = script || resuming ? 0 : fetch_init_model(c, lease, dir, init, sizeof init, err);
    if (warm < 0) {
        if (*o->stop) /* the download was cut short by the stop: not the job's fault */
            report(o, c, prefix, "release", NULL);
        else
            agent_complete(o, c, prefix, "failed", err);
        remove_dir(dir);
        job_free(job);
        return warm;
    }

    char private_dir[4200];
    snprintf(private_dir, sizeof private_dir, "%s/" AGENT_SCRIPT_PRIVATE, dir);
    beat b;
    int rc = agent_beat_start(&b, o, prefix, script ? private_dir : dir, script, err);

    trainer_result res = {0};
    int exit_code = 0;
    char tail[2048] = "";
    if (rc == 0 && script) {
        rc = agent_script_run(o, c, &b, lease, job, dir, &exit_code, &res.stopped, &res, tail,
                              sizeof tail, err);
        if (g && g->size > 1 && g->meet)
            meet_ranks(&b, g, rc == 0 && exit_code == 0 && !res.stopped);
    } else if (rc == 0) {
        trainer_opts topts = {.out_dir = dir,
                              .dataset_root = o->dataset_root,
                              .dataset_allow = o->dataset_allow,
                              .dataset_ca = o->dataset_ca,
                              .dataset_stall_s = o->dataset_stall_s,
                              .max_dataset_bytes = o->max_dataset_bytes,
                              .dataset_cache = o->dataset_cache,
                              .s3 = o->s3,
                              .resume_from = resuming ? resume : NULL,
                              .init_model = warm ? init : NULL,
                              .checkpoint_seconds = o->checkpoint_seconds,
                              .stop_download = o->stop,
                              .group = g};
        trainer_hooks hooks = {.user = &b,
                               .on_log = agent_hook_log,
                               .on_phase = agent_hook_phase,
                               .on_epoch = hook_epoch,
                               .should_stop = hook_stop,
                               .should_finish = hook_finish,
                               .on_checkpoint = hook_checkpoint,
                               .on_dataset = agent_hook_dataset};
        rc = trainer_run(job, ctx, k, &topts, &hooks, &res, err);
    }
    int ran = rc; /* the trainer's own outcome, before the upload's */
    agent_beat_stop(&b);

    /* The wrap-up must reach the server even when a stop aborts the lease poll (see top). */
    client_set_abort(c, NULL);
    int trained = rc == 0 && !res.stopped;
    if (b.lost) {
        agent_say("job %s: lease lost, dropping the attempt", job_id);
    } else if (res.stopped && b.cancel) {
        agent_complete(o, c, prefix, "cancelled", NULL);
    } else if (*o->stop && !trained) {
        /* Stopped by a signal (which may also have cut a download short): the job is not this
         * attempt's to fail. Its newest checkpoint went with the last heartbeat. */
        agent_say("job %s: stopping; handing it back to the queue", job_id);
        report(o, c, prefix, "release", NULL);
    } else if (rc < 0) {
        agent_complete(o, c, prefix, "failed", err);
    } else if (script && exit_code != 0) {
        /* In a distributed job any rank's failure (its own, or a peer's that took it along) is a
         * rank that died: retried while attempts are left, as a built-in job's rank is. */
        int ranks = o->script_ranks > 1;
        char why[4096];
        snprintf(why, sizeof why, "%s", ranks ? "rank 0: " : "");
        agent_script_ended(job, exit_code, tail, why + strlen(why), sizeof why - strlen(why));
        agent_complete(o, c, prefix, ranks ? "lost" : "failed", why);
    } else {
        rc = script ? agent_script_upload(o, c, prefix, job, dir, err)
                    : upload(o, c, prefix, dir, err);
        if (rc < 0 && *o->stop && rc != -ENOSPC) {
            agent_say("job %s: stopping before its upload ended (%s); handing it back", job_id,
                      err);
            report(o, c, prefix, "release", NULL);
        } else {
            complete_with(o, c, prefix, rc == 0 ? "succeeded" : "failed", rc == 0 ? NULL : err,
                          rc == 0 ? &res : NULL);
        }
    }
    client_set_abort(c, o->stop);
    agent_say("job %s finished", job_id);
    if (script)
        agent_script_cleanup(dir);
    else
        remove_dir(dir);
    agent_beat_free(&b);
    job_free(job);
    return ran;
}

void agent_report_lost(const agent_opts *o, client *c, const char *worker_id, const json_t *lease,
                       const char *why)
{
    const char *job_id = json_string_value(json_object_get(lease, "job_id"));
    char prefix[512], err[ERR_LEN];
    client *own = NULL;
    if (!job_id)
        return;
    snprintf(prefix, sizeof prefix, "/workers/%s/jobs/%s", worker_id, job_id);
    if (!c && client_new(o->server, o->token, &own, err) == 0) {
        client_set_ca(own, o->ca_file, o->ca_pinned);
        c = own;
    }
    if (c)
        agent_complete(o, c, prefix, "lost", why);
    client_free(own);
}

int agent_lead(const agent_opts *o, client *c, const char *worker_id, ocl_ctx *ctx, kern *k,
               json_t *lease, const trainer_group *g)
{
    return run_job(o, c, worker_id, ctx, k, lease, g);
}

/* ---- the loop ------------------------------------------------------------------------------ */

int agent_pick_device(const char *want, ocl_device *out, char *err)
{
    return devices_pick(want, out, err);
}

static int register_worker(const agent_opts *o, client *c, const ocl_device *dev, char *id,
                           size_t cap, char *err)
{
    char host[256] = "worker", name[512];
    gethostname(host, sizeof host - 1);
    if (o->name)
        snprintf(name, sizeof name, "%s", o->name);
    else
        snprintf(name, sizeof name, "%s-%d", host, (int)getpid());
    json_t *body =
        json_pack("{s:s, s:[o], s:b, s:i}", "name", name, "devices", agent_device_json(dev),
                  "scripts", o->allow_scripts, "slots", agent_group_slots(o));
    long backoff = 100;
    int rc = 0;
    while (!*o->stop) {
        long status = 0;
        json_t *reply = NULL;
        rc = client_post_json(c, "/workers", body, &status, &reply, err);
        if (rc == 0 && status == 201) {
            snprintf(id, cap, "%s", json_string_value(json_object_get(reply, "id")));
            json_decref(reply);
            json_decref(body);
            agent_say("registered as %s (%s) with %s", id, name, dev->name);
            return 0;
        }
        if (rc == 0) {
            char why[512];
            client_problem(status, reply, why, sizeof why);
            agent_say("registration refused: %s", why);
        } else if (rc == -EKEYREJECTED) {
            break; /* the same certificate fails the same way: say so and stop */
        } else {
            agent_say("cannot reach %s, retrying: %s", o->server, err);
        }
        json_decref(reply);
        sleep_ms(backoff);
        backoff = backoff * 2 > 5000 ? 5000 : backoff * 2;
    }
    json_decref(body);
    if (rc == -EKEYREJECTED)
        return rc;
    return err_set(err, -EINTR, "stopped before registering");
}

int agent_run(const agent_opts *given, char *err)
{
    agent_opts mine = *given, *o = &mine; /* with the device, for script jobs */
    ocl_device dev;
    ocl_ctx *ctx = NULL;
    kern *k = NULL;
    client *c = NULL;
    char worker_id[128];
    int rc = fetch_global_init(err);
    if (rc == 0)
        rc = agent_pick_device(agent_first_device(o->device), &dev, err);
    mine.device_info = &dev;
    /* A GPU without OpenCL (found by NVML or nvidia-smi) runs script jobs only: no kernels. */
    int opencl = rc == 0 && dev.opencl;
    if (rc == 0 && !opencl && !o->allow_scripts)
        rc = err_set(err, -ENODEV,
                     "%s has no OpenCL (found by %s): it can run only script jobs, which this "
                     "worker does not take; start it with --allow-scripts, or install the GPU's "
                     "OpenCL driver (see `trainyard devices`)",
                     dev.name, dev.found_by);
    if (opencl)
        rc = ocl_ctx_new(&dev, NULL, &ctx, err);
    if (opencl && rc == 0)
        rc = kern_new(ctx, &k, err);
    double t_warm = time_mono();
    if (opencl && rc == 0 && kern_warmup(k, err) < 0)
        agent_say("kernel warm-up failed, kernels compile on first use instead: %s", err);
    t_warm = time_mono() - t_warm;
    if (opencl && rc == 0)
        ocl_ctx_save(ctx); /* with what the warm-up compiled: the next worker compiles nothing */
    if (rc == 0)
        rc = client_new(o->server, o->token, &c, err);
    if (rc < 0)
        goto out;
    client_set_ca(c, o->ca_file, o->ca_pinned);
    client_set_abort(c, o->stop);
    if (opencl)
        agent_say("device %s, kernels %s in %.2fs, warmed up in %.2fs", dev.name,
                  ctx->from_cache ? "from cache" : "compiled", ctx->build_seconds, t_warm);
    else
        agent_say("device %s (%s, found by %s) has no OpenCL: taking script jobs only; built-in "
                  "jobs need an OpenCL device",
                  dev.name, dev.uuid, dev.found_by);
    client_set_timeout(c, AGENT_LEASE_WAIT_S + 30);
    rc = register_worker(o, c, &dev, worker_id, sizeof worker_id, err);

    int jobs = 0;
    long backoff = 100;
    while (rc == 0 && !*o->stop && (o->max_jobs == 0 || jobs < o->max_jobs)) {
        char path[512];
        snprintf(path, sizeof path, "/workers/%s/lease?wait=%d", worker_id, AGENT_LEASE_WAIT_S);
        long status = 0;
        json_t *lease = NULL;
        int lrc = client_post_json(c, path, NULL, &status, &lease, err);
        if (lrc < 0 || (status != 200 && status != 204 && status != 404)) {
            if (lrc < 0)
                agent_say("lease failed, retrying: %s", err);
            else
                agent_say("lease answered %ld, retrying", status);
            json_decref(lease);
            sleep_ms(backoff);
            backoff = backoff * 2 > 5000 ? 5000 : backoff * 2;
            continue;
        }
        backoff = 100;
        if (status == 404) {
            rc = register_worker(o, c, &dev, worker_id, sizeof worker_id, err);
        } else if (status == 200 && json_is_object(lease)) {
            run_job(o, c, worker_id, ctx, k, lease, NULL);
            jobs++;
        }
        json_decref(lease);
    }
    if (rc == -EINTR)
        rc = 0;
out:
    client_free(c);
    kern_free(k);
    ocl_ctx_free(ctx);
    return rc;
}
