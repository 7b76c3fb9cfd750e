/* cli_client: what the API client commands (submit, status, list, logs, cancel, download, token,
 * workers, devices --remote) share: the connection flags and their environment defaults, one
 * exit status per kind of outcome, Ctrl-C, terminal detection, and text helpers (progress bar,
 * durations, sizes, stream lines).
 *
 * Exit statuses (the same for every client command; `trainyard CMD --help` repeats them):
 *   0 success (submit --follow: the job succeeded), 1 the server refused the request, the job
 *   failed or was cancelled, or a local file or checksum problem, 2 bad usage or an invalid job
 *   document, 3 no answer from the server (unreachable, timed out, TLS failure), 130 Ctrl-C.
 *
 * Ownership: cli_conn borrows its strings (argv, environment); cli_lines owns its buffer
 * (cli_lines_free). */
#ifndef TRAINYARD_CLI_CLIENT_H
#define TRAINYARD_CLI_CLIENT_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "client/client.h"
#include "util/dynbuf.h"

#define CLI_EXIT_OK          0
#define CLI_EXIT_FAILED      1
#define CLI_EXIT_USAGE       2
#define CLI_EXIT_UNREACHABLE 3
#define CLI_EXIT_INTERRUPTED 130

/* The lines every client command's --help ends with. */
#define CLI_CONN_HELP                                                                              \
    "connection (every client command):\n"                                                         \
    "  --server URL   the server (default $TRAINYARD_URL, else http://127.0.0.1:8080)\n"           \
    "  --token TOKEN  the bearer token (default $TRAINYARD_TOKEN)\n"                               \
    "  --ca FILE      verify an https server against this CA bundle (default $TRAINYARD_CA)\n"     \
    "  --json         print JSON instead of text\n"                                                \
    "\n"                                                                                           \
    "exit status: 0 success, 1 refused by the server, job failed or cancelled, or a local\n"       \
    "file or checksum problem, 2 bad usage or an invalid job document, 3 no answer from the\n"     \
    "server, 130 interrupted (Ctrl-C).\n"

typedef struct cli_conn {
    const char *cmd; /* "status": the word messages start with */
    const char *server, *token, *ca;
    int json; /* --json */
    int tty;  /* stdout is a terminal and not --json: progress may be drawn in place */
} cli_conn;

/* Set by SIGINT/SIGTERM once cli_conn_open ran; requests in flight end with -EINTR. */
extern volatile sig_atomic_t cli_interrupted;

/* Defaults from the environment for command cmd. */
void cli_conn_init(cli_conn *o, const char *cmd);
/* Takes argv[*i] when it is a connection flag (moving *i past its value): 1 taken, 0 not one
 * of them, -1 a flag without its value (said on stderr). */
int cli_conn_flag(cli_conn *o, int argc, char **argv, int *i);
/* cli_conn_flag, and --help/-h (help, then CLI_CONN_HELP, printed on stdout): 1 a connection
 * flag taken, 2 help printed (the command exits 0), 0 neither, -1 a flag without its value. */
int cli_common_word(cli_conn *o, const char *help, int argc, char **argv, int *i);
/* Says on stderr that argv's word a is not understood; returns CLI_EXIT_USAGE. */
int cli_usage_error(const cli_conn *o, const char *what, const char *a);
/* A client for o (Ctrl-C handling installed); 0, or an exit status after saying why. */
int cli_conn_open(cli_conn *o, client **out);

/* The exit status for a request that got no answer (rc < 0), after printing err. */
int cli_no_answer(const cli_conn *o, int rc, const char *err);
/* The exit status for an answer other than the one expected, after printing it as a sentence. */
int cli_refused(const cli_conn *o, long status, const json_t *reply);
/* GET path expecting 200 with a JSON object: 0 and *reply (new reference), or an exit status
 * after saying what went wrong. */
int cli_get(const cli_conn *o, client *c, const char *path, json_t **reply);

/* s percent-encoded for a URL path segment or query value (all but A-Z a-z 0-9 - . _ ~), into
 * out; -ENAMETOOLONG when it does not fit in cap bytes. */
int cli_escape(const char *s, char *out, size_t cap);

/* "/jobs/<id escaped><rest>" into out: 0, or CLI_EXIT_USAGE after saying the id is too long. */
int cli_job_path(const cli_conn *o, const char *id, const char *rest, char *out, size_t cap);

/* Prints j indented, with a newline, on stdout. */
void cli_json_print(const json_t *j);
/* obj[key] when it is a string, else "-" (absent, null). */
const char *cli_str(const json_t *obj, const char *key);
/* "1.2s", "3m04s", "2h05m" into out[24]. */
void cli_duration(double seconds, char out[24]);
/* "512 B", "3.4 MiB" into out[24]. */
void cli_size(uint64_t bytes, char out[24]);
/* A bar of width cells for fraction done (0..1): "#####-----", into out (width + 1 bytes). */
void cli_bar(double done, int width, char *out);
/* Seconds since the epoch of an API time ("2026-01-02T03:04:05.678Z"); -1 when not one. */
double cli_time(const char *text);
/* "loss 0.4100 acc 0.8800 val_loss 0.4500 val_acc 0.8600" from an EpochMetrics, then a script's
 * own metrics ("top5 0.93"), into out (cut at cap). */
void cli_metrics_text(const json_t *epoch, char *out, size_t cap);

/* Follows job id's event stream until it ends, showing progress, then a summary (cmd_follow.c);
 * returns the exit status: 0 only when the job succeeded. */
int cli_follow(const cli_conn *o, client *c, const char *id);

/* Splits a byte stream into lines (without "\n" or "\r\n"); each complete line goes to fn,
 * NUL-terminated. A line longer than CLI_LINE_MAX - 1 bytes is cut there. A zeroed cli_lines
 * with fn (and ctx) set is ready: its buffer is set up at the first byte. */
#define CLI_LINE_MAX (8u << 20)
typedef int (*cli_line_fn)(void *ctx, const char *line, size_t len);
typedef struct cli_lines {
    dynbuf line; /* the line so far, capped at CLI_LINE_MAX - 1 bytes */
    cli_line_fn fn;
    void *ctx;
} cli_lines;
/* Feeds bytes; fn's nonzero answer stops and is returned (a client_sink can pass it on). */
int cli_lines_feed(cli_lines *l, const char *data, size_t len);
/* Hands an unterminated last line to fn; returns fn's answer. */
int cli_lines_end(cli_lines *l);
/* Drops a partial line, keeping the buffer (a stream that starts again). */
void cli_lines_reset(cli_lines *l);
/* Releases the buffer; accepts a zeroed cli_lines. */
void cli_lines_free(cli_lines *l);

#endif
