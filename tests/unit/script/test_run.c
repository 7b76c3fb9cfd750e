/* Tests of script/run.c and sandbox.c: real script_run runs of small sh and python3 scripts,
 * directly and in bubblewrap: live logs, metrics lines (good and bad), checkpoint snapshots,
 * exit codes and signals, SIGTERM handlers within the grace, SIGKILL after it, death with the
 * parent, the sandbox's walls, the environment (no TRAINYARD_TOKEN), PYTHONPATH, RLIMIT_DATA, and
 * the network namespace a distributed job's sandboxes share (script/netns.h).
 *
 * This program is its own launcher: sandboxed runs start `<this binary> __script-exec`, so main
 * dispatches it first, as trainyard's main does. The job folders live under the current folder
 * (the build tree), not /tmp, so that "a file outside the job folder" is really outside what the
 * sandbox binds. Sandboxed cases are skipped, saying why, when bubblewrap cannot run here. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "script/bundle.h"
#include "script/netns.h"
#include "script/run.h"
#include "script/sandbox.h"
#include "tests/unit/check.h"
#include "tests/unit/script/testfs.h"
#include "util/err.h"
#include "util/timeutil.h"

#define PY "/usr/bin/python3"

static char root[512];
static int have_python;

typedef struct seen {
    char *lines[256];
    double at[256];
    int n;
    json_t *metrics; /* array of copies */
    char cps[16][700];
    int cp_epochs[16];
    int ncp;
    const char *stop_after; /* should_stop once a line containing it was logged */
    int stop_now;
    char dir[600];
} seen;

static void on_log(void *u, const char *line)
{
    seen *s = u;
    if (s->n < 256) {
        s->at[s->n] = time_mono();
        s->lines[s->n++] = strdup(line);
    }
    if (s->stop_after && strstr(line, s->stop_after))
        s->stop_now = 1;
}

static void on_metrics(void *u, json_t *epoch)
{
    seen *s = u;
    json_array_append_new(s->metrics, json_deep_copy(epoch));
}

static void on_checkpoint(void *u, const char *tar_gz, int epoch)
{
    seen *s = u;
    if (s->ncp >= 16)
        return;
    snprintf(s->cps[s->ncp], sizeof s->cps[0], "%s/cp-%d.tar.gz", s->dir, s->ncp);
    CHECK_INT(rename(tar_gz, s->cps[s->ncp]), 0);
    s->cp_epochs[s->ncp++] = epoch;
}

static int should_stop(void *u)
{
    return ((seen *)u)->stop_now;
}

static void seen_init(seen *s, const char *dir)
{
    memset(s, 0, sizeof *s);
    s->metrics = json_array();
    snprintf(s->dir, sizeof s->dir, "%s", dir);
}

static void seen_free(seen *s)
{
    for (int i = 0; i < s->n; i++)
        free(s->lines[i]);
    json_decref(s->metrics);
}

static int logged(const seen *s, const char *needle)
{
    for (int i = 0; i < s->n; i++)
        if (strstr(s->lines[i], needle))
            return i + 1;
    return 0;
}

static void dump(const seen *s, const char *what)
{
    fprintf(stderr, "-- log of %s:\n", what);
    for (int i = 0; i < s->n; i++)
        fprintf(stderr, "   %s\n", s->lines[i]);
}

/* A fresh job folder root/<name>/ with code/<script> holding text. */
static void job_make(char *jd, size_t cap, const char *name, const char *script, const char *text)
{
    snprintf(jd, cap, "%s/%s", root, name);
    mkdir(jd, 0755);
    char p[1024];
    snprintf(p, sizeof p, "%s/code", jd);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/code/%s", jd, script);
    write_file(p, text, 0755);
}

static int run(const char *jd, const char *script, int sandbox, seen *s, script_result *res,
               double grace, char *err)
{
    script_opts o = {.job_dir = jd,
                     .script = script,
                     .python = PY,
                     .sandbox = sandbox,
                     .grace_s = grace,
                     .checkpoint_poll_s = 0.2};
    script_hooks h = {.user = s,
                      .on_log = on_log,
                      .on_metrics = on_metrics,
                      .on_checkpoint = on_checkpoint,
                      .should_stop = should_stop};
    memset(res, 0, sizeof *res);
    return script_run(&o, &h, res, err);
}

