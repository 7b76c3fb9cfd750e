/* cmd_jobs: `trainyard submit|status|list|logs|cancel|stop` — thin clients of the public job API
 * (POST /train, GET /jobs, GET /jobs/{id}, GET /jobs/{id}/logs, POST /jobs/{id}/cancel,
 * POST /jobs/{id}/stop).
 *
 * Each command parses its words with job_args_parse (the connection flags of cli_client.h plus
 * the few flags it names), makes one client, and prints either text for a person or, with
 * --json, the API's own JSON. Messages go to stderr; exit statuses are cli_client.h's.
 *
 * Submit sends an Idempotency-Key (random, or --idempotency-key) and retries a request that got
 * no answer with the same key, so a retry never makes a second job. `submit --follow` and
 * `status --follow` hand over to cli_follow (cmd_follow.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/cli_client.h"
#include "script/bundle.h"
#include "util/err.h"
#include "util/json_out.h"

typedef struct job_args {
    cli_conn conn;
    const char *pos[2];
    int npos;
    int follow;
    const char *status, *name, *key, *cursor, *code;
    const char *reason; /* stop --reason */
    long limit;
} job_args;

/* Parses argv: between minpos and maxpos words, the connection flags, and the flags named in
 * allowed (" --follow -f --status "). 0 to go on, 1 after printing help, or CLI_EXIT_USAGE. */
static int job_args_parse(int argc, char **argv, const char *help, const char *allowed, int minpos,
                          int maxpos, job_args *a)
{
    memset(a, 0, sizeof *a);
    cli_conn_init(&a->conn, argv[0]);
    a->limit = 50;
    for (int i = 1; i < argc; i++) {
        const char *w = argv[i];
        char key[64];
        if (!strcmp(w, "--help") || !strcmp(w, "-h")) {
            fputs(help, stdout);
            fputs("\n" CLI_CONN_HELP, stdout);
            return 1;
        }
        int taken = cli_conn_flag(&a->conn, argc, argv, &i);
        if (taken < 0)
            return CLI_EXIT_USAGE;
        if (taken)
            continue;
        snprintf(key, sizeof key, " %s ", w);
        if (w[0] == '-' && w[1] && !strstr(allowed, key))
            return cli_usage_error(&a->conn, "unknown option", w);
        if (!strcmp(w, "--follow") || !strcmp(w, "-f")) {
            a->follow = 1;
            continue;
        }
        const char **slot = !strcmp(w, "--status")            ? &a->status
                            : !strcmp(w, "--name")            ? &a->name
                            : !strcmp(w, "--idempotency-key") ? &a->key
                            : !strcmp(w, "--cursor")          ? &a->cursor
                            : !strcmp(w, "--code")            ? &a->code
                            : !strcmp(w, "--reason")          ? &a->reason
                                                              : NULL;
        const char *limit = NULL;
        if (!strcmp(w, "--limit"))
            slot = &limit;
        if (slot) {
            if (i + 1 >= argc)
                return cli_usage_error(&a->conn, "a value is needed after", w);
            *slot = argv[++i];
            if (limit) {
                char *end;
                a->limit = strtol(limit, &end, 10);
                if (*end || a->limit < 1 || a->limit > 100000)
                    return cli_usage_error(&a->conn, "--limit takes 1 to 100000, not", limit);
            }
            continue;
        }
        if (a->npos == maxpos)
            return cli_usage_error(&a->conn, "unexpected argument", w);
        a->pos[a->npos++] = w;
    }
    if (a->npos < minpos) {
        fprintf(stderr, "trainyard %s: %s (try --help)\n", a->conn.cmd,
                minpos == 1 && maxpos == 1 ? "say which job: its ID" : "an argument is missing");
        return CLI_EXIT_USAGE;
    }
    return 0;
}

