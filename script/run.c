/* run: script_run, one run of a user's training script (see run.h; the sandbox in sandbox.h).
 *
 * The child: its own session (setsid: its own process group, and no controlling terminal to
 * push keystrokes into), PR_SET_PDEATHSIG(SIGKILL), every signal's disposition back to the
 * default, RLIMIT_DATA, stdin /dev/null, stdout and stderr on two pipes, every other descriptor
 * of the worker closed, an environment built from nothing. Sandboxed, it is bwrap, started with
 * SIGTERM blocked and running `<this binary> __script-exec 3 LIMIT -- ARGV`, which reports the
 * script's real end on fd 3 (sandbox.h says why); directly, it is the script itself.
 *
 * The loop (one thread, poll on the two pipes, a tick at least every 200 ms): log lines as they
 * come; should_stop → SIGTERM to the group, SIGKILL grace_s later; metrics.jsonl read from
 * where it was left; checkpoint/ fingerprinted every tick. When the child has been
 * reaped, whatever is left in its group is killed, the pipes are read to their end (2 s at
 * most: a process that left the group may hold them), and metrics and checkpoint/ are looked at
 * one last time.
 *
 * Checkpoints: a fingerprint (SHA-256 of every entry's path, type, size and mtime) that differs
 * from the last one handed over and equals the previous tick's is packed, at most once per
 * checkpoint_poll_s (a script that checkpoints every half second still has settled moments
 * between its writes, where a 2 s stability rule would see none until it ended); if the folder
 * changed while it was packed, the pack is dropped and a later tick tries again. The folder as
 * found at the start (a resumed checkpoint) is never handed back. The packs are made in
 * job_dir/.trainyard/ (0700), which the sandbox covers with an empty tmpfs, and read through
 * descriptors opened with O_NOFOLLOW: a script cannot swap a pack, or a folder being packed, for
 * a link to a file of the worker's (its token) and have that uploaded. Without the sandbox there
 * is no such wall: the script runs as the worker. */
#include "script/run.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "script/bundle.h"
#include "script/netns.h"
#include "script/sandbox.h"
#include "util/path.h"
#include "util/err.h"
#include "util/exepath.h"
#include "util/sha256.h"
#include "util/timeutil.h"
#include "util/utf8.h"

#define LINE_MAX_BYTES   1000 /* a log line past this is cut */
#define TAIL_LINES       20
#define METRICS_LINE_MAX (64 * 1024) /* a metrics line past this is ignored */
#define METRICS_KEYS_MAX 64
#define TICK_S           0.2
#define DRAIN_S          2.0
#define STATUS_FD        3
#define PRIVATE_DIR      ".trainyard" /* in job_dir: the packs, out of the script's sight */

/* ---- environment ---- */

typedef sandbox_args strv;

static int strv_add(strv *s, const char *x)
{
    return sandbox_args_add(s, x);
}

/* Sets NAME=VALUE, replacing an earlier entry of the same name. */
static int env_set(strv *s, const char *kv)
{
    const char *eq = strchr(kv, '=');
    if (!eq || eq == kv)
        return -EINVAL;
    size_t nl = (size_t)(eq - kv) + 1;
    for (size_t i = 0; i < s->n; i++)
        if (!strncmp(s->v[i], kv, nl)) {
            char *c = strdup(kv);
            if (!c)
                return -ENOMEM;
            free(s->v[i]);
            s->v[i] = c;
            return 0;
        }
    return strv_add(s, kv);
}

static int env_setf(strv *s, const char *name, const char *a, const char *b)
{
    char buf[PATH_MAX + 64];
    int n = snprintf(buf, sizeof buf, "%s=%s%s", name, a, b ? b : "");
    if (n < 0 || (size_t)n >= sizeof buf)
        return -ENAMETOOLONG;
    return env_set(s, buf);
}

/* ---- logs ---- */

typedef struct logbuf {
    char line[LINE_MAX_BYTES + 1];
    size_t len;
    int cut; /* the current line passed LINE_MAX_BYTES: the rest is dropped */
} logbuf;