static void test_logs_and_exit(int sb)
{
    char jd[600], err[ERR_LEN] = "", name[32];
    snprintf(name, sizeof name, "logs-%d", sb);
    job_make(jd, sizeof jd, name, "run.sh",
             "#!/bin/sh\necho one\necho err-line >&2\nsleep 0.6\nprintf 'x%.0s' $(seq 1 1500)\n"
             "echo\necho two\nexit 7\n");
    seen s;
    seen_init(&s, jd);
    script_result res;
    double t0 = time_mono();
    CHECK_INT(run(jd, "run.sh", sb, &s, &res, 0, err), 0);
    double t1 = time_mono();
    int one = logged(&s, "one"), two = logged(&s, "two");
    CHECK(one && two && logged(&s, "err-line"));
    if (one && two) /* "one" came while the script still slept: live, not at the end */
        CHECK(s.at[two - 1] - s.at[one - 1] > 0.4 && t1 - s.at[one - 1] > 0.4);
    int longest = 0;
    for (int i = 0; i < s.n; i++)
        if ((int)strlen(s.lines[i]) > longest)
            longest = (int)strlen(s.lines[i]);
    CHECK_INT(longest, 1000);
    CHECK_INT(res.exit_code, 7);
    CHECK_INT(res.signal, 0);
    CHECK_INT(res.stopped, 0);
    CHECK(strstr(res.tail, "two") != NULL);
    CHECK(t1 - t0 < 10);
    if (check_failures)
        dump(&s, name);
    seen_free(&s);

    /* a script killed by a signal reports the signal, not 128 + N */
    snprintf(name, sizeof name, "sig-%d", sb);
    job_make(jd, sizeof jd, name, "run.sh", "#!/bin/sh\necho bye\nkill -SEGV $$\n");
    seen_init(&s, jd);
    CHECK_INT(run(jd, "run.sh", sb, &s, &res, 0, err), 0);
    CHECK_INT(res.signal, SIGSEGV);
    CHECK_INT(res.exit_code, -1);
    seen_free(&s);
}

static void test_refusals(void)
{
    char jd[600], err[ERR_LEN] = "";
    seen s;
    script_result res;
    job_make(jd, sizeof jd, "refuse", "data.txt", "not a program\n");
    chmod(strcat(strcpy(err, jd), "/code/data.txt"), 0644);
    seen_init(&s, jd);
    CHECK_INT(run(jd, "missing.py", 0, &s, &res, 0, err), -ENOENT);
    CHECK(strstr(err, "missing.py") != NULL);
    CHECK_INT(run(jd, "data.txt", 0, &s, &res, 0, err), -EACCES);
    CHECK(strstr(err, "chmod +x") != NULL);
    CHECK_INT(run(jd, "../refuse/code/data.txt", 0, &s, &res, 0, err), -EINVAL);
    CHECK_INT(run(jd, "/etc/passwd", 0, &s, &res, 0, err), -EINVAL);
    seen_free(&s);
}

static void test_metrics(int sb)
{
    char jd[600], err[ERR_LEN] = "", name[32];
    snprintf(name, sizeof name, "metrics-%d", sb);
    job_make(jd, sizeof jd, name, "train.py",
             "import os\n"
             "with open(os.environ['TRAINYARD_METRICS'], 'a') as f:\n"
             "    f.write('{\"epoch\": 1, \"loss\": 0.5, \"val/acc\": 0.9}\\n')\n"
             "    f.write('not json\\n')\n"
             "    f.write('{\"epoch\": 0, \"loss\": 1}\\n')\n"
             "    f.write('{\"epoch\": 2, \"bad name\": 1}\\n')\n"
             "    f.write('{\"epoch\": 2, \"x\": \"text\"}\\n')\n"
             "    f.write('[1, 2]\\n')\n"
             "    f.write('{\"epoch\": 2, \"loss\": null, \"lr\": 0.001}')\n" /* no newline */
             "print('done')\n");
    seen s;
    seen_init(&s, jd);
    script_result res;
    CHECK_INT(run(jd, "train.py", sb, &s, &res, 0, err), 0);
    CHECK_INT(res.exit_code, 0);
    CHECK_INT(json_array_size(s.metrics), 2);
    json_t *m0 = json_array_get(s.metrics, 0), *m1 = json_array_get(s.metrics, 1);
    CHECK_INT(json_integer_value(json_object_get(m0, "epoch")), 1);
    CHECK_NEAR(json_real_value(json_object_get(m0, "val/acc")), 0.9, 1e-12);
    CHECK_INT(json_integer_value(json_object_get(m1, "epoch")), 2);
    CHECK(json_is_null(json_object_get(m1, "loss")));
    CHECK(logged(&s, "metrics line 2 ignored: not JSON"));
    CHECK(logged(&s, "metrics line 3 ignored: \"epoch\" must be an integer >= 1"));
    CHECK(logged(&s, "metrics line 4 ignored: the name \"bad name\" is not a metric name"));
    CHECK(logged(&s, "metrics line 5 ignored: the value of \"x\" is not a number or null"));
    CHECK(logged(&s, "metrics line 6 ignored: not a JSON object"));
    if (check_failures)
        dump(&s, name);
    seen_free(&s);
}