/* Parses and connects; 0 with *c, or the exit status (0 after --help sets *c NULL). */
static int job_start(int argc, char **argv, const char *help, const char *allowed, int minpos,
                     int maxpos, job_args *a, client **c)
{
    *c = NULL;
    int rc = job_args_parse(argc, argv, help, allowed, minpos, maxpos, a);
    if (rc != 0)
        return rc == 1 ? 0 : rc;
    return cli_conn_open(&a->conn, c);
}

/* ---- submit ------------------------------------------------------------------------------ */

static const char submit_help[] =
    "usage: trainyard submit JOB.json [--follow] [--idempotency-key KEY] [options]\n"
    "\n"
    "Sends a job document (a file, or - for stdin) to the server's queue and prints the new\n"
    "job's id (the whole job with --json). With --follow it then shows the job as it runs: a\n"
    "line per epoch with loss and accuracy (one bar redrawn in place on a terminal), then a\n"
    "summary with the artifacts' names; the exit status is 0 only if the job succeeded.\n"
    "\n"
    "Every submit carries an Idempotency-Key (random unless --idempotency-key KEY is given)\n"
    "and one that got no answer is sent again with the same key, so it never makes two jobs;\n"
    "give the same KEY to run the command again safely.\n"
    "\n"
    "A script job (one with training_script) takes its code from --code DIR: the folder is\n"
    "packed into a .tar.gz (the same files always give the same bytes), sent to POST /code,\n"
    "and its address put in the document's \"code\".\n"
    "\n"
    "options:\n"
    "  -f, --follow            wait for the job and show its progress\n"
    "  --idempotency-key KEY   the key to send (1 to 200 characters)\n"
    "  --code DIR              upload DIR as the job's code first\n";

static int submit_send(job_args *a, client *c, const json_t *doc, json_t **job)
{
    char key[256], header[300], err[ERR_LEN];
    if (a->key) {
        snprintf(key, sizeof key, "%s", a->key);
    } else {
        unsigned char r[16];
        if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) {
            fprintf(stderr, "trainyard submit: getrandom: %s\n", strerror(errno));
            return CLI_EXIT_FAILED;
        }
        for (size_t i = 0; i < sizeof r; i++)
            snprintf(key + 2 * i, 3, "%02x", r[i]);
    }
    snprintf(header, sizeof header, "Idempotency-Key: %s", key);
    long status = 0;
    json_t *reply = NULL;
    int rc = 0;
    for (int attempt = 0; attempt < 3; attempt++) {
        if (attempt > 0) {
            fprintf(stderr, "trainyard submit: %s; trying again\n", err);
            usleep(500000u << attempt);
        }
        client_next_header(c, header);
        rc = client_post_json(c, "/train", doc, &status, &reply, err);
        if (rc == 0 || rc == -EINTR || rc == -EKEYREJECTED || cli_interrupted)
            break;
    }
    if (rc < 0)
        return cli_no_answer(&a->conn, rc, err);
    if ((status != 202 && status != 200) || !json_is_string(json_object_get(reply, "id"))) {
        rc = cli_refused(&a->conn, status, reply);
        json_decref(reply);
        return status == 400 ? CLI_EXIT_USAGE : rc;
    }
    *job = reply;
    return 0;
}

/* Packs dir, uploads it (POST /code) and sets the document's "code" to its address. */
static int submit_code(job_args *a, client *c, const char *dir, json_t *doc)
{
    char tmp[] = "/tmp/trainyard-code-XXXXXX", err[ERR_LEN];
    int fd = mkstemp(tmp);
    if (fd < 0) {
        fprintf(stderr, "trainyard submit: cannot make a temporary file: %s\n", strerror(errno));
        return CLI_EXIT_FAILED;
    }
    close(fd);
    bundle_info info;
    int rc = bundle_pack(dir, tmp, NULL, &info, err);
    if (rc < 0) {
        unlink(tmp);
        fprintf(stderr, "trainyard submit: --code %s: %s\n", dir, err);
        return CLI_EXIT_USAGE;
    }
    long status = 0;
    json_t *reply = NULL;
    rc = client_post_file(c, "/code", tmp, "application/gzip", &status, &reply, err);
    unlink(tmp);
    if (rc < 0)
        return cli_no_answer(&a->conn, rc, err);
    const char *address = json_string_value(json_object_get(reply, "code"));
    if ((status != 200 && status != 201) || !address) {
        rc = cli_refused(&a->conn, status, reply);
        json_decref(reply);
        return rc;
    }
    if (!a->conn.json)
        fprintf(stderr, "code %s: %llu files, %s\n", dir, (unsigned long long)info.files, address);
    json_object_set_new(doc, "code", json_string(address));
    json_decref(reply);
    return 0;
}

