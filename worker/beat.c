/* beat: a job's heartbeat thread (see agent_priv.h), and the hooks that feed its queues.
 *
 * A heartbeat (POST .../heartbeat) carries the log lines, epochs, phase and dataset bytes queued
 * since the last one; its answer says whether the job was cancelled, whether the server asks for
 * a graceful stop, or (404/409) that the lease is lost. It goes every AGENT_HEARTBEAT_MS, at once
 * when something urgent is queued (an epoch, a phase), and after a failure with a backoff up to
 * AGENT_BEAT_BACKOFF_MS, keeping what it carried queued. A pending checkpoint is uploaded right
 * after a heartbeat that carried every epoch queued before it (agent.c's top comment says why). */
#include "worker/agent_priv.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util/err.h"
#include "util/utf8.h"

#define AGENT_BEAT_BACKOFF_MS 2000 /* heartbeat retries: from AGENT_HEARTBEAT_MS up to this */
#define AGENT_MAX_LOG_QUEUE   10000
#define AGENT_LINES_PER_BEAT  1000 /* openapi Heartbeat.logs maxItems */
#define AGENT_EPOCHS_PER_BEAT 1000 /* and Heartbeat.epochs maxItems */
#define AGENT_LINE_BYTES      1000 /* and its maxLength: bytes bound characters */

/* Uploads the checkpoint copy at sending (a script job's snapshot with its epoch); on failure
 * it becomes pending again unless a newer one is. A lost checkpoint costs only retrained epochs
 * after a crash. */
static void beat_send_checkpoint(beat *b, const char *sending, const char *pending, int epoch)
{
    char err[ERR_LEN], why[512], path[1100];
    long status = 0;
    json_t *reply = NULL;
    if (b->script)
        snprintf(path, sizeof path, "%s?epoch=%d", b->ckpt_path, epoch);
    else
        snprintf(path, sizeof path, "%s", b->ckpt_path);
    int rc = client_put_file(b->c, path, sending, &status, &reply, err);
    if (rc == 0 && (status == 200 || status == 201)) {
        unlink(sending);
    } else {
        if (rc < 0) {
            agent_say("checkpoint upload failed, retrying: %s", err);
        } else {
            client_problem(status, reply, why, sizeof why);
            agent_say("checkpoint upload refused: %s", why);
        }
        pthread_mutex_lock(&b->mu);
        if (rc < 0 && !b->ckpt_pending && rename(sending, pending) == 0) {
            b->ckpt_pending = 1;
            b->ckpt_epoch = epoch;
        }
        pthread_mutex_unlock(&b->mu);
    }
    json_decref(reply);
}

/* A heartbeat takes epochs while they hold at most this many weight histograms (and at least
 * one epoch): about 2.5 MB of 30-bucket histograms, well below the server's cap on a body. */
#define AGENT_HISTOGRAMS_PER_BEAT 2048

/* The weight histograms the queued epochs carry (train/histogram.h). */
static size_t beat_histograms(const json_t *epochs)
{
    size_t n = 0, i;
    json_t *e;
    json_array_foreach (epochs, i, e)
        n += json_array_size(json_object_get(e, "histograms"));
    return n;
}

/* Sends what is queued; on a network failure the items go back to the front of the queue and
 * it returns 1 (retry after a backoff), else 0. */
