/* cmd_sweep: `trainyard sweep submit|status|list|cancel`, thin clients of the sweeps API
 * (docs/API.md, "Sweeps"): a sweep document in, the Sweep object or its leaderboard out. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/cli_client.h"
#include "util/err.h"

static const char sweep_help[] =
    "usage: trainyard sweep submit FILE | status ID [--wait] | list [--limit N] | cancel ID\n"
    "       [options]\n"
    "\n"
    "Hyperparameter sweeps: the server runs trials of a base job with sampled parameters\n"
    "(random: log_uniform, uniform, int_uniform, choice; or a grid of choices), at most\n"
    "max_concurrent at a time, stops weak trials early with ASHA when asked, and ranks the\n"
    "trials by the best value of a metric each reached.\n"
    "\n"
    "  submit FILE   send a sweep document (a file, or - for stdin); prints the sweep's id\n"
    "  status ID     the sweep and its leaderboard, best first (--wait: once it has ended)\n"
    "  list          sweeps, newest first (--limit N, default 50)\n"
    "  cancel ID     cancel the sweep: its queued trials are cancelled, running ones asked to\n"
    "\n"
    "Trials are ordinary jobs named <sweep>-<n>: `trainyard list`, `status`, `cancel` (one\n"
    "trial alone) and `download` work on them.\n"
    "\n"
    "options:\n"
    "  --limit N     list: how many sweeps (1 to 500)\n"
    "  --wait        status: poll until the sweep ends, a line on stderr as trials end; exit\n"
    "                status 1 when it failed or was cancelled\n";

/* "0.0123" or "-" for a JSON number or null. */
static void sweep_num(const json_t *v, char out[32])
{
    if (json_is_number(v))
        snprintf(out, 32, "%.6g", json_number_value(v));
    else
        snprintf(out, 32, "-");
}

static void sweep_print(const json_t *s)
{
    const json_t *t = json_object_get(s, "trials");
    printf("sweep %s  %s  %s\n", cli_str(s, "id"), cli_str(s, "name"), cli_str(s, "status"));
    printf("trials: %lld made, %lld queued, %lld running, %lld succeeded (%lld stopped early), "
           "%lld failed, %lld cancelled; %lld epochs in all\n",
           (long long)json_integer_value(json_object_get(t, "created")),
           (long long)json_integer_value(json_object_get(t, "queued")),
           (long long)json_integer_value(json_object_get(t, "running")),
           (long long)json_integer_value(json_object_get(t, "succeeded")),
           (long long)json_integer_value(json_object_get(t, "stopped_early")),
           (long long)json_integer_value(json_object_get(t, "failed")),
           (long long)json_integer_value(json_object_get(t, "cancelled")),
           (long long)json_integer_value(json_object_get(s, "epochs_total")));
    const json_t *metric = json_object_get(json_object_get(s, "document"), "metric");
    const json_t *best = json_object_get(s, "best");
    char v[32];
    if (json_is_object(best)) {
        sweep_num(json_object_get(best, "value"), v);
        printf("best: job %s, %s %s at epoch %lld\n", cli_str(best, "job_id"),
               cli_str(metric, "name"), v,
               (long long)json_integer_value(json_object_get(best, "epoch")));
    }
    const json_t *board = json_object_get(s, "leaderboard");
    if (!json_array_size(board))
        return;
    printf("\n%-4s  %-32s  %-9s  %-10s  %-5s  %-6s  %s\n", "RANK", "JOB", "STATUS",
           cli_str(metric, "name"), "EPOCH", "EPOCHS", "PARAMETERS");
    size_t i;
    const json_t *e;
    json_array_foreach (board, i, e) {
        char params[512] = "", ep[32];
        const char *k;
        const json_t *pv;
        size_t at = 0;
        json_object_foreach ((json_t *)json_object_get(e, "parameters"), k, pv) {
            char *text = json_is_real(pv) ? NULL : json_dumps(pv, JSON_ENCODE_ANY | JSON_COMPACT);
            char real[32];
            snprintf(real, sizeof real, "%.4g", json_real_value(pv)); /* a person's digits */
            int n = snprintf(params + at, sizeof params - at, "%s%s=%s", at ? " " : "", k,
                             json_is_real(pv) ? real
                             : text           ? text
                                              : "?");
            free(text);
            if (n < 0 || (size_t)n >= sizeof params - at)
                break;
            at += (size_t)n;
        }
        sweep_num(json_object_get(e, "value"), v);
        sweep_num(json_object_get(e, "epoch"), ep);
        printf("%-4lld  %-32s  %-9s  %-10s  %-5s  %-6lld  %s%s%s",
               (long long)json_integer_value(json_object_get(e, "rank")), cli_str(e, "job_id"),
               cli_str(e, "status"), v, ep,
               (long long)json_integer_value(json_object_get(e, "epochs_run")), params,
               json_is_string(json_object_get(e, "stop_reason")) ? "  (stopped: " : "",
               json_is_string(json_object_get(e, "stop_reason")) ? cli_str(e, "stop_reason") : "");
        printf("%s\n", json_is_string(json_object_get(e, "stop_reason")) ? ")" : "");
    }
}