int cmd_submit(int argc, char **argv)
{
    job_args a;
    client *c = NULL;
    json_t *doc = NULL, *job = NULL;
    json_error_t jerr;
    int rc =
        job_args_parse(argc, argv, submit_help, " --follow -f --idempotency-key --code ", 1, 1, &a);
    if (rc != 0)
        return rc == 1 ? 0 : rc;
    const char *file = a.pos[0];
    doc = strcmp(file, "-") ? json_load_file(file, 0, &jerr) : json_loadf(stdin, 0, &jerr);
    if (!doc) {
        fprintf(stderr, "trainyard submit: %s: line %d: %s\n", file, jerr.line, jerr.text);
        return CLI_EXIT_USAGE;
    }
    rc = cli_conn_open(&a.conn, &c);
    if (rc == 0 && a.code)
        rc = json_is_object(doc) ? submit_code(&a, c, a.code, doc)
                                 : cli_usage_error(&a.conn, "not a job document:", file);
    if (rc != 0)
        goto out;
    rc = submit_send(&a, c, doc, &job);
    if (rc != 0)
        goto out;
    const char *id = json_string_value(json_object_get(job, "id"));
    if (a.follow) {
        if (!a.conn.json)
            fprintf(stderr, "job %s submitted\n", id);
        rc = cli_follow(&a.conn, c, id);
    } else if (a.conn.json) {
        cli_json_print(job);
    } else {
        printf("%s\n", id);
        fprintf(stderr, "job %s %s; follow it with `trainyard status %s --follow`\n", id,
                cli_str(job, "status"), id);
    }
out:
    json_decref(job);
    json_decref(doc);
    client_free(c);
    return rc;
}

/* ---- status ------------------------------------------------------------------------------ */

static const char status_help[] = "usage: trainyard status ID [--follow] [options]\n"
                                  "\n"
                                  "Shows one job: status and phase, attempts, times, device,\n"
                                  "the latest epoch's metrics and any error (the job as GET\n"
                                  "/jobs/ID answers with --json). With --follow, waits for it\n"
                                  "as `submit --follow` does, with the same exit status.\n"
                                  "\n"
                                  "options:\n"
                                  "  -f, --follow   wait for the job and show its progress\n";