static int beat_send(beat *b)
{
    pthread_mutex_lock(&b->mu);
    /* The server takes at most AGENT_LINES_PER_BEAT lines a heartbeat; the rest wait. */
    json_t *sent_logs = b->logs, *sent_epochs = b->epochs;
    b->logs = json_array();
    while (json_array_size(sent_logs) > AGENT_LINES_PER_BEAT) {
        json_array_insert(b->logs, 0, json_array_get(sent_logs, json_array_size(sent_logs) - 1));
        json_array_remove(sent_logs, json_array_size(sent_logs) - 1);
    }
    /* And at most AGENT_EPOCHS_PER_BEAT epochs, the oldest: epochs of a few milliseconds pile
     * up past it while a heartbeat waits on a slow server, and a larger one is refused. */
    b->epochs = json_array();
    size_t hists = beat_histograms(sent_epochs);
    while (json_array_size(sent_epochs) > AGENT_EPOCHS_PER_BEAT ||
           (json_array_size(sent_epochs) > 1 && hists > AGENT_HISTOGRAMS_PER_BEAT)) {
        size_t last = json_array_size(sent_epochs) - 1;
        hists -= json_array_size(json_object_get(json_array_get(sent_epochs, last), "histograms"));
        json_array_insert(b->epochs, 0, json_array_get(sent_epochs, last));
        json_array_remove(sent_epochs, last);
    }
    b->urgent = json_array_size(b->logs) > 0 || json_array_size(b->epochs) > 0;
    /* A pending checkpoint goes after this heartbeat: it carries the checkpoint's epochs (all
     * of them only when none stayed queued). */
    char pending[4200], sending[4200];
    snprintf(pending, sizeof pending, "%s/" AGENT_CKPT_PENDING, b->dir);
    snprintf(sending, sizeof sending, "%s/" AGENT_CKPT_SENDING, b->dir);
    int ckpt = 0, ckpt_epoch = b->ckpt_epoch;
    if (b->ckpt_pending && json_array_size(b->epochs) == 0) {
        ckpt = rename(pending, sending) == 0;
        b->ckpt_pending = 0;
    }
    json_t *body = json_pack("{s:O, s:O}", "epochs", sent_epochs, "logs", sent_logs);
    if (*b->phase)
        json_object_set_new(body, "phase", json_string(b->phase));
    if (b->dataset_bytes)
        json_object_set_new(body, "dataset_bytes", json_integer((json_int_t)b->dataset_bytes));
    b->dataset_bytes = 0; /* a heartbeat that fails loses them: they only feed a counter */
    pthread_mutex_unlock(&b->mu);

    char err[ERR_LEN];
    long status = 0;
    json_t *reply = NULL;
    int rc = client_post_json(b->c, b->path, body, &status, &reply, err);
    json_decref(body);
    int retry = 0;
    if (rc == 0 && status == 200) {
        if (json_is_true(json_object_get(reply, "cancel")))
            b->cancel = 1;
        const char *stop = json_string_value(json_object_get(reply, "stop"));
        if (stop && !b->stop_asked) {
            pthread_mutex_lock(&b->mu);
            snprintf(b->stop_words, sizeof b->stop_words, "%s", stop);
            pthread_mutex_unlock(&b->mu);
            b->stop_asked = 1;
            agent_say("the server asks to stop after this epoch: %s", stop);
        }
        if (ckpt)
            beat_send_checkpoint(b, sending, pending, ckpt_epoch);
    } else if (rc == 0 && (status == 404 || status == 409)) {
        char why[512];
        client_problem(status, reply, why, sizeof why);
        agent_say("lease lost: %s", why);
        b->lost = 1;
    } else {
        if (rc < 0)
            agent_say("heartbeat failed, retrying: %s", err);
        else
            agent_say("heartbeat answered %ld, retrying", status);
        pthread_mutex_lock(&b->mu);
        json_array_extend(sent_logs, b->logs);
        json_array_extend(sent_epochs, b->epochs);
        json_decref(b->logs);
        json_decref(b->epochs);
        b->logs = json_incref(sent_logs);
        b->epochs = json_incref(sent_epochs);
        if (ckpt && !b->ckpt_pending && rename(sending, pending) == 0) {
            b->ckpt_pending = 1; /* with its epochs, back to the queue */
            b->ckpt_epoch = ckpt_epoch;
        }
        pthread_mutex_unlock(&b->mu);
        retry = 1;
    }
    json_decref(sent_logs);
    json_decref(sent_epochs);
    json_decref(reply);
    return retry;
}

/* Whether anything waits for a heartbeat: log lines, epochs, a checkpoint. */
static int beat_queued(beat *b)
{
    pthread_mutex_lock(&b->mu);
    int n = json_array_size(b->logs) > 0 || json_array_size(b->epochs) > 0 || b->ckpt_pending;
    pthread_mutex_unlock(&b->mu);
    return n;
}

