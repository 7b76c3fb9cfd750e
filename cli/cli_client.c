/* cli_client: the parts the API client commands share (see cli_client.h). Every message goes
 * to stderr as "trainyard CMD: ...", so stdout carries only what was asked for (a table, JSON,
 * a job id) and pipes stay clean. */
#include "cli/cli_client.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util/err.h"
#include "util/json_out.h"

volatile sig_atomic_t cli_interrupted;

static void on_signal(int sig)
{
    (void)sig;
    cli_interrupted = 1;
}

void cli_conn_init(cli_conn *o, const char *cmd)
{
    memset(o, 0, sizeof *o);
    o->cmd = cmd;
    o->server = getenv("TRAINYARD_URL");
    if (!o->server || !*o->server)
        o->server = "http://127.0.0.1:8080";
    o->token = getenv("TRAINYARD_TOKEN");
    o->ca = getenv("TRAINYARD_CA");
    if (o->ca && !*o->ca)
        o->ca = NULL;
}

int cli_conn_flag(cli_conn *o, int argc, char **argv, int *i)
{
    const char *a = argv[*i];
    if (!strcmp(a, "--json")) {
        o->json = 1;
        return 1;
    }
    const char **slot = !strcmp(a, "--server")  ? &o->server
                        : !strcmp(a, "--token") ? &o->token
                        : !strcmp(a, "--ca")    ? &o->ca
                                                : NULL;
    if (!slot)
        return 0;
    if (*i + 1 >= argc) {
        fprintf(stderr, "trainyard %s: '%s' needs a value (try --help)\n", o->cmd, a);
        return -1;
    }
    *slot = argv[++*i];
    return 1;
}

int cli_common_word(cli_conn *o, const char *help, int argc, char **argv, int *i)
{
    const char *w = argv[*i];
    if (!strcmp(w, "--help") || !strcmp(w, "-h")) {
        fputs(help, stdout);
        fputs("\n" CLI_CONN_HELP, stdout);
        return 2;
    }
    return cli_conn_flag(o, argc, argv, i);
}

int cli_usage_error(const cli_conn *o, const char *what, const char *a)
{
    fprintf(stderr, "trainyard %s: %s '%s' (try --help)\n", o->cmd, what, a);
    return CLI_EXIT_USAGE;
}

int cli_conn_open(cli_conn *o, client **out)
{
    char err[ERR_LEN];
    o->tty = !o->json && isatty(STDOUT_FILENO);
    if (!o->token || !*o->token) {
        fprintf(stderr,
                "trainyard %s: no token: give --token TOKEN or set TRAINYARD_TOKEN (an admin "
                "finds one in DATA-DIR/admin.token or makes one with `trainyard token create`)\n",
                o->cmd);
        return CLI_EXIT_USAGE;
    }
    client *c = NULL;
    if (client_new(o->server, o->token, &c, err) < 0) {
        fprintf(stderr, "trainyard %s: %s\n", o->cmd, err);
        return CLI_EXIT_FAILED;
    }
    client_set_ca(c, o->ca, 0);
    client_set_timeout(c, 60);
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    client_set_abort(c, &cli_interrupted);
    *out = c;
    return 0;
}

int cli_no_answer(const cli_conn *o, int rc, const char *err)
{
    if (rc == -EINTR) {
        fprintf(stderr, "trainyard %s: interrupted\n", o->cmd);
        return CLI_EXIT_INTERRUPTED;
    }
    if (rc == -ECONNREFUSED || rc == -ETIMEDOUT || rc == -EIO || rc == -EKEYREJECTED) {
        fprintf(stderr, "trainyard %s: cannot reach the server: %s\n", o->cmd, err);
        if (rc != -EKEYREJECTED)
            fprintf(stderr,
                    "trainyard %s: is it running? Give its address with --server URL or "
                    "TRAINYARD_URL\n",
                    o->cmd);
        return CLI_EXIT_UNREACHABLE;
    }
    fprintf(stderr, "trainyard %s: %s\n", o->cmd, err);
    return CLI_EXIT_FAILED;
}

int cli_refused(const cli_conn *o, long status, const json_t *reply)
{
    char why[1024];
    client_problem(status, reply, why, sizeof why);
    fprintf(stderr, "trainyard %s: %s\n", o->cmd, why);
    if (status == 401)
        fprintf(stderr, "trainyard %s: check --token or TRAINYARD_TOKEN\n", o->cmd);
    return CLI_EXIT_FAILED;
}

int cli_get(const cli_conn *o, client *c, const char *path, json_t **reply)
{
    char err[ERR_LEN];
    long status = 0;
    json_t *j = NULL;
    int rc = client_get_json(c, path, &status, &j, err);
    if (rc < 0)
        return cli_no_answer(o, rc, err);
    if (status != 200 || !json_is_object(j)) {
        rc = cli_refused(o, status, j);
        json_decref(j);
        return rc;
    }
    *reply = j;
    return 0;
}

int cli_escape(const char *s, char *out, size_t cap)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = 0;
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        int plain = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
                    (ch >= '0' && ch <= '9') || ch == '-' || ch == '.' || ch == '_' || ch == '~';
        if (n + (plain ? 1 : 3) >= cap)
            return -ENAMETOOLONG;
        if (plain) {
            out[n++] = (char)ch;
        } else {
            out[n++] = '%';
            out[n++] = hex[ch >> 4];
            out[n++] = hex[ch & 15];
        }
    }
    out[n] = '\0';
    return 0;
}