static void status_print(const json_t *job, const json_t *metrics)
{
    const char *phase = json_string_value(json_object_get(job, "phase"));
    double start = cli_time(json_string_value(json_object_get(job, "started_at")));
    double end = cli_time(json_string_value(json_object_get(job, "finished_at")));
    json_t *hp = json_object_get(json_object_get(job, "document"), "hyperparameters");
    json_t *epochs = json_object_get(metrics, "epochs");
    size_t n = json_array_size(epochs);
    char dur[24], text[256];
    printf("id:        %s\n", cli_str(job, "id"));
    printf("name:      %s\n", cli_str(job, "name"));
    printf("status:    %s%s%s%s%s\n", cli_str(job, "status"), phase ? " (" : "", phase ? phase : "",
           phase ? ")" : "",
           json_is_true(json_object_get(job, "cancel_requested"))   ? ", cancel requested"
           : json_is_string(json_object_get(job, "stop_requested")) ? ", stop requested"
                                                                    : "");
    const char *waiting =
        json_string_value(json_object_get(json_object_get(job, "waiting"), "message"));
    if (waiting)
        printf("waiting:   %s\n", waiting);
    if (json_is_string(json_object_get(job, "stop_reason"))) {
        json_t *after = json_object_get(job, "stopped_epoch"),
               *best = json_object_get(job, "best_epoch");
        printf("stopped:   %s", cli_str(job, "stop_reason"));
        if (json_is_integer(after))
            printf(" (after epoch %lld", (long long)json_integer_value(after));
        if (json_is_integer(after) && json_is_integer(best))
            printf("; the model is epoch %lld's", (long long)json_integer_value(best));
        printf("%s\n", json_is_integer(after) ? ")" : "");
    }
    printf("attempt:   %lld of %lld\n",
           (long long)json_integer_value(json_object_get(job, "attempt")),
           (long long)json_integer_value(json_object_get(job, "max_attempts")));
    printf("created:   %s\n", cli_str(job, "created_at"));
    printf("started:   %s\n", cli_str(job, "started_at"));
    printf("finished:  %s\n", cli_str(job, "finished_at"));
    if (start > 0 && end > 0) {
        cli_duration(end - start, dur);
        printf("duration:  %s\n", dur);
    }
    printf("device:    %s\n", cli_str(job, "device"));
    if (json_is_string(json_object_get(job, "slurm_job_id"))) /* serve --executor slurm */
        printf("slurm job: %s\n", cli_str(job, "slurm_job_id"));
    if (n > 0) {
        json_t *last = json_array_get(epochs, n - 1);
        cli_metrics_text(last, text, sizeof text);
        printf("epoch:     %lld of %lld: %s\n",
               (long long)json_integer_value(json_object_get(last, "epoch")),
               (long long)json_integer_value(json_object_get(hp, "epochs")), text);
    }
    if (json_is_string(json_object_get(job, "error")))
        printf("error:     %s\n", cli_str(job, "error"));
}

int cmd_status(int argc, char **argv)
{
    job_args a;
    client *c;
    char path[600];
    json_t *job = NULL, *metrics = NULL;
    int rc = job_start(argc, argv, status_help, " --follow -f ", 1, 1, &a, &c);
    if (rc != 0 || !c)
        return rc;
    if (a.follow) {
        rc = cli_follow(&a.conn, c, a.pos[0]);
        goto out;
    }
    rc = cli_job_path(&a.conn, a.pos[0], "", path, sizeof path);
    if (rc == 0)
        rc = cli_get(&a.conn, c, path, &job);
    if (rc != 0)
        goto out;
    if (a.conn.json) {
        cli_json_print(job);
        goto out;
    }
    strcat(path, "/metrics");
    rc = cli_get(&a.conn, c, path, &metrics);
    if (rc == 0)
        status_print(job, metrics);
out:
    json_decref(job);
    json_decref(metrics);
    client_free(c);
    return rc;
}

/* ---- list -------------------------------------------------------------------------------- */

static const char list_help[] =
    "usage: trainyard list [--status S] [--name N] [--limit N] [--cursor C] [options]\n"
    "\n"
    "Lists jobs, newest first, as a table (a user token sees only its own jobs). With --json,\n"
    "the API's page: {\"jobs\": [...], \"next_cursor\": ...}; pass next_cursor to --cursor for\n"
    "the jobs after it.\n"
    "\n"
    "options:\n"
    "  --status S   only jobs in status S: queued, running, succeeded, failed, cancelled\n"
    "  --name N     only jobs named N\n"
    "  --limit N    at most N jobs (default 50)\n"
    "  --cursor C   start after this position (a next_cursor)\n";

/* Appends "&key=value" (escaped) to the query in q. */
static int query_add(char *q, size_t cap, const char *key, const char *value)
{
    char esc[1024];
    size_t n = strlen(q);
    if (!value)
        return 0;
    if (cli_escape(value, esc, sizeof esc) < 0 ||
        (size_t)snprintf(q + n, cap - n, "%c%s=%s", n ? '&' : '?', key, esc) >= cap - n)
        return -ENAMETOOLONG;
    return 0;
}