static void *beat_main(void *arg)
{
    beat *b = arg;
    long backoff = 0; /* ms; nonzero after a heartbeat that went unanswered */
    for (;;) {
        pthread_mutex_lock(&b->mu);
        if ((backoff || !b->urgent) && !b->done) {
            struct timespec until;
            long wait = backoff ? backoff : AGENT_HEARTBEAT_MS;
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_sec += wait / 1000;
            until.tv_nsec += (wait % 1000) * 1000000L;
            until.tv_sec += until.tv_nsec / 1000000000L;
            until.tv_nsec %= 1000000000L;
            pthread_cond_timedwait(&b->cv, &b->mu, &until);
        }
        int done = b->done;
        pthread_mutex_unlock(&b->mu);
        if (b->lost)
            break;
        int retry = beat_send(b);
        if (done) {
            /* The last ones flush what the job left queued, AGENT_EPOCHS_PER_BEAT epochs and
             * AGENT_LINES_PER_BEAT lines at a time; one that fails ends the flush (the next
             * attempt or the final report settles the job). */
            while (!retry && !b->lost && beat_queued(b))
                retry = beat_send(b);
            break;
        }
        backoff = !retry                                ? 0
                  : backoff * 2 > AGENT_BEAT_BACKOFF_MS ? AGENT_BEAT_BACKOFF_MS
                  : backoff                             ? backoff * 2
                                                        : AGENT_HEARTBEAT_MS;
    }
    return NULL;
}

int agent_beat_start(beat *b, const agent_opts *o, const char *prefix, const char *dir, int script,
                     char *err)
{
    memset(b, 0, sizeof *b);
    b->o = o;
    b->logs = json_array();
    b->epochs = json_array();
    b->dir = dir;
    b->script = script;
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->cv, NULL);
    snprintf(b->path, sizeof b->path, "%s/heartbeat", prefix);
    snprintf(b->ckpt_path, sizeof b->ckpt_path, "%s/checkpoint", prefix);
    int rc = client_new(o->server, o->token, &b->c, err);
    if (rc == 0)
        client_set_ca(b->c, o->ca_file, o->ca_pinned);
    b->have_thread = rc == 0 && pthread_create(&b->thread, NULL, beat_main, b) == 0;
    if (rc == 0 && !b->have_thread)
        rc = err_set(err, -EAGAIN, "cannot start the heartbeat thread");
    return rc;
}

void agent_beat_stop(beat *b)
{
    if (!b->have_thread)
        return;
    pthread_mutex_lock(&b->mu);
    b->done = 1;
    pthread_cond_signal(&b->cv);
    pthread_mutex_unlock(&b->mu);
    pthread_join(b->thread, NULL);
    b->have_thread = 0;
}

void agent_beat_free(beat *b)
{
    agent_beat_stop(b);
    client_free(b->c);
    json_decref(b->logs);
    json_decref(b->epochs);
    pthread_mutex_destroy(&b->mu);
    pthread_cond_destroy(&b->cv);
}

/* A JSON string of text that may hold any bytes (a dataset's, a header's): made valid UTF-8. */
json_t *agent_json_text(const char *text, size_t cap)
{
    char clean[4096];
    utf8_clean(clean, cap < sizeof clean ? cap : sizeof clean, text);
    return json_string(clean);
}

void agent_hook_log(void *user, const char *line)
{
    beat *b = user;
    pthread_mutex_lock(&b->mu);
    if (json_array_size(b->logs) < AGENT_MAX_LOG_QUEUE)
        json_array_append_new(b->logs, agent_json_text(line, AGENT_LINE_BYTES));
    pthread_mutex_unlock(&b->mu);
    fprintf(stderr, "%s\n", line);
}

/* The Heartbeat's phase (openapi.yaml) for a trainer phase. The service's "uploading" covers
 * the artifacts' whole way to the server: the trainer saving them, then upload() sending them. */
static const char *agent_phase_name(int phase)
{
    switch (phase) {
    case TRAINER_PHASE_DOWNLOADING:
        return "downloading";
    case TRAINER_PHASE_TRAINING:
        return "training";
    default:
        return "uploading";
    }
}

void agent_hook_phase(void *user, int phase)
{
    beat *b = user;
    pthread_mutex_lock(&b->mu);
    snprintf(b->phase, sizeof b->phase, "%s", agent_phase_name(phase));
    b->urgent = 1;
    pthread_cond_signal(&b->cv);
    pthread_mutex_unlock(&b->mu);
}

void agent_hook_dataset(void *user, uint64_t bytes)
{
    beat *b = user;
    pthread_mutex_lock(&b->mu);
    b->dataset_bytes += bytes;
    pthread_mutex_unlock(&b->mu);
}

int agent_stop_asked(beat *b, char *why, size_t cap)
{
    if (!b->stop_asked)
        return 0;
    pthread_mutex_lock(&b->mu);
    snprintf(why, cap, "%s", b->stop_words);
    pthread_mutex_unlock(&b->mu);
    return 1;
}