int cli_job_path(const cli_conn *o, const char *id, const char *rest, char *out, size_t cap)
{
    char esc[512];
    if (cli_escape(id, esc, sizeof esc) < 0 ||
        (size_t)snprintf(out, cap, "/jobs/%s%s", esc, rest) >= cap) {
        fprintf(stderr, "trainyard %s: that job id is too long\n", o->cmd);
        return CLI_EXIT_USAGE;
    }
    return 0;
}

void cli_json_print(const json_t *j)
{
    json_out_dumpf(j, stdout, JSON_INDENT(2));
    putchar('\n');
}

const char *cli_str(const json_t *obj, const char *key)
{
    const char *s = json_string_value(json_object_get(obj, key));
    return s ? s : "-";
}

void cli_duration(double seconds, char out[24])
{
    if (!(seconds >= 0))
        seconds = 0;
    if (seconds < 60) {
        snprintf(out, 24, seconds < 10 ? "%.2fs" : "%.1fs", seconds);
        return;
    }
    int s = seconds > 3.6e8 ? 360000000 : (int)lround(seconds); /* 100,000 hours at most */
    if (s < 3600)
        snprintf(out, 24, "%dm%02ds", s / 60, s % 60);
    else
        snprintf(out, 24, "%dh%02dm", s / 3600, s / 60 % 60);
}

void cli_size(uint64_t bytes, char out[24])
{
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(out, 24, "%llu B", (unsigned long long)bytes);
    else
        snprintf(out, 24, "%.1f %s", v, units[u]);
}

void cli_bar(double done, int width, char *out)
{
    if (!(done >= 0))
        done = 0;
    if (done > 1)
        done = 1;
    int full = (int)(done * width + 0.5);
    for (int i = 0; i < width; i++)
        out[i] = i < full ? '#' : '-';
    out[width] = '\0';
}

double cli_time(const char *text)
{
    struct tm tm = {0};
    int ms = 0;
    if (!text || sscanf(text, "%d-%d-%dT%d:%d:%d.%dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                        &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms) != 7)
        return -1;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return (double)timegm(&tm) + ms / 1000.0;
}

void cli_metrics_text(const json_t *epoch, char *out, size_t cap)
{
    static const struct {
        const char *key, *label;
    } shown[] = {{"loss", "loss"},
                 {"accuracy", "acc"},
                 {"val_loss", "val_loss"},
                 {"val_accuracy", "val_acc"}};
    size_t n = 0;
    out[0] = '\0';
    for (size_t i = 0; i < sizeof shown / sizeof shown[0]; i++) {
        const json_t *v = json_object_get(epoch, shown[i].key);
        if (!json_is_number(v) || n >= cap)
            continue;
        int w = snprintf(out + n, cap - n, "%s%s %.4f", n ? " " : "", shown[i].label,
                         json_number_value(v));
        if (w > 0)
            n += (size_t)w;
    }
    /* A script's metrics of its own names follow, as the server lists them. */
    static const char *const known[] = {"epoch",        "loss",    "accuracy",          "val_loss",
                                        "val_accuracy", "seconds", "samples_per_second"};
    const char *key;
    const json_t *v;
    json_object_foreach ((json_t *)epoch, key, v) {
        int skip = !json_is_number(v) || n >= cap;
        for (size_t i = 0; !skip && i < sizeof known / sizeof known[0]; i++)
            skip = strcmp(key, known[i]) == 0;
        if (skip)
            continue;
        int w = snprintf(out + n, cap - n, "%s%s %.4g", n ? " " : "", key, json_number_value(v));
        if (w > 0)
            n += (size_t)w;
    }
    if (n >= cap && cap > 0)
        out[cap - 1] = '\0';
}

/* ---- lines of a stream ------------------------------------------------------------------- */

/* Hands the line so far to fn (without a final CR) and empties it; fn's answer. */
static int emit(cli_lines *l)
{
    size_t len = dynbuf_len(&l->line);
    if (len > 0 && dynbuf_str(&l->line)[len - 1] == '\r')
        dynbuf_cut(&l->line, --len);
    int r = l->fn(l->ctx, dynbuf_str(&l->line), len);
    dynbuf_reset(&l->line);
    return r;
}

int cli_lines_feed(cli_lines *l, const char *data, size_t len)
{
    if (l->line.max == 0) /* zeroed: set up at the first bytes */
        dynbuf_init(&l->line, CLI_LINE_MAX - 1);
    size_t i = 0;
    while (i < len) {
        const char *nl = memchr(data + i, '\n', len - i);
        size_t end = nl ? (size_t)(nl - data) : len;
        while (i < end) {
            size_t room = l->line.max - dynbuf_len(&l->line);
            if (room == 0) {
                int r = emit(l); /* cut: the rest of the line starts a new one */
                if (r != 0)
                    return r;
                continue;
            }
            size_t n = end - i < room ? end - i : room;
            if (dynbuf_add(&l->line, data + i, n) < 0)
                return -ENOMEM;
            i += n;
        }
        if (nl) {
            int r = emit(l);
            if (r != 0)
                return r;
            i++;
        }
    }
    return 0;
}

int cli_lines_end(cli_lines *l)
{
    if (dynbuf_len(&l->line) == 0)
        return 0;
    return emit(l);
}

void cli_lines_reset(cli_lines *l)
{
    dynbuf_reset(&l->line);
}

void cli_lines_free(cli_lines *l)
{
    dynbuf_free(&l->line);
}