typedef struct runner {
    const script_opts *o;
    const script_hooks *h;
    char jd[PATH_MAX];
    char tail[TAIL_LINES][LINE_MAX_BYTES + 1];
    int tail_n, tail_next;
    /* metrics */
    int mfd;
    off_t moff;
    char *mline;
    size_t mlen;
    int mskip; /* the current line is too long: skipped to its newline */
    long mline_no;
    int max_epoch;
    /* checkpoints */
    uint8_t cp_last[32], cp_prev[32];
    int cp_seq;
    double cp_next;
} runner;

static void emit_log(runner *r, const char *raw)
{
    char clean[LINE_MAX_BYTES + 1];
    utf8_clean(clean, sizeof clean, raw);
    memcpy(r->tail[r->tail_next], clean, strlen(clean) + 1);
    r->tail_next = (r->tail_next + 1) % TAIL_LINES;
    if (r->tail_n < TAIL_LINES)
        r->tail_n++;
    if (r->h && r->h->on_log)
        r->h->on_log(r->h->user, clean);
}

static void log_feed(runner *r, logbuf *b, const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        if (c == '\n') {
            b->line[b->len] = '\0';
            emit_log(r, b->line);
            b->len = 0;
            b->cut = 0;
        } else if (b->len < LINE_MAX_BYTES) {
            b->line[b->len++] = c == '\0' ? '?' : c;
        } else {
            b->cut = 1;
        }
    }
}

static void log_flush(runner *r, logbuf *b)
{
    if (b->len) {
        b->line[b->len] = '\0';
        emit_log(r, b->line);
    }
    b->len = 0;
}

static void logf_line(runner *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void logf_line(runner *r, const char *fmt, ...)
{
    char buf[LINE_MAX_BYTES + 1];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    emit_log(r, buf);
}

/* ---- metrics ---- */

static int metric_name_ok(const char *k)
{
    size_t n = strlen(k);
    if (n < 1 || n > 64)
        return 0;
    if (!((k[0] >= 'A' && k[0] <= 'Z') || (k[0] >= 'a' && k[0] <= 'z')))
        return 0;
    for (size_t i = 1; i < n; i++) {
        char c = k[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              strchr("_.:/-", c)))
            return 0;
    }
    return 1;
}

static void metrics_line(runner *r, const char *line, size_t len)
{
    r->mline_no++;
    while (len && (line[len - 1] == '\r' || line[len - 1] == ' ' || line[len - 1] == '\t'))
        len--;
    if (len == 0)
        return; /* blank lines are nothing, not an error */
    json_error_t je;
    json_t *j = json_loadb(line, len, JSON_REJECT_DUPLICATES, &je);
    const char *why = NULL;
    char whybuf[300];
    if (!j) {
        snprintf(whybuf, sizeof whybuf, "not JSON (%s)", je.text);
        why = whybuf;
    } else if (!json_is_object(j)) {
        why = "not a JSON object";
    } else if (!json_is_integer(json_object_get(j, "epoch")) ||
               json_integer_value(json_object_get(j, "epoch")) < 1 ||
               json_integer_value(json_object_get(j, "epoch")) > INT_MAX) {
        why = "\"epoch\" must be an integer >= 1";
    } else if (json_object_size(j) > METRICS_KEYS_MAX) {
        snprintf(whybuf, sizeof whybuf, "more than %d keys", METRICS_KEYS_MAX);
        why = whybuf;
    } else {
        const char *k;
        json_t *v;
        json_object_foreach (j, k, v) {
            if (!metric_name_ok(k)) {
                snprintf(whybuf, sizeof whybuf,
                         "the name \"%.64s\" is not a metric name "
                         "(^[A-Za-z][A-Za-z0-9_.:/-]{0,63}$)",
                         k);
                why = whybuf;
                break;
            }
            if (strcmp(k, "histograms") == 0) { /* the heartbeat's weight histograms */
                why = "the name \"histograms\" is reserved";
                break;
            }
            if (!json_is_number(v) && !json_is_null(v)) {
                snprintf(whybuf, sizeof whybuf, "the value of \"%.64s\" is not a number or null",
                         k);
                why = whybuf;
                break;
            }
        }
    }
    if (why) {
        logf_line(r, "metrics line %ld ignored: %s", r->mline_no, why);
    } else {
        int e = (int)json_integer_value(json_object_get(j, "epoch"));
        if (e > r->max_epoch)
            r->max_epoch = e;
        if (r->h && r->h->on_metrics)
            r->h->on_metrics(r->h->user, j);
    }
    json_decref(j);
}