/* The file's text in a buffer valid until the next call, or NULL. */
static const char *slurp(const char *path)
{
    static char buf[4096];
    size_t n;
    char *b = read_all(path, &n);
    if (!b)
        return NULL;
    snprintf(buf, sizeof buf, "%s", b);
    free(b);
    return buf;
}

static void test_checkpoints(int sb)
{
    char jd[600], err[ERR_LEN] = "", name[32], p[1024];
    snprintf(name, sizeof name, "ckpt-%d", sb);
    job_make(jd, sizeof jd, name, "train.py",
             "import os, time, json\n"
             "cp = os.environ['TRAINYARD_CHECKPOINT_DIR']\n"
             "for e in (1, 2):\n"
             "    with open(os.environ['TRAINYARD_METRICS'], 'a') as f:\n"
             "        f.write(json.dumps({'epoch': e, 'loss': 1.0 / e}) + '\\n')\n"
             "    with open(os.path.join(cp, 'state.txt'), 'w') as f:\n"
             "        f.write('epoch %d' % e)\n"
             "    time.sleep(1.0)\n"
             "with open(os.path.join(cp, 'last.txt'), 'w') as f:\n"
             "    f.write('the end')\n");
    /* a resumed checkpoint, there from the start: never handed back as it is */
    snprintf(p, sizeof p, "%s/checkpoint", jd);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/checkpoint/resumed.txt", jd);
    write_file(p, "old", 0644);
    seen s;
    seen_init(&s, jd);
    script_result res;
    CHECK_INT(run(jd, "train.py", sb, &s, &res, 0, err), 0);
    CHECK_INT(res.exit_code, 0);
    CHECK(s.ncp >= 3);
    /* the first snapshot: epoch 1's state, with epoch 1; the last: after the exit */
    char out[1024];
    bundle_info info;
    if (s.ncp >= 3) {
        size_t len;
        for (int i = 0; i < s.ncp; i++) {
            FILE *f = fopen(s.cps[i], "rb");
            fseek(f, 0, SEEK_END);
            len = (size_t)ftell(f);
            fseek(f, 0, SEEK_SET);
            char *gz = malloc(len);
            CHECK(fread(gz, 1, len, f) == len);
            fclose(f);
            snprintf(out, sizeof out, "%s/unpacked-%d", jd, i);
            CHECK_INT(bundle_unpack(gz, len, out, NULL, &info, err), 0);
            free(gz);
        }
        snprintf(p, sizeof p, "%s/unpacked-0/state.txt", jd);
        const char *t = slurp(p);
        CHECK(t && !strcmp(t, "epoch 1"));
        CHECK_INT(s.cp_epochs[0], 1);
        snprintf(p, sizeof p, "%s/unpacked-0/resumed.txt", jd);
        CHECK(slurp(p) != NULL);
        snprintf(p, sizeof p, "%s/unpacked-%d/last.txt", jd, s.ncp - 1);
        t = slurp(p);
        CHECK(t && !strcmp(t, "the end"));
        CHECK_INT(s.cp_epochs[s.ncp - 1], 2);
    }
    /* nothing left behind in the job folder */
    snprintf(p, sizeof p, "%s/.trainyard/checkpoint-1.tar.gz", jd);
    CHECK(access(p, F_OK) < 0);
    if (check_failures)
        dump(&s, name);
    seen_free(&s);

    /* an untouched resumed checkpoint: no snapshot at all */
    snprintf(name, sizeof name, "ckpt-same-%d", sb);
    job_make(jd, sizeof jd, name, "run.sh", "#!/bin/sh\nsleep 0.5\n");
    snprintf(p, sizeof p, "%s/checkpoint", jd);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/checkpoint/resumed.txt", jd);
    write_file(p, "old", 0644);
    seen_init(&s, jd);
    CHECK_INT(run(jd, "run.sh", sb, &s, &res, 0, err), 0);
    CHECK_INT(s.ncp, 0);
    seen_free(&s);
}

