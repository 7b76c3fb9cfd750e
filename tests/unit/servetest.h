/* servetest: the real `trainyard serve` for a C unit test that needs a server (the worker loop's
 * test, tests/unit/worker/test_agent.c). servetest_start() makes a temporary folder, starts the
 * binary named by $TRAINYARD_BIN (meson passes the one it built) on a free loopback port with its
 * data directory there and no local workers, waits for its "listening on" line and reads the
 * admin token. The server dies with the test however the test ends: an atexit handler stops it
 * and removes the folder, and the child asks for SIGKILL when its parent dies (an abort, a
 * sanitizer's report). servetest_stop() ends it early and says whether its log holds a sanitizer
 * report. Any failure to start stops the test with exit 1 and says why. Include after
 * tests/unit/check.h. */
#ifndef TRAINYARD_TESTS_SERVETEST_H
#define TRAINYARD_TESTS_SERVETEST_H

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct servetest {
    char dir[512];   /* the temporary folder: data/, serve.log, and what the test writes */
    char url[128];   /* http://127.0.0.1:PORT */
    char admin[256]; /* the admin token's secret */
    pid_t pid;       /* the server, 0 once stopped */
} servetest;

static servetest *servetest_running; /* the one the atexit handler cleans up */

static inline void servetest_die(const char *what, const char *why)
{
    fprintf(stderr, "servetest: %s: %s\n", what, why);
    exit(1);
}

static inline void servetest_sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* The whole of a small file as a NUL-terminated string (free it), or NULL. */
static inline char *servetest_slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, len = 0, n;
    char *text = malloc(cap);
    while (text && (n = fread(text + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (cap - len < 2) {
            char *more = realloc(text, cap * 2);
            if (!more) {
                free(text);
                text = NULL;
                break;
            }
            text = more;
            cap *= 2;
        }
    }
    fclose(f);
    if (text)
        text[len] = '\0';
    return text;
}

static inline int servetest_remove_one(const char *path, const struct stat *st, int flag,
                                       struct FTW *ftw)
{
    remove(path);
    return 0;
}

/* SIGTERM, then SIGKILL after 20 s; reaps it. Returns its wait status. */
static inline int servetest_end(servetest *s)
{
    int status = 0;
    if (s->pid <= 0)
        return 0;
    kill(s->pid, SIGTERM);
    for (int i = 0; i < 400; i++) {
        if (waitpid(s->pid, &status, WNOHANG) == s->pid) {
            s->pid = 0;
            return status;
        }
        servetest_sleep_ms(50);
    }
    kill(s->pid, SIGKILL);
    waitpid(s->pid, &status, 0);
    s->pid = 0;
    return status;
}

static inline void servetest_atexit(void)
{
    servetest *s = servetest_running;
    if (!s)
        return;
    servetest_end(s);
    if (!getenv("SERVETEST_KEEP"))
        nftw(s->dir, servetest_remove_one, 16, FTW_DEPTH | FTW_PHYS);
    else
        fprintf(stderr, "servetest: kept %s\n", s->dir);
    servetest_running = NULL;
}

/* Starts the server; extra (NULL-terminated, may be NULL) adds flags to `trainyard serve`. */
static inline void servetest_start(servetest *s, const char *const *extra)
{
    const char *bin = getenv("TRAINYARD_BIN");
    const char *tmp = getenv("TMPDIR");
    if (!bin || !*bin)
        servetest_die("TRAINYARD_BIN", "unset: run the test through `meson test`, which sets it");
    memset(s, 0, sizeof *s);
    snprintf(s->dir, sizeof s->dir, "%s/trainyard-test-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(s->dir))
        servetest_die("mkdtemp", strerror(errno));
    servetest_running = s;
    atexit(servetest_atexit);

    char data[1024], log[1024], port_arg[] = "0";
    snprintf(data, sizeof data, "%s/data", s->dir);
    snprintf(log, sizeof log, "%s/serve.log", s->dir);
    const char *argv[32] = {bin,      "serve",     "--data-dir", data, "--port",           port_arg,
                            "--bind", "127.0.0.1", "--workers",  "0",  "--predict-device", "none"};
    int argc = 12;
    for (int i = 0; extra && extra[i] && argc < 31; i++)
        argv[argc++] = extra[i];
    argv[argc] = NULL;

    pid_t parent = getpid();
    s->pid = fork();
    if (s->pid < 0)
        servetest_die("fork", strerror(errno));
    if (s->pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(1);
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd < 0)
            _exit(1);
        dup2(fd, 1);
        dup2(fd, 2);
        close(fd);
        execv(bin, (char *const *)argv);
        fprintf(stderr, "cannot run %s: %s\n", bin, strerror(errno));
        _exit(127);
    }

    /* Up to 60 s: a sanitizer build starts slowly on a busy machine. */
    char token_path[1100];
    snprintf(token_path, sizeof token_path, "%s/admin.token", data);
    for (int i = 0; i < 1200; i++) {
        char *text = servetest_slurp(log);
        const char *at = text ? strstr(text, "listening on http://") : NULL;
        if (at) {
            at += strlen("listening on ");
            size_t n = strcspn(at, " \r\n");
            snprintf(s->url, sizeof s->url, "%.*s", (int)(n < sizeof s->url ? n : 0), at);
        }
        free(text);
        char *token = s->url[0] ? servetest_slurp(token_path) : NULL;
        if (token && *token) {
            snprintf(s->admin, sizeof s->admin, "%.*s", (int)strcspn(token, "\r\n"), token);
            free(token);
            return;
        }
        free(token);
        int status;
        if (waitpid(s->pid, &status, WNOHANG) == s->pid) {
            s->pid = 0;
            text = servetest_slurp(log);
            fprintf(stderr, "%s\n", text ? text : "");
            free(text);
            servetest_die("trainyard serve", "exited before it listened (its output above)");
        }
        servetest_sleep_ms(50);
    }
    servetest_die("trainyard serve", "did not listen within 60 s");
}

/* Stops the server (SIGTERM) and returns 0, or -1 when it did not exit 0 or its log holds a
 * sanitizer's report (printed). */
static inline int servetest_stop(servetest *s)
{
    int status = servetest_end(s);
    char log[1024];
    snprintf(log, sizeof log, "%s/serve.log", s->dir);
    char *text = servetest_slurp(log);
    static const char *const marks[] = {"ERROR: AddressSanitizer", "ERROR: LeakSanitizer",
                                        "runtime error:"};
    int rc = WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
    if (rc < 0)
        fprintf(stderr, "servetest: trainyard serve ended with wait status %d\n", status);
    for (size_t i = 0; text && i < sizeof marks / sizeof marks[0]; i++) {
        const char *at = strstr(text, marks[i]);
        if (at) {
            fprintf(stderr, "servetest: the server reported:\n%.3000s\n", at);
            rc = -1;
        }
    }
    free(text);
    return rc;
}

#endif
