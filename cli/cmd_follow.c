/* cmd_follow: `submit --follow` and `status --follow` — a job watched through its event stream
 * (GET /jobs/{id}/events, Server-Sent Events) until it ends, then a summary.
 *
 * The stream is parsed line by line (cli_lines): "event: NAME", "data: JSON" (several data lines
 * join with "\n"), a blank line dispatches, ":" lines are keep-alives. `status` events carry the
 * job, `metrics` events one EpochMetrics. The server sends the current status and every epoch so
 * far first, so a stream that drops (server restart) is simply opened again; epochs already
 * shown are not shown twice (until a new attempt starts, whose resumed epochs are news).
 *
 * Output: on a terminal one line redrawn in place ("\r", then erase to its end) with a bar of
 * the epochs done; otherwise plain lines, one per status change and one per epoch, which is
 * what logs and tests read. --json prints nothing until the end, then one object
 * {"job", "epochs", "artifacts"}. The exit status is 0 only for a succeeded job. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli_client.h"
#include "util/dynbuf.h"
#include "util/err.h"

#define FOLLOW_RECONNECTS 5
#define FOLLOW_BAR_WIDTH  20
/* The most one event's data may hold: a status event carries the job with its document (at
 * most 1 MiB as submitted); past this the stream is not a trainyard server's. */
#define FOLLOW_EVENT_MAX (8u << 20)

typedef struct follow {
    const cli_conn *o;
    cli_lines lines;
    char event[32];
    dynbuf data;    /* the event's data so far, capped at FOLLOW_EVENT_MAX */
    int too_big;    /* an event passed FOLLOW_EVENT_MAX: the stream is given up */
    json_t *job;    /* the newest status event */
    json_t *epochs; /* the epochs so far, in order (a replaced one is replaced) */
    long shown;     /* the highest epoch shown */
    long attempt;
    int drawn; /* a line drawn in place waits for its newline */
} follow;

static int terminal(const char *status)
{
    return !strcmp(status, "succeeded") || !strcmp(status, "failed") ||
           !strcmp(status, "cancelled");
}

static long total_epochs(const follow *f)
{
    json_t *hp = json_object_get(json_object_get(f->job, "document"), "hyperparameters");
    return (long)json_integer_value(json_object_get(hp, "epochs"));
}

/* The status part of a line: "running (training)", "queued". */
static void status_text(const json_t *job, char *out, size_t cap)
{
    const char *phase = json_string_value(json_object_get(job, "phase"));
    snprintf(out, cap, "%s%s%s%s", cli_str(job, "status"), phase ? " (" : "", phase ? phase : "",
             phase ? ")" : "");
}

/* On a terminal: the one line, redrawn. */
static void draw(follow *f)
{
    char st[64], bar[FOLLOW_BAR_WIDTH + 1], m[256] = "", sec[24] = "";
    const json_t *last = json_array_get(f->epochs, json_array_size(f->epochs) - 1);
    long total = total_epochs(f);
    long epoch = last ? (long)json_integer_value(json_object_get(last, "epoch")) : 0;
    status_text(f->job, st, sizeof st);
    cli_bar(total > 0 ? (double)epoch / (double)total : 0, FOLLOW_BAR_WIDTH, bar);
    if (last) {
        cli_metrics_text(last, m, sizeof m);
        cli_duration(json_number_value(json_object_get(last, "seconds")), sec);
    }
    printf("\r[%s] epoch %ld/%ld  %s%s%s  %s\033[K", bar, epoch, total, m, *sec ? "  " : "", sec,
           st);
    fflush(stdout);
    f->drawn = 1;
}

static void on_status(follow *f, json_t *job)
{
    long attempt = (long)json_integer_value(json_object_get(job, "attempt"));
    json_decref(f->job);
    f->job = job;
    if (attempt > f->attempt && f->attempt > 0)
        f->shown = 0; /* a new attempt: its epochs replace the earlier ones */
    f->attempt = attempt;
    if (f->o->json)
        return;
    if (f->o->tty) {
        draw(f);
        return;
    }
    char st[64];
    status_text(job, st, sizeof st);
    printf("status %s, attempt %ld%s%s\n", st, attempt,
           json_is_string(json_object_get(job, "device")) ? " on " : "",
           json_is_string(json_object_get(job, "device")) ? cli_str(job, "device") : "");
    fflush(stdout);
}