/* The line gathered so far is complete. */
static void metrics_end_line(runner *r)
{
    if (r->mskip) {
        r->mline_no++;
        logf_line(r, "metrics line %ld ignored: longer than %d bytes", r->mline_no,
                  METRICS_LINE_MAX);
    } else {
        metrics_line(r, r->mline, r->mlen);
    }
    r->mlen = 0;
    r->mskip = 0;
}

/* Reads what metrics.jsonl gained; at_end: a last line without its newline counts too. */
static void metrics_poll(runner *r, int at_end)
{
    if (r->mfd < 0) {
        char p[PATH_MAX + 32];
        snprintf(p, sizeof p, "%s/metrics.jsonl", r->jd);
        r->mfd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
        if (r->mfd < 0)
            return;
    }
    char buf[16384];
    for (;;) {
        ssize_t k = pread(r->mfd, buf, sizeof buf, r->moff);
        if (k <= 0)
            break;
        r->moff += k;
        for (ssize_t i = 0; i < k; i++) {
            if (buf[i] == '\n') {
                metrics_end_line(r);
            } else if (!r->mskip) {
                if (r->mlen == METRICS_LINE_MAX)
                    r->mskip = 1;
                else
                    r->mline[r->mlen++] = buf[i];
            }
        }
    }
    if (at_end && (r->mlen || r->mskip))
        metrics_end_line(r);
}

/* ---- checkpoints ---- */

/* Hashes the entries below the folder dfd (closed here), relative to it and following no
 * symlink, so that a folder swapped for a link meanwhile is never walked into. */
static void fp_walk(sha256_ctx *c, int dfd, const char *rel, long *entries, int depth)
{
    DIR *d = depth <= 64 ? fdopendir(dfd) : NULL;
    if (!d) {
        close(dfd);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        char r2[PATH_MAX];
        int n = snprintf(r2, sizeof r2, "%s%s%s", rel, rel[0] ? "/" : "", e->d_name);
        struct stat st;
        if (n < 0 || (size_t)n >= sizeof r2 ||
            fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        char rec[128];
        int rl = snprintf(rec, sizeof rec, "\n%o %lld %lld.%09ld\n", (unsigned)st.st_mode,
                          (long long)st.st_size, (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
        sha256_update(c, r2, strlen(r2));
        sha256_update(c, rec, (size_t)rl);
        (*entries)++;
        if (!S_ISDIR(st.st_mode))
            continue;
        int sub = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub >= 0)
            fp_walk(c, sub, r2, entries, depth + 1);
    }
    closedir(d);
}

/* The fingerprint of checkpoint/; *entries: how many entries it has. */
static void cp_fingerprint(runner *r, uint8_t out[32], long *entries)
{
    char dir[PATH_MAX + 16];
    snprintf(dir, sizeof dir, "%s/checkpoint", r->jd);
    sha256_ctx c;
    sha256_init(&c);
    *entries = 0;
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd >= 0)
        fp_walk(&c, dfd, "", entries, 0);
    sha256_final(&c, out);
}

/* Packs checkpoint/ and hands it over when it still matches fp afterwards; 1 when handed. */
static int cp_hand_over(runner *r, const uint8_t fp[32], int check_after)
{
    char dir[PATH_MAX + 16], src[64], out[PATH_MAX + 64], err[ERR_LEN];
    snprintf(dir, sizeof dir, "%s/checkpoint", r->jd);
    snprintf(out, sizeof out, "%s/" PRIVATE_DIR "/checkpoint-%d.tar.gz", r->jd, ++r->cp_seq);
    /* packed through a descriptor opened without following a link: checkpoint/ swapped for a
     * symlink after it was looked at still cannot make the pack read a folder outside */
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0) {
        memcpy(r->cp_last, fp, 32);
        return 0;
    }
    snprintf(src, sizeof src, "/proc/self/fd/%d", dfd);
    bundle_limits lim = {.max_files = 1000000, .max_unpacked_bytes = 1ull << 42};
    int rc = bundle_pack(src, out, &lim, NULL, err);
    close(dfd);
    if (rc < 0) {
        logf_line(r, "checkpoint not uploaded: %s", err);
        memcpy(r->cp_last, fp, 32); /* not again until it changes */
        return 0;
    }
    if (check_after) {
        uint8_t now[32];
        long n;
        cp_fingerprint(r, now, &n);
        if (memcmp(now, fp, 32) != 0) { /* written to while packed: next poll */
            unlink(out);
            memcpy(r->cp_prev, now, 32);
            return 0;
        }
    }
    memcpy(r->cp_last, fp, 32);
    if (r->h && r->h->on_checkpoint)
        r->h->on_checkpoint(r->h->user, out, r->max_epoch > 0 ? r->max_epoch : 1);
    unlink(out); /* gone if the callee renamed it away */
    return 1;
}