static void test_stop(int sb)
{
    char jd[600], err[ERR_LEN] = "", name[32], p[1024];
    /* a SIGTERM handler runs within the grace and can write a file */
    snprintf(name, sizeof name, "term-%d", sb);
    job_make(jd, sizeof jd, name, "train.py",
             "import os, signal, sys, time\n"
             "def bye(sig, frame):\n"
             "    time.sleep(0.3)\n"
             "    with open(os.path.join(os.environ['TRAINYARD_OUTPUT_DIR'], 'term.txt'), 'w') "
             "as f:\n"
             "        f.write('got %d' % sig)\n"
             "    sys.exit(0)\n"
             "signal.signal(signal.SIGTERM, bye)\n"
             "print('ready', flush=True)\n"
             "time.sleep(60)\n");
    seen s;
    seen_init(&s, jd);
    s.stop_after = "ready";
    script_result res;
    double t0 = time_mono();
    CHECK_INT(run(jd, "train.py", sb, &s, &res, 5.0, err), 0);
    double took = time_mono() - t0;
    CHECK_INT(res.stopped, 1);
    CHECK_INT(res.exit_code, 0);
    CHECK_INT(res.signal, 0);
    CHECK(took < 4.0);
    snprintf(p, sizeof p, "%s/output/term.txt", jd);
    const char *t = slurp(p);
    CHECK(t && !strcmp(t, "got 15"));
    if (check_failures)
        dump(&s, name);
    seen_free(&s);

    /* one that ignores SIGTERM is killed when the grace is over */
    snprintf(name, sizeof name, "kill-%d", sb);
    job_make(jd, sizeof jd, name, "run.sh",
             "#!/bin/sh\ntrap '' TERM\necho ready\nwhile :; do sleep 0.1; done\n");
    seen_init(&s, jd);
    s.stop_after = "ready";
    t0 = time_mono();
    CHECK_INT(run(jd, "run.sh", sb, &s, &res, 0.5, err), 0);
    took = time_mono() - t0;
    CHECK_INT(res.stopped, 1);
    CHECK_INT(res.signal, SIGKILL);
    CHECK(took >= 0.5 && took < 4.0);
    seen_free(&s);
}

/* A process whose command line is exactly argv (NUL-separated), or 0. */
static pid_t find_proc(const char *cmdline, size_t len)
{
    pid_t found = 0;
    FILE *ls = popen("ls /proc", "r");
    char name[64];
    while (ls && !found && fgets(name, sizeof name, ls)) {
        int pid = atoi(name);
        if (pid <= 0)
            continue;
        char p[64], buf[256];
        snprintf(p, sizeof p, "/proc/%d/cmdline", pid);
        int fd = open(p, O_RDONLY);
        if (fd < 0)
            continue;
        ssize_t k = read(fd, buf, sizeof buf);
        close(fd);
        if (k == (ssize_t)len && !memcmp(buf, cmdline, len))
            found = pid;
    }
    if (ls)
        pclose(ls);
    return found;
}

static void test_parent_dies(int sb)
{
    char jd[600], err[ERR_LEN] = "", name[32];
    snprintf(name, sizeof name, "orphan-%d", sb);
    char secs[32];
    snprintf(secs, sizeof secs, "%d.%d", 300 + sb, (int)getpid());
    char text[200];
    snprintf(text, sizeof text, "#!/bin/sh\nexec sleep %s\n", secs);
    job_make(jd, sizeof jd, name, "run.sh", text);
    char cmd[64];
    size_t len = (size_t)snprintf(cmd, sizeof cmd, "sleep%c%s", 0, secs) + 1;
    pid_t mid = fork();
    if (mid == 0) {
        seen s;
        seen_init(&s, jd);
        script_result res;
        run(jd, "run.sh", sb, &s, &res, 0, err);
        _exit(0);
    }
    pid_t child = 0;
    for (int i = 0; i < 100 && !child; i++) {
        usleep(50000);
        child = find_proc(cmd, len);
    }
    CHECK(child > 0);
    kill(mid, SIGKILL);
    waitpid(mid, NULL, 0);
    pid_t still = child;
    for (int i = 0; i < 100 && still; i++) {
        usleep(50000);
        still = find_proc(cmd, len);
    }
    CHECK_INT(still, 0);
    if (still)
        kill(still, SIGKILL);
}