static void on_metrics(follow *f, json_t *epoch)
{
    long n = (long)json_integer_value(json_object_get(epoch, "epoch"));
    size_t k = json_array_size(f->epochs); /* a resent or replaced epoch drops those from it on */
    while (k > 0 &&
           json_integer_value(json_object_get(json_array_get(f->epochs, k - 1), "epoch")) >= n)
        json_array_remove(f->epochs, --k);
    json_array_append_new(f->epochs, epoch);
    if (n <= f->shown || f->o->json)
        return;
    f->shown = n;
    if (f->o->tty) {
        draw(f);
        return;
    }
    char m[256], sec[24];
    cli_metrics_text(epoch, m, sizeof m);
    cli_duration(json_number_value(json_object_get(epoch, "seconds")), sec);
    printf("epoch %ld/%ld %s %s\n", n, total_epochs(f), m, sec);
    fflush(stdout);
}

/* One line of the stream; 1 once the job is over (ends the transfer). */
static int follow_line(void *ctx, const char *line, size_t len)
{
    follow *f = ctx;
    if (len == 0) { /* dispatch */
        size_t n = dynbuf_len(&f->data);
        json_t *v = n ? json_loadb(dynbuf_str(&f->data), n, 0, NULL) : NULL;
        int done = 0;
        if (json_is_object(v) && !strcmp(f->event, "status")) {
            on_status(f, v);
            done = terminal(cli_str(f->job, "status"));
        } else if (json_is_object(v) && !strcmp(f->event, "metrics")) {
            on_metrics(f, v);
        } else {
            json_decref(v);
        }
        f->event[0] = '\0';
        dynbuf_reset(&f->data);
        return done;
    }
    if (line[0] == ':')
        return 0;
    if (!strncmp(line, "event:", 6)) {
        snprintf(f->event, sizeof f->event, "%s", line + 6 + (line[6] == ' '));
        return 0;
    }
    if (strncmp(line, "data:", 5) != 0)
        return 0;
    const char *d = line + 5 + (line[5] == ' ');
    size_t n = len - (size_t)(d - line);
    int rc = dynbuf_len(&f->data) ? dynbuf_add(&f->data, "\n", 1) : 0;
    if (rc == 0)
        rc = dynbuf_add(&f->data, d, n);
    if (rc == -EFBIG)
        f->too_big = 1;
    return rc;
}

static int follow_sink(void *ctx, long status, const char *data, size_t len)
{
    (void)status;
    follow *f = ctx;
    return cli_lines_feed(&f->lines, data, len);
}

/* The lines after the job ended: status, attempts, duration, final metrics, artifacts. */
static void summary(const follow *f, const json_t *artifacts)
{
    const json_t *job = f->job;
    double start = cli_time(json_string_value(json_object_get(job, "started_at")));
    double end = cli_time(json_string_value(json_object_get(job, "finished_at")));
    size_t n = json_array_size(f->epochs);
    char dur[24] = "-", m[256];
    if (start > 0 && end > 0)
        cli_duration(end - start, dur);
    printf("job:       %s (%s)\n", cli_str(job, "id"), cli_str(job, "name"));
    printf("status:    %s\n", cli_str(job, "status"));
    printf("attempts:  %lld of %lld\n",
           (long long)json_integer_value(json_object_get(job, "attempt")),
           (long long)json_integer_value(json_object_get(job, "max_attempts")));
    printf("duration:  %s\n", dur);
    printf("device:    %s\n", cli_str(job, "device"));
    if (n > 0) {
        const json_t *last = json_array_get(f->epochs, n - 1);
        cli_metrics_text(last, m, sizeof m);
        printf("final:     epoch %lld/%ld %s\n",
               (long long)json_integer_value(json_object_get(last, "epoch")), total_epochs(f), m);
    }
    if (json_is_string(json_object_get(job, "error")))
        printf("error:     %s\n", cli_str(job, "error"));
    if (json_array_size(artifacts) > 0) {
        printf("artifacts:");
        size_t i;
        const json_t *a;
        json_array_foreach (artifacts, i, a)
            printf("%s %s", i ? "," : "", cli_str(a, "name"));
        printf("\n           (trainyard download %s [NAME])\n", cli_str(job, "id"));
    }
}