/* Looks at checkpoint/ (every tick): a change that has stayed the same since the previous
 * tick is handed over when may_hand (at most once per checkpoint_poll_s); 1 when it was. */
static int cp_poll(runner *r, int at_end, int may_hand)
{
    uint8_t fp[32];
    long n;
    cp_fingerprint(r, fp, &n);
    if (memcmp(fp, r->cp_last, 32) != 0 && n > 0) {
        if (at_end)
            return cp_hand_over(r, fp, 0);
        if (may_hand && !memcmp(fp, r->cp_prev, 32) && cp_hand_over(r, fp, 1))
            return 1;
    }
    memcpy(r->cp_prev, fp, 32);
    return 0;
}

/* ---- starting ---- */

static int script_path_ok(const char *s)
{
    if (!s || !*s || s[0] == '/' || strlen(s) > 255 || strchr(s, '\\'))
        return 0;
    for (const char *p = s; *p;) {
        const char *e = strchr(p, '/');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == 2 && p[0] == '.' && p[1] == '.')
            return 0;
        p += len;
        if (*p == '/')
            p++;
    }
    return 1;
}

static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

/* A name without '/' found on the worker's PATH; a relative path made absolute. */
static int find_program(const char *name, char *out, size_t cap, char *err)
{
    if (strchr(name, '/')) {
        char cwd[PATH_MAX];
        int n = name[0] != '/' && getcwd(cwd, sizeof cwd) ? path_join(out, cap, cwd, name, NULL)
                                                          : snprintf(out, cap, "%s", name);
        if (n < 0 || (size_t)n >= cap)
            return err_set(err, -ENAMETOOLONG, "the interpreter's path is too long");
        if (access(out, X_OK) < 0)
            return err_set(err, -ENOENT, "the interpreter %s cannot be run: %s", out,
                           strerror(errno));
        return 0;
    }
    if (exepath_which(name, out, cap) < 0)
        return err_set(err, -ENOENT,
                       "the interpreter \"%s\" is not on PATH; give its path (--python)", name);
    return 0;
}

static void reset_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    for (int s = 1; s < NSIG; s++)
        if (s != SIGKILL && s != SIGSTOP)
            sigaction(s, &sa, NULL);
}

/* dup2 that leaves `to` open across exec even when it is already `from`. */
static int move_fd(int from, int to)
{
    if (from == to)
        return fcntl(to, F_SETFD, 0);
    return dup2(from, to);
}