static void test_sandbox_walls(void)
{
    char jd[600], err[ERR_LEN] = "", p[1024];
    snprintf(p, sizeof p, "%s/secret.txt", root);
    write_file(p, "the-worker-secret", 0644);
    char text[2048];
    snprintf(text, sizeof text,
             "#!/bin/sh\n"
             "cat %s && echo READ-OUTSIDE\n"
             "cat /etc/shadow && echo READ-SHADOW\n"
             "touch /usr/x && echo WROTE-USR\n"
             "touch /etc/x && echo WROTE-ETC\n"
             "touch /x && echo WROTE-ROOT\n"
             "touch %s/x && echo WROTE-OUTSIDE\n"
             "for d in /home /root /work /var /srv /opt /mnt; do [ -e $d ] && echo SEES-$d; done\n"
             "touch /job/output/ok && echo WROTE-JOB\n"
             "touch /tmp/ok && echo WROTE-TMP\n"
             "ls -A /job/.trainyard\n"
             "echo pwd=$(pwd)\n",
             p, root);
    job_make(jd, sizeof jd, "walls", "run.sh", text);
    snprintf(p, sizeof p, "%s/.trainyard", jd);
    mkdir(p, 0700);
    snprintf(p, sizeof p, "%s/.trainyard/worker-only.txt", jd);
    write_file(p, "private", 0600);
    seen s;
    seen_init(&s, jd);
    script_result res;
    CHECK_INT(run(jd, "run.sh", 1, &s, &res, 0, err), 0);
    CHECK(!logged(&s, "the-worker-secret") && !logged(&s, "READ-OUTSIDE"));
    CHECK(!logged(&s, "READ-SHADOW"));
    CHECK(!logged(&s, "worker-only.txt"));
    CHECK(!logged(&s, "WROTE-USR") && !logged(&s, "WROTE-ETC") && !logged(&s, "WROTE-ROOT"));
    CHECK(!logged(&s, "WROTE-OUTSIDE") && !logged(&s, "SEES-"));
    CHECK(logged(&s, "WROTE-JOB") && logged(&s, "WROTE-TMP") && logged(&s, "pwd=/job/code"));
    snprintf(p, sizeof p, "%s/output/ok", jd);
    CHECK(access(p, F_OK) == 0);
    snprintf(p, sizeof p, "%s/tmp/ok", jd);
    CHECK(access(p, F_OK) == 0);
    if (check_failures)
        dump(&s, "walls");
    seen_free(&s);
}

static void test_environment(int sb)
{
    char jd[600], err[ERR_LEN] = "", name[32], p[1024];
    snprintf(name, sizeof name, "env-%d", sb);
    job_make(jd, sizeof jd, name, "train.py",
             "import os, trainyard\n"
             "for k in sorted(os.environ):\n"
             "    print('%s=%s' % (k, os.environ[k]))\n"
             "print('lib says', trainyard.hello())\n");
    snprintf(p, sizeof p, "%s/lib", jd);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/lib/trainyard", jd);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/lib/trainyard/__init__.py", jd);
    write_file(p, "def hello():\n    return 'hi-from-lib'\n", 0644);
    snprintf(p, sizeof p, "%s/data", jd);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/data/set.csv", jd);
    write_file(p, "a,b\n1,2\n", 0644);
    seen s;
    seen_init(&s, jd);
    script_result res;
    const char *extra[] = {"TRAINYARD_JOB_ID=job-42", "TRAINYARD_HYPERPARAMETERS={\"lr\": 0.1}",
                           NULL};
    script_opts o = {
        .job_dir = jd, .script = "train.py", .python = PY, .sandbox = sb, .env = extra};
    script_hooks h = {.user = &s, .on_log = on_log};
    CHECK_INT(script_run(&o, &h, &res, err), 0);
    CHECK_INT(res.exit_code, 0);
    CHECK(!logged(&s, "TRAINYARD_TOKEN") && !logged(&s, "tok-do-not-leak"));
    CHECK(logged(&s, "TRAINYARD_JOB_ID=job-42"));
    CHECK(logged(&s, "TRAINYARD_HYPERPARAMETERS={\"lr\": 0.1}"));
    CHECK(logged(&s, "LANG=C.UTF-8") && logged(&s, "PYTHONUNBUFFERED=1"));
    CHECK(logged(&s, "lib says hi-from-lib"));
    const char *base = sb ? "/job" : jd;
    char want[1024];
    snprintf(want, sizeof want, "TRAINYARD_DATASET=%s/data/set.csv", base);
    CHECK(logged(&s, want));
    snprintf(want, sizeof want, "TRAINYARD_OUTPUT_DIR=%s/output", base);
    CHECK(logged(&s, want));
    snprintf(want, sizeof want, "HOME=%s/home", base);
    CHECK(logged(&s, want));
    snprintf(want, sizeof want, "PYTHONPATH=%s/lib", base);
    CHECK(logged(&s, want));
    CHECK(!logged(&s, "HOSTNAME=") && !logged(&s, "USER="));
    if (check_failures)
        dump(&s, name);
    seen_free(&s);
}