int cmd_list(int argc, char **argv)
{
    job_args a;
    client *c;
    json_t *all = NULL, *page = NULL;
    int rc = job_start(argc, argv, list_help, " --status --name --limit --cursor ", 0, 0, &a, &c);
    if (rc != 0 || !c)
        return rc;
    all = json_array();
    const char *cursor = a.cursor;
    json_t *next = json_null();
    while (json_array_size(all) < (size_t)a.limit) {
        char path[4096] = "", limit[24];
        long want = a.limit - (long)json_array_size(all);
        snprintf(limit, sizeof limit, "%ld", want > 500 ? 500 : want);
        if (query_add(path, sizeof path, "status", a.status) < 0 ||
            query_add(path, sizeof path, "name", a.name) < 0 ||
            query_add(path, sizeof path, "limit", limit) < 0 ||
            query_add(path, sizeof path, "cursor", cursor) < 0) {
            rc = cli_usage_error(&a.conn, "a filter is too long:", a.name ? a.name : "");
            goto out;
        }
        char full[4200];
        snprintf(full, sizeof full, "/jobs%s", path);
        json_decref(page);
        page = NULL;
        rc = cli_get(&a.conn, c, full, &page);
        if (rc != 0)
            goto out;
        json_array_extend(all, json_object_get(page, "jobs"));
        next = json_object_get(page, "next_cursor");
        cursor = json_string_value(next);
        if (!cursor || json_array_size(json_object_get(page, "jobs")) == 0)
            break;
    }
    if (a.conn.json) {
        json_t *doc = json_pack("{s:O, s:O}", "jobs", all, "next_cursor", next);
        cli_json_print(doc);
        json_decref(doc);
        goto out;
    }
    printf("%-32s  %-9s  %-7s  %-24s  %-17s  %s\n", "ID", "STATUS", "ATTEMPT", "CREATED", "WAITING",
           "NAME");
    size_t i;
    json_t *j;
    json_array_foreach (all, i, j) {
        char attempt[32];
        snprintf(attempt, sizeof attempt, "%lld/%lld",
                 (long long)json_integer_value(json_object_get(j, "attempt")),
                 (long long)json_integer_value(json_object_get(j, "max_attempts")));
        const char *why =
            json_string_value(json_object_get(json_object_get(j, "waiting"), "reason"));
        printf("%-32s  %-9s  %-7s  %-24s  %-17s  %s\n", cli_str(j, "id"), cli_str(j, "status"),
               attempt, cli_str(j, "created_at"), why ? why : "-", cli_str(j, "name"));
    }
    if (cursor && json_array_size(all) == (size_t)a.limit)
        fprintf(stderr, "(more: trainyard list --cursor %s)\n", cursor);
out:
    json_decref(page);
    json_decref(all);
    client_free(c);
    return rc;
}

/* ---- logs -------------------------------------------------------------------------------- */

static const char logs_help[] =
    "usage: trainyard logs ID [-f] [options]\n"
    "\n"
    "Prints a job's log. With -f (--follow) it keeps printing lines as they arrive until the\n"
    "job ends (Ctrl-C stops following; the job goes on). With --json each line is printed as\n"
    "a JSON string on a line of its own.\n"
    "\n"
    "options:\n"
    "  -f, --follow   keep printing until the job ends\n";

static int logs_line(void *ctx, const char *line, size_t len)
{
    (void)ctx;
    json_t *s = json_stringn(line, len);
    if (!s)
        s = json_string("");
    json_out_dumpf(s, stdout, JSON_ENCODE_ANY);
    putchar('\n');
    fflush(stdout);
    json_decref(s);
    return 0;
}

static int logs_sink(void *ctx, long status, const char *data, size_t len)
{
    cli_lines *lines = ctx;
    (void)status;
    if (lines)
        return cli_lines_feed(lines, data, len);
    if (fwrite(data, 1, len, stdout) != len || fflush(stdout) != 0)
        return -EPIPE;
    return 0;
}