/* Reads the event stream until the job ends, reconnecting when it drops. */
static int follow_stream(follow *f, client *c, const char *path)
{
    char err[ERR_LEN];
    for (int tries = 0;; tries++) {
        long status = 0;
        json_t *reply = NULL;
        int rc = client_get_stream(c, path, follow_sink, f, &status, &reply, err);
        if (rc == 0 && status != 200) {
            rc = cli_refused(f->o, status, reply);
            json_decref(reply);
            return rc;
        }
        json_decref(reply);
        if (f->too_big) {
            fprintf(stderr,
                    "trainyard %s: an event from the server is larger than %u MiB; is the "
                    "server a trainyard server?\n",
                    f->o->cmd, FOLLOW_EVENT_MAX >> 20);
            return CLI_EXIT_FAILED;
        }
        if (f->job && terminal(cli_str(f->job, "status")))
            return 0;
        if (f->drawn) { /* end the line drawn in place before saying anything */
            putchar('\n');
            f->drawn = 0;
        }
        if (rc == -EINTR || cli_interrupted)
            return cli_no_answer(f->o, -EINTR, err);
        if (tries == FOLLOW_RECONNECTS && rc < 0)
            return cli_no_answer(f->o, rc, err);
        if (tries == FOLLOW_RECONNECTS) {
            fprintf(stderr, "trainyard %s: the event stream kept ending before the job did\n",
                    f->o->cmd);
            return CLI_EXIT_FAILED;
        }
        if (rc < 0 && !f->o->json)
            fprintf(stderr, "trainyard %s: %s; reconnecting\n", f->o->cmd, err);
        cli_lines_reset(&f->lines);
        dynbuf_reset(&f->data);
        sleep(1);
    }
}

int cli_follow(const cli_conn *o, client *c, const char *id)
{
    char path[600];
    follow f = {.o = o, .lines = {.fn = follow_line}, .epochs = json_array()};
    json_t *artifacts = NULL;
    f.lines.ctx = &f;
    dynbuf_init(&f.data, FOLLOW_EVENT_MAX);
    int rc = cli_job_path(o, id, "/events", path, sizeof path);
    if (rc == 0)
        rc = follow_stream(&f, c, path);
    if (f.drawn)
        putchar('\n');
    if (rc == CLI_EXIT_INTERRUPTED) {
        fprintf(stderr, "trainyard %s: job %s goes on; `trainyard cancel %s` stops it\n", o->cmd,
                id, id);
    } else if (rc == 0) {
        /* The stream's last job is the listing's form; the job itself also has its attempts. */
        json_t *whole = NULL;
        cli_job_path(o, id, "", path, sizeof path);
        if (cli_get(o, c, path, &whole) == 0 && json_is_object(whole)) {
            json_decref(f.job);
            f.job = whole;
        } else {
            json_decref(whole);
        }
        const char *status = cli_str(f.job, "status");
        if (!strcmp(status, "succeeded")) {
            cli_job_path(o, id, "/artifacts", path, sizeof path);
            rc = cli_get(o, c, path, &artifacts);
        }
        if (rc == 0) {
            json_t *list = json_object_get(artifacts, "artifacts");
            if (o->json) {
                json_t *doc = json_pack("{s:O, s:O, s:o}", "job", f.job, "epochs", f.epochs,
                                        "artifacts", list ? json_incref(list) : json_array());
                cli_json_print(doc);
                json_decref(doc);
            } else {
                summary(&f, list);
            }
            rc = strcmp(status, "succeeded") ? CLI_EXIT_FAILED : CLI_EXIT_OK;
        }
    }
    json_decref(artifacts);
    json_decref(f.job);
    json_decref(f.epochs);
    dynbuf_free(&f.data);
    cli_lines_free(&f.lines);
    return rc;
}