/* One sandboxed run on a thread of its own (script_run blocks). */
typedef struct bg_run {
    script_opts o;
    seen s;
    script_result res;
    int rc;
    char err[ERR_LEN];
} bg_run;

static void *bg_main(void *arg)
{
    bg_run *b = arg;
    script_hooks h = {.user = &b->s, .on_log = on_log};
    b->rc = script_run(&b->o, &h, &b->res, b->err);
    return NULL;
}

/* Two sandboxes joining one namespace (script/netns.h) reach each other on 127.0.0.1, see only
 * its loopback, and reach nothing of the machine's: a server listening here on 127.0.0.1 is out
 * of their reach. Without the namespace a sandbox is alone. */
static void test_shared_netns(void)
{
    char jd_a[600], jd_b[600], jd_c[600], err[ERR_LEN] = "", text[2048];
    int outside = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = 0};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof sa;
    CHECK(bind(outside, (struct sockaddr *)&sa, sizeof sa) == 0 && listen(outside, 4) == 0 &&
          getsockname(outside, (struct sockaddr *)&sa, &len) == 0);
    int outside_port = ntohs(sa.sin_port);
    job_make(jd_a, sizeof jd_a, "ns-a", "a.py",
             "import socket\n"
             "s = socket.socket()\n"
             "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
             "s.bind(('127.0.0.1', 29555)); s.listen(1); s.settimeout(20)\n"
             "c, _ = s.accept()\n"
             "print('A got', c.recv(100).decode())\n");
    snprintf(text, sizeof text,
             "import socket, time\n"
             "print('links', ' '.join(l.split(':')[0].strip() for l in "
             "open('/proc/net/dev').readlines()[2:]))\n"
             "for _ in range(200):\n"
             "    try:\n"
             "        c = socket.create_connection(('127.0.0.1', 29555), timeout=1); break\n"
             "    except OSError:\n"
             "        time.sleep(0.05)\n"
             "c.sendall(b'hello-from-b')\n"
             "try:\n"
             "    socket.create_connection(('127.0.0.1', %d), timeout=2)\n"
             "    print('OUTSIDE-REACHED')\n"
             "except OSError:\n"
             "    print('outside unreachable')\n",
             outside_port);
    job_make(jd_b, sizeof jd_b, "ns-b", "b.py", text);
    /* alone: nothing listens on its own loopback */
    job_make(jd_c, sizeof jd_c, "ns-c", "c.py",
             "import socket\n"
             "try:\n"
             "    socket.create_connection(('127.0.0.1', 29555), timeout=1); print('C-REACHED')\n"
             "except OSError:\n"
             "    print('C alone')\n");
    pid_t holder = 0;
    CHECK_INT(netns_start(&holder, err), 0);
    if (holder <= 0) {
        fprintf(stderr, "netns_start: %s\n", err);
        close(outside);
        return;
    }
    bg_run a = {
        .o = {
            .job_dir = jd_a, .script = "a.py", .python = PY, .sandbox = 1, .netns_holder = holder}};
    seen_init(&a.s, jd_a);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, bg_main, &a) == 0);
    bg_run b = {
        .o = {
            .job_dir = jd_b, .script = "b.py", .python = PY, .sandbox = 1, .netns_holder = holder}};
    seen_init(&b.s, jd_b);
    bg_main(&b);
    pthread_join(t, NULL);
    bg_run c = {.o = {.job_dir = jd_c, .script = "c.py", .python = PY, .sandbox = 1}};
    seen_init(&c.s, jd_c);
    bg_main(&c);
    netns_stop(holder);
    close(outside);
    CHECK_INT(a.rc, 0);
    CHECK_INT(b.rc, 0);
    CHECK_INT(a.res.exit_code, 0);
    CHECK_INT(b.res.exit_code, 0);
    CHECK(logged(&a.s, "A got hello-from-b"));
    CHECK(logged(&b.s, "links lo") && !logged(&b.s, "links lo "));
    CHECK(logged(&b.s, "outside unreachable") && !logged(&b.s, "OUTSIDE-REACHED"));
    CHECK(logged(&c.s, "C alone"));
    if (check_failures) {
        dump(&a.s, "ns-a");
        dump(&b.s, "ns-b");
        dump(&c.s, "ns-c");
    }
    seen_free(&a.s);
    seen_free(&b.s);
    seen_free(&c.s);

    /* a namespace needs the sandbox: refused without it */
    script_opts o = {
        .job_dir = jd_c, .script = "c.py", .python = PY, .sandbox = 0, .netns_holder = 1};
    script_result res;
    CHECK(script_run(&o, NULL, &res, err) == -EINVAL && strstr(err, "sandbox"));
}