int cmd_logs(int argc, char **argv)
{
    job_args a;
    client *c;
    char path[600], err[ERR_LEN];
    cli_lines lines = {.fn = logs_line};
    int rc = job_start(argc, argv, logs_help, " --follow -f ", 1, 1, &a, &c);
    if (rc != 0 || !c)
        return rc;
    rc = cli_job_path(&a.conn, a.pos[0], a.follow ? "/logs?follow=true" : "/logs", path,
                      sizeof path);
    if (rc != 0)
        goto out;
    long status = 0;
    json_t *reply = NULL;
    rc = client_get_stream(c, path, logs_sink, a.conn.json ? &lines : NULL, &status, &reply, err);
    if (rc == -EPIPE) {
        rc = CLI_EXIT_FAILED; /* stdout went away: nothing to say it on */
    } else if (rc < 0) {
        rc = cli_no_answer(&a.conn, rc, err);
    } else if (status != 200) {
        rc = cli_refused(&a.conn, status, reply);
    } else if (a.conn.json) {
        cli_lines_end(&lines);
    }
    json_decref(reply);
out:
    cli_lines_free(&lines);
    client_free(c);
    return rc;
}

/* ---- cancel ------------------------------------------------------------------------------ */

static const char cancel_help[] =
    "usage: trainyard cancel ID [options]\n"
    "\n"
    "Cancels a job: a queued one at once, a running one within a second (its worker stops at\n"
    "the next heartbeat). A job that already finished cannot be cancelled (exit status 1).\n"
    "With --json, prints the job as the server answered.\n";

/* cancel and stop: POST /jobs/{id}<suffix> (with {"reason"} when --reason was given), then one
 * line that says whether the job ended at once (cancelled) or was asked to end (requested). */
static int job_post_action(int argc, char **argv, const char *help, const char *flags,
                           const char *suffix, const char *cancelled, const char *requested)
{
    job_args a;
    client *c;
    char path[600], err[ERR_LEN];
    json_t *job = NULL, *body = NULL;
    long status = 0;
    int rc = job_start(argc, argv, help, flags, 1, 1, &a, &c);
    if (rc != 0 || !c)
        return rc;
    rc = cli_job_path(&a.conn, a.pos[0], suffix, path, sizeof path);
    if (rc != 0)
        goto out;
    body = a.reason ? json_pack("{s:s}", "reason", a.reason) : NULL;
    rc = client_post_json(c, path, body, &status, &job, err);
    if (rc < 0)
        rc = cli_no_answer(&a.conn, rc, err);
    else if (status != 200 || !json_is_object(job))
        rc = cli_refused(&a.conn, status, job);
    else if (a.conn.json)
        cli_json_print(job);
    else
        printf("job %s%s\n", cli_str(job, "id"),
               strcmp(cli_str(job, "status"), "cancelled") == 0 ? cancelled : requested);
out:
    json_decref(body);
    json_decref(job);
    client_free(c);
    return rc;
}

int cmd_cancel(int argc, char **argv)
{
    return job_post_action(argc, argv, cancel_help, " ", "/cancel", " cancelled",
                           ": cancel requested; it stops within a second");
}

/* ---- stop -------------------------------------------------------------------------------- */

static const char stop_help[] =
    "usage: trainyard stop ID [--reason TEXT] [options]\n"
    "\n"
    "Stops a running job gracefully (POST /jobs/{id}/stop): its worker finishes the epoch it is\n"
    "in, saves the model and the job succeeds with stop_reason set to TEXT (default \"stopped by\n"
    "a user\"). A queued job has no epoch to finish and is cancelled at once. A job that already\n"
    "finished cannot be stopped (exit status 1). `trainyard cancel` ends a job without its\n"
    "model instead. With --json, prints the job as the server answered.\n"
    "\n"
    "options:\n"
    "  --reason TEXT   the job's stop_reason (1 to 500 characters)\n";

int cmd_stop(int argc, char **argv)
{
    return job_post_action(argc, argv, stop_help, " --reason ", "/stop", " was queued: cancelled",
                           ": stop requested; it ends after the epoch it is in");
}