/* POST path with body (may be NULL), expecting `want`; the Sweep printed. */
static int sweep_post(cli_conn *o, client *c, const char *path, const json_t *body, long want)
{
    char err[ERR_LEN];
    long status = 0;
    json_t *reply = NULL;
    int rc = client_post_json(c, path, body, &status, &reply, err);
    if (rc < 0) {
        rc = cli_no_answer(o, rc, err);
    } else if (status != want || !json_is_object(reply)) {
        rc = cli_refused(o, status, reply);
        if (status == 400)
            rc = CLI_EXIT_USAGE; /* an invalid sweep document, as for submit */
    } else if (o->json) {
        cli_json_print(reply);
    } else if (want == 201) {
        printf("%s\n", cli_str(reply, "id"));
    } else {
        printf("sweep %s %s\n", cli_str(reply, "id"), cli_str(reply, "status"));
    }
    json_decref(reply);
    return rc;
}

static int sweep_list(cli_conn *o, client *c, long limit)
{
    char path[64];
    json_t *page = NULL;
    snprintf(path, sizeof path, "/sweeps?limit=%ld", limit);
    int rc = cli_get(o, c, path, &page);
    if (rc != 0)
        return rc;
    if (o->json) {
        cli_json_print(page);
    } else {
        printf("%-32s  %-9s  %-6s  %-24s  %s\n", "ID", "STATUS", "TRIALS", "CREATED", "NAME");
        size_t i;
        const json_t *s;
        json_array_foreach (json_object_get(page, "sweeps"), i, s)
            printf("%-32s  %-9s  %-6lld  %-24s  %s\n", cli_str(s, "id"), cli_str(s, "status"),
                   (long long)json_integer_value(
                       json_object_get(json_object_get(s, "trials"), "created")),
                   cli_str(s, "created_at"), cli_str(s, "name"));
    }
    json_decref(page);
    return 0;
}

/* status: GET path, printed; with wait, polled every second until the sweep has ended, with a
 * line on stderr each time another trial ends. Exit status 1 for a sweep that failed or was
 * cancelled, once it has ended. */