/* A wrapper as the interpreter (a pyenv shim, say), outside what the sandbox shows: the run
 * uses the sys.executable it answers. */
static void test_python_wrapper(int sb)
{
    char jd[600], err[ERR_LEN] = "", name[32], wrapper[700];
    snprintf(name, sizeof name, "wrap-%d", sb);
    job_make(jd, sizeof jd, name, "train.py", "import sys\nprint('ran by', sys.executable)\n");
    snprintf(wrapper, sizeof wrapper, "%s/py-wrapper", root);
    write_file(wrapper, "#!/bin/sh\nexec " PY " \"$@\"\n", 0755);
    seen s;
    seen_init(&s, jd);
    script_result res;
    script_opts o = {.job_dir = jd, .script = "train.py", .python = wrapper, .sandbox = sb};
    script_hooks h = {.user = &s, .on_log = on_log};
    CHECK_INT(script_run(&o, &h, &res, err), 0);
    CHECK_INT(res.exit_code, 0);
    CHECK(logged(&s, "ran by /usr/bin/python3"));
    if (check_failures)
        dump(&s, name);
    seen_free(&s);
}

static void test_memory(int sb)
{
    char jd[600], err[ERR_LEN] = "", name[32];
    snprintf(name, sizeof name, "mem-%d", sb);
    job_make(jd, sizeof jd, name, "train.py",
             "try:\n    b = bytearray(600 * 1024 * 1024)\n    print('allocated')\n"
             "except MemoryError:\n    print('refused')\n");
    seen s;
    seen_init(&s, jd);
    script_result res;
    script_opts o = {.job_dir = jd,
                     .script = "train.py",
                     .python = PY,
                     .sandbox = sb,
                     .memory_bytes = 300ull << 20};
    script_hooks h = {.user = &s, .on_log = on_log};
    CHECK_INT(script_run(&o, &h, &res, err), 0);
    CHECK(logged(&s, "refused") && !logged(&s, "allocated"));
    if (check_failures)
        dump(&s, name);
    seen_free(&s);
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "__script-exec"))
        return sandbox_exec_main(argc - 1, argv + 1);
    setenv("TRAINYARD_TOKEN", "tok-do-not-leak", 1);
    char cwd[256];
    if (!getcwd(cwd, sizeof cwd))
        return 1;
    snprintf(root, sizeof root, "%s/script-run-XXXXXX", cwd);
    if (!mkdtemp(root))
        return 1;
    have_python = access(PY, X_OK) == 0;
    char why[ERR_LEN] = "";
    int sandbox = script_sandbox_available(why);
    if (!sandbox)
        printf("SKIP the sandboxed cases: %s\n", why);
    if (!have_python)
        printf("SKIP the python cases: %s is missing\n", PY);

    test_refusals();
    for (int sb = 0; sb <= sandbox; sb++) {
        test_logs_and_exit(sb);
        test_parent_dies(sb);
        if (have_python) {
            test_stop(sb);
            test_metrics(sb);
            test_checkpoints(sb);
            test_environment(sb);
            test_memory(sb);
            test_python_wrapper(sb);
        }
    }
    if (sandbox)
        test_sandbox_walls();
    if (sandbox && have_python)
        test_shared_netns();
    int rc = check_exit();
    if (rc == 0)
        rm_tree(root);
    return rc;
}