/* Before the child is reaped: its group, or the child alone when it has not made the group yet. */
static void kill_group(pid_t pid, int sig)
{
    if (killpg(pid, sig) < 0 && errno == ESRCH)
        kill(pid, sig); /* before the child's setsid */
}

int script_run(const script_opts *o, const script_hooks *h, script_result *res, char *err)
{
    runner r;
    memset(&r, 0, sizeof r);
    r.o = o;
    r.h = h;
    r.mfd = -1;
    strv env = {0}, argv = {0}, ro = {0};
    int out_p[2] = {-1, -1}, err_p[2] = {-1, -1}, st_p[2] = {-1, -1};
    netns_fds ns = {-1, -1};
    int rc = 0;
    pid_t pid = -1;
    char path[PATH_MAX + NAME_MAX + 64], python[PATH_MAX];

    if (!script_path_ok(o->script))
        return err_set(err, -EINVAL,
                       "training_script \"%s\" must be a relative path inside the code, without "
                       "\"..\"",
                       o->script ? o->script : "");
    if (!realpath(o->job_dir, r.jd))
        return err_set(err, -errno, "the job folder %s: %s", o->job_dir, strerror(errno));
    static const char *const subdirs[] = {"code", "data", "output",   "checkpoint",
                                          "tmp",  "home", PRIVATE_DIR};
    for (size_t i = 0; i < sizeof subdirs / sizeof subdirs[0]; i++) {
        rc = path_join(path, sizeof path, r.jd, subdirs[i], err);
        if (rc < 0)
            return rc;
        if (mkdir(path, 0755) < 0 && errno != EEXIST)
            return err_set(err, -errno, "cannot make %s: %s", path, strerror(errno));
        if (!strcmp(subdirs[i], PRIVATE_DIR) && chmod(path, 0700) < 0)
            return err_set(err, -errno, "cannot make %s private: %s", path, strerror(errno));
    }
    snprintf(path, sizeof path, "%s/code/%s", r.jd, o->script);
    struct stat st;
    if (stat(path, &st) < 0 || !S_ISREG(st.st_mode))
        return err_set(err, -ENOENT, "the training script %s is not a file in the code", o->script);
    int is_py = ends_with(o->script, ".py");
    if (!is_py && !(st.st_mode & 0100))
        return err_set(err, -EACCES,
                       "the training script %s is not executable: mark it (chmod +x, kept in the "
                       "bundle) or give a .py",
                       o->script);
    if (is_py) {
        char found[PATH_MAX];
        rc =
            find_program(o->python && *o->python ? o->python : "python3", found, sizeof found, err);
        /* the interpreter's own executable, not a wrapper such as pyenv's shim: asked here
         * without a sandbox, with its prefixes below (one start of it) in one */
        if (rc == 0 && !o->sandbox)
            rc = sandbox_python_executable(found, python, sizeof python, err);
        else if (rc == 0)
            snprintf(python, sizeof python, "%s", found);
        if (rc < 0)
            return rc;
    }

    const char *base = o->sandbox ? "/job" : r.jd;
    char launcher[PATH_MAX];
    if (o->sandbox) {
        rc = exepath_self(launcher, sizeof launcher, err);
        if (rc == 0 && is_py)
            rc = sandbox_python_prefixes(python, &ro, python, sizeof python, err);
        if (rc < 0)
            goto out;
        char cwd[PATH_MAX];
        snprintf(cwd, sizeof cwd, "/job/code");
        const char *hidden[] = {"/job/" PRIVATE_DIR, NULL};
        sandbox_cfg c = {.job_dir = r.jd,
                         .chdir = cwd,
                         .network = o->network || o->netns_holder > 0,
                         .ro_binds = o->ro_binds,
                         .ro_paths = (const char *const *)ro.v,
                         .launcher = launcher,
                         .hidden = hidden};
        rc = sandbox_args_bwrap(&c, &argv, err);
        if (rc < 0)
            goto out;
        char fdnum[16], limit[32];
        snprintf(fdnum, sizeof fdnum, "%d", STATUS_FD);
        snprintf(limit, sizeof limit, "%llu", (unsigned long long)o->memory_bytes);
        if (strv_add(&argv, "--") < 0 || strv_add(&argv, SANDBOX_LAUNCHER) < 0 ||
            strv_add(&argv, "__script-exec") < 0 || strv_add(&argv, fdnum) < 0 ||
            strv_add(&argv, limit) < 0 || strv_add(&argv, "--") < 0) {
            rc = err_set(err, -ENOMEM, "out of memory");
            goto out;
        }
    }
    snprintf(path, sizeof path, "%s/code/%s", base, o->script);
    if ((is_py && strv_add(&argv, python) < 0) || strv_add(&argv, path) < 0) {
        rc = err_set(err, -ENOMEM, "out of memory");
        goto out;
    }

    /* the environment, from nothing */
    char pathvar[PATH_MAX + 64] = "";
    if (is_py) {
        snprintf(pathvar, sizeof pathvar, "%s", python);
        char *slash = strrchr(pathvar, '/');
        *slash = '\0';
        if (!strcmp(pathvar, "/usr/bin") || !strcmp(pathvar, "/bin"))
            pathvar[0] = '\0';
        else
            strcat(pathvar, ":");
    }
    strcat(pathvar, "/usr/local/bin:/usr/bin:/bin");
    rc = env_setf(&env, "TRAINYARD_CODE_DIR", base, "/code");
    if (rc == 0)
        rc = env_setf(&env, "TRAINYARD_OUTPUT_DIR", base, "/output");
    if (rc == 0)
        rc = env_setf(&env, "TRAINYARD_CHECKPOINT_DIR", base, "/checkpoint");
    if (rc == 0)
        rc = env_setf(&env, "TRAINYARD_METRICS", base, "/metrics.jsonl");
    if (rc == 0) /* absent until the worker asks the script to end (early stopping, a stop) */
        rc = env_setf(&env, "TRAINYARD_STOP_FILE", base, "/stop");
    if (rc == 0)
        rc = env_setf(&env, "HOME", base, "/home");
    if (rc == 0)
        rc = env_setf(&env, "TMPDIR", base, "/tmp");
    if (rc == 0)
        rc = env_setf(&env, "PATH", pathvar, NULL);
    if (rc == 0)
        rc = env_set(&env, "LANG=C.UTF-8");
    if (rc == 0)
        rc = env_set(&env, "PYTHONUNBUFFERED=1");
    snprintf(path, sizeof path, "%s/lib", r.jd);
    if (rc == 0 && stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        rc = env_setf(&env, "PYTHONPATH", base, "/lib");
    snprintf(path, sizeof path, "%s/data", r.jd);
    DIR *dd = opendir(path);
    if (dd) {
        struct dirent *e;
        int count = 0;
        char one[NAME_MAX + 1] = "";
        while ((e = readdir(dd)))
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
                count++;
                snprintf(one, sizeof one, "%s", e->d_name);
            }
        closedir(dd);
        snprintf(path, sizeof path, "%s/data/%s", r.jd, one);
        if (rc == 0 && count == 1 && stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
            snprintf(path, sizeof path, "/data/%s", one);
            rc = env_setf(&env, "TRAINYARD_DATASET", base, path);
        }
    }
    for (size_t i = 0; rc == 0 && o->env && o->env[i]; i++)
        rc = env_set(&env, o->env[i]);
    if (rc < 0) {
        rc = err_set(err, rc, "cannot build the script's environment (%s)", strerror(-rc));
        goto out;
    }
    if (!env.v && strv_add(&env, "LANG=C.UTF-8") < 0) {
        rc = err_set(err, -ENOMEM, "out of memory");
        goto out;
    }

    r.mline = malloc(METRICS_LINE_MAX);
    if (!r.mline) {
        rc = err_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    long n0;
    cp_fingerprint(&r, r.cp_last, &n0);
    memcpy(r.cp_prev, r.cp_last, 32);

    if (pipe2(out_p, O_CLOEXEC) < 0 || pipe2(err_p, O_CLOEXEC) < 0 ||
        (o->sandbox && pipe2(st_p, O_CLOEXEC | O_NONBLOCK) < 0)) {
        rc = err_set(err, -errno, "pipe: %s", strerror(errno));
        goto out;
    }
    char code_dir[PATH_MAX + 8];
    snprintf(code_dir, sizeof code_dir, "%s/code", r.jd);
    struct rlimit rl = {.rlim_cur = o->memory_bytes, .rlim_max = o->memory_bytes};
    if (o->netns_holder > 0 && !o->sandbox) {
        rc = err_set(err, -EINVAL, "a shared network namespace needs the sandbox");
        goto out;
    }
    if (o->netns_holder > 0 && (rc = netns_open(o->netns_holder, &ns, err)) < 0)
        goto out;
    pid_t parent = getpid();
    pid = fork();
    if (pid < 0) {
        rc = err_set(err, -errno, "cannot start the script: fork: %s", strerror(errno));
        goto out;
    }
    if (pid == 0) {
        /* the child: async-signal-safe calls only, everything was prepared above */
        setsid();
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        reset_signals();
        sigset_t mask;
        sigemptyset(&mask);
        if (o->sandbox)
            sigaddset(&mask, SIGTERM);
        sigprocmask(SIG_SETMASK, &mask, NULL);
        if (o->memory_bytes && !o->sandbox) /* sandboxed: the launcher sets it */
            setrlimit(RLIMIT_DATA, &rl);
        /* before bwrap (see netns.h), and before the moves below may land on these numbers */
        if (o->netns_holder > 0 && netns_join(&ns) < 0)
            _exit(127);
        int nul = open("/dev/null", O_RDONLY);
        if (nul < 0 || move_fd(nul, 0) < 0 || move_fd(out_p[1], 1) < 0 || move_fd(err_p[1], 2) < 0)
            _exit(127);
        if (o->sandbox && move_fd(st_p[1], STATUS_FD) < 0)
            _exit(127);
        close_range(o->sandbox ? STATUS_FD + 1 : 3, ~0u, 0);
        if (chdir(code_dir) < 0)
            _exit(127);
        umask(022);
        execve(argv.v[0], argv.v, env.v);
        static const char msg[] = "trainyard: cannot run the script\n";
        ssize_t ignored = write(2, msg, sizeof msg - 1);
        (void)ignored;
        _exit(127);
    }
    netns_close(&ns);
    close(out_p[1]);
    close(err_p[1]);
    out_p[1] = err_p[1] = -1;
    if (o->sandbox) {
        close(st_p[1]);
        st_p[1] = -1;
    }

    /* the loop */
    double grace = o->grace_s > 0 ? o->grace_s : 10.0;
    double cp_every = o->checkpoint_poll_s > 0 ? o->checkpoint_poll_s : 2.0;
    double now = time_mono(), next_tick = now, kill_at = 0, drain_until = 0;
    r.cp_next = now + cp_every;
    logbuf lb[2];
    memset(lb, 0, sizeof lb);
    int fds[2] = {out_p[0], err_p[0]};
    int reaped = 0, wst = 0, stopped = 0, killed = 0;
    for (;;) {
        struct pollfd pf[2];
        int np = 0, idx[2];
        for (int i = 0; i < 2; i++)
            if (fds[i] >= 0) {
                pf[np].fd = fds[i];
                pf[np].events = POLLIN;
                idx[np++] = i;
            }
        if (np == 0 && reaped)
            break;
        now = time_mono();
        if (reaped && now >= drain_until)
            break;
        double wait_s = next_tick - now;
        int ms = wait_s <= 0 ? 0 : (int)(wait_s * 1000) + 1;
        int pr = poll(pf, (nfds_t)np, ms);
        if (pr < 0 && errno != EINTR) {
            kill_group(pid, SIGKILL);
            break;
        }
        for (int i = 0; pr > 0 && i < np; i++) {
            if (!(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            char buf[8192];
            ssize_t k = read(pf[i].fd, buf, sizeof buf);
            if (k > 0) {
                log_feed(&r, &lb[idx[i]], buf, (size_t)k);
            } else if (k == 0 || (errno != EINTR && errno != EAGAIN)) {
                log_flush(&r, &lb[idx[i]]);
                close(fds[idx[i]]);
                fds[idx[i]] = -1;
            }
        }
        now = time_mono();
        if (now < next_tick)
            continue;
        next_tick = now + TICK_S;
        if (!reaped) {
            pid_t w = waitpid(pid, &wst, WNOHANG);
            if (w == pid) {
                reaped = 1;
                drain_until = now + DRAIN_S;
                killpg(pid, SIGKILL); /* what the script left behind in its group (the pid
                                         itself is free now: never kill() it) */
            }
        }
        if (!reaped && !stopped && h && h->should_stop && h->should_stop(h->user)) {
            stopped = 1;
            kill_group(pid, SIGTERM);
            kill_at = now + grace;
        }
        if (!reaped && stopped && !killed && now >= kill_at) {
            killed = 1;
            kill_group(pid, SIGKILL);
        }
        metrics_poll(&r, 0);
        /* looked at every tick, so that a script that checkpoints more often than
         * checkpoint_poll_s still shows a settled folder between two writes */
        if (cp_poll(&r, 0, now >= r.cp_next))
            r.cp_next = now + cp_every;
    }
    if (!reaped) {
        while (waitpid(pid, &wst, 0) < 0 && errno == EINTR)
            ;
        reaped = 1;
    }
    for (int i = 0; i < 2; i++) {
        log_flush(&r, &lb[i]);
        if (fds[i] >= 0)
            close(fds[i]);
    }
    out_p[0] = err_p[0] = -1;
    metrics_poll(&r, 1);
    cp_poll(&r, 1, 1);

    res->exit_code = -1;
    res->signal = 0;
    res->stopped = stopped;
    char status[64] = "";
    if (o->sandbox) {
        ssize_t k = read(st_p[0], status, sizeof status - 1);
        status[k > 0 ? k : 0] = '\0';
    }
    int v;
    if (sscanf(status, "exit %d", &v) == 1)
        res->exit_code = v;
    else if (sscanf(status, "signal %d", &v) == 1)
        res->signal = v;
    else if (WIFSIGNALED(wst))
        res->signal = WTERMSIG(wst);
    else if (WIFEXITED(wst))
        res->exit_code = WEXITSTATUS(wst);
    /* the tail: the newest lines that fit, oldest first */
    res->tail[0] = '\0';
    size_t used = 0;
    int first = 0;
    for (int k = 1; k <= r.tail_n; k++) { /* k-th newest */
        const char *l = r.tail[(r.tail_next - k + TAIL_LINES) % TAIL_LINES];
        if (used + strlen(l) + 1 >= sizeof res->tail)
            break;
        used += strlen(l) + 1;
        first = k;
    }
    for (int k = first; k >= 1; k--) {
        const char *l = r.tail[(r.tail_next - k + TAIL_LINES) % TAIL_LINES];
        strcat(res->tail, l);
        if (k > 1)
            strcat(res->tail, "\n");
    }
    rc = 0;
out:
    netns_close(&ns);
    for (int i = 0; i < 2; i++) {
        if (out_p[i] >= 0)
            close(out_p[i]);
        if (err_p[i] >= 0)
            close(err_p[i]);
        if (st_p[i] >= 0)
            close(st_p[i]);
    }
    if (r.mfd >= 0)
        close(r.mfd);
    free(r.mline);
    sandbox_args_free(&env);
    sandbox_args_free(&argv);
    sandbox_args_free(&ro);
    return rc;
}