static int sweep_status(cli_conn *o, client *c, const char *path, int wait)
{
    json_t *s = NULL;
    long long ended_before = -1;
    for (;;) {
        int rc = cli_get(o, c, path, &s);
        if (rc != 0)
            return rc;
        const char *status = cli_str(s, "status");
        int running = strcmp(status, "running") == 0;
        if (!wait || !running)
            break;
        const json_t *t = json_object_get(s, "trials");
        long long ended = 0;
        static const char *const done[] = {"succeeded", "failed", "cancelled"};
        for (size_t i = 0; i < 3; i++)
            ended += json_integer_value(json_object_get(t, done[i]));
        if (ended != ended_before && !o->json)
            fprintf(stderr, "sweep %s: %lld of %lld trials ended\n", cli_str(s, "id"), ended,
                    (long long)json_integer_value(
                        json_object_get(json_object_get(s, "document"), "max_trials")));
        ended_before = ended;
        json_decref(s);
        s = NULL;
        for (int i = 0; i < 10 && !cli_interrupted; i++)
            usleep(100000);
        if (cli_interrupted)
            return cli_no_answer(o, -EINTR, "");
    }
    if (o->json)
        cli_json_print(s);
    else
        sweep_print(s);
    int rc = wait && strcmp(cli_str(s, "status"), "succeeded") != 0 ? CLI_EXIT_FAILED : 0;
    json_decref(s);
    return rc;
}

int cmd_sweep(int argc, char **argv)
{
    cli_conn o;
    cli_conn_init(&o, "sweep");
    const char *pos[2] = {NULL, NULL};
    int npos = 0;
    long limit = 50;
    int wait = 0;
    for (int i = 1; i < argc; i++) {
        int w = cli_common_word(&o, sweep_help, argc, argv, &i);
        if (w == 2)
            return CLI_EXIT_OK;
        if (w < 0)
            return CLI_EXIT_USAGE;
        if (w == 1)
            continue;
        if (!strcmp(argv[i], "--wait")) {
            wait = 1;
        } else if (!strcmp(argv[i], "--limit") && i + 1 < argc) {
            char *end = NULL;
            limit = strtol(argv[++i], &end, 10);
            if (*end || limit < 1 || limit > 500)
                return cli_usage_error(&o, "--limit must be 1 to 500, not", argv[i]);
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return cli_usage_error(&o, "unknown option", argv[i]);
        } else if (npos < 2) {
            pos[npos++] = argv[i];
        } else {
            return cli_usage_error(&o, "one word too many:", argv[i]);
        }
    }
    const char *verb = pos[0];
    int needs_arg = verb && strcmp(verb, "list") != 0;
    if (!verb || (strcmp(verb, "submit") && strcmp(verb, "status") && strcmp(verb, "list") &&
                  strcmp(verb, "cancel"))) {
        fprintf(stderr, "%s", sweep_help);
        return CLI_EXIT_USAGE;
    }
    if (needs_arg != (npos == 2))
        return cli_usage_error(&o, needs_arg ? "needs an argument:" : "takes no argument:", verb);

    json_t *doc = NULL;
    if (!strcmp(verb, "submit")) {
        json_error_t jerr;
        doc = strcmp(pos[1], "-") ? json_load_file(pos[1], 0, &jerr) : json_loadf(stdin, 0, &jerr);
        if (!doc) {
            fprintf(stderr, "trainyard sweep: %s: %s (line %d)\n", pos[1], jerr.text, jerr.line);
            return CLI_EXIT_USAGE;
        }
    }
    client *c = NULL;
    int rc = cli_conn_open(&o, &c);
    if (rc != 0) {
        json_decref(doc);
        return rc;
    }
    char path[600], id[400];
    if (npos == 2 && cli_escape(pos[1], id, sizeof id) < 0 && !doc) {
        rc = cli_usage_error(&o, "the id is too long:", pos[1]);
        goto out;
    }
    if (!strcmp(verb, "submit")) {
        rc = sweep_post(&o, c, "/sweeps", doc, 201);
    } else if (!strcmp(verb, "cancel")) {
        snprintf(path, sizeof path, "/sweeps/%s/cancel", id);
        rc = sweep_post(&o, c, path, NULL, 200);
    } else if (!strcmp(verb, "list")) {
        rc = sweep_list(&o, c, limit);
    } else {
        snprintf(path, sizeof path, "/sweeps/%s", id);
        rc = sweep_status(&o, c, path, wait);
    }
out:
    json_decref(doc);
    client_free(c);
    return rc;
}
