/* sandbox: bubblewrap's argv and the launcher inside it (see sandbox.h for what the sandbox
 * shows and why the launcher exists).
 *
 * The /etc list is short on purpose: what the dynamic loader, TLS, name resolution, user names,
 * OpenCL ICDs and Python's Debian configuration read, and nothing with secrets in it. Entries
 * that do not exist are skipped (--ro-bind-try); paths the operator names (ro_binds) must exist,
 * so a typo is an error at start, not a script that cannot find its files. */
#include "script/sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "script/run.h"
#include "util/array.h"
#include "util/err.h"
#include "util/exepath.h"

extern char **environ;

static const char *const etc_entries[] = {
    "ld.so.cache", "ld.so.conf", "ld.so.conf.d",  "alternatives", "ssl",       "ca-certificates",
    "resolv.conf", "hosts",      "nsswitch.conf", "host.conf",    "localtime", "passwd",
    "group",       "OpenCL",     "mime.types",    "gai.conf",     "timezone",  NULL,
};

/* The top-level folders that merged-/usr systems make symlinks into /usr. */
static const char *const usr_links[] = {"/bin",   "/sbin",   "/lib", "/lib32",
                                        "/lib64", "/libx32", NULL};

int sandbox_args_add(sandbox_args *a, const char *s)
{
    if (ARRAY_GROW(a->v, a->cap, a->n + 2, ARRAY_NO_MAX) < 0)
        return -ENOMEM;
    char *c = strdup(s);
    if (!c)
        return -ENOMEM;
    a->v[a->n++] = c;
    a->v[a->n] = NULL;
    return 0;
}

void sandbox_args_free(sandbox_args *a)
{
    for (size_t i = 0; i < a->n; i++)
        free(a->v[i]);
    free(a->v);
    a->v = NULL;
    a->n = a->cap = 0;
}

static int add3(sandbox_args *a, const char *x, const char *y, const char *z)
{
    int rc = sandbox_args_add(a, x);
    if (rc == 0 && y)
        rc = sandbox_args_add(a, y);
    if (rc == 0 && z)
        rc = sandbox_args_add(a, z);
    return rc;
}

int sandbox_bwrap_path(char *out, size_t cap, char *err)
{
    if (exepath_which("bwrap", out, cap) == 0)
        return 0;
    return err_set(err, -ENOENT,
                   "bubblewrap (bwrap) is not on PATH: install it (Debian: apt-get install "
                   "bubblewrap) or run scripts without a sandbox (--no-sandbox)");
}

static int bind_list(sandbox_args *a, const char *opt, const char *const *paths, char *err)
{
    for (size_t i = 0; paths && paths[i]; i++) {
        if (access(paths[i], F_OK) < 0)
            return err_set(err, -ENOENT, "cannot bind %s into the sandbox: %s", paths[i],
                           strerror(errno));
        int rc = add3(a, opt, paths[i], paths[i]);
        if (rc < 0)
            return err_set(err, rc, "out of memory");
    }
    return 0;
}

int sandbox_args_bwrap(const sandbox_cfg *c, sandbox_args *a, char *err)
{
    char bwrap[PATH_MAX];
    int rc = sandbox_bwrap_path(bwrap, sizeof bwrap, err);
    if (rc < 0)
        return rc;
    rc = add3(a, bwrap, "--die-with-parent", "--unshare-all");
    if (rc == 0 && c->network)
        rc = sandbox_args_add(a, "--share-net");
    if (rc == 0)
        rc = add3(a, "--ro-bind", "/usr", "/usr");
    for (size_t i = 0; rc == 0 && usr_links[i]; i++) {
        struct stat st;
        if (lstat(usr_links[i], &st) < 0)
            continue;
        if (S_ISLNK(st.st_mode)) {
            char t[PATH_MAX];
            ssize_t k = readlink(usr_links[i], t, sizeof t - 1);
            if (k <= 0)
                continue;
            t[k] = '\0';
            rc = add3(a, "--symlink", t, usr_links[i]);
        } else if (S_ISDIR(st.st_mode)) {
            rc = add3(a, "--ro-bind", usr_links[i], usr_links[i]);
        }
    }
    char path[PATH_MAX];
    for (size_t i = 0; rc == 0 && etc_entries[i]; i++) {
        snprintf(path, sizeof path, "/etc/%s", etc_entries[i]);
        rc = add3(a, "--ro-bind-try", path, path);
    }
    glob_t g;
    memset(&g, 0, sizeof g);
    if (rc == 0 && glob("/etc/python3*", 0, NULL, &g) == 0)
        for (size_t i = 0; rc == 0 && i < g.gl_pathc; i++)
            rc = add3(a, "--ro-bind-try", g.gl_pathv[i], g.gl_pathv[i]);
    globfree(&g);
    if (rc == 0)
        rc = add3(a, "--proc", "/proc", NULL);
    if (rc == 0)
        rc = add3(a, "--dev", "/dev", NULL);
    memset(&g, 0, sizeof g);
    if (rc == 0 && glob("/dev/nvidia*", 0, NULL, &g) == 0)
        for (size_t i = 0; rc == 0 && i < g.gl_pathc; i++)
            rc = add3(a, "--dev-bind-try", g.gl_pathv[i], g.gl_pathv[i]);
    globfree(&g);
    if (rc == 0)
        rc = add3(a, "--dev-bind-try", "/dev/dri", "/dev/dri");
    if (rc == 0)
        rc = add3(a, "--dev-bind-try", "/dev/kfd", "/dev/kfd");
    if (rc == 0)
        rc = add3(a, "--ro-bind", "/sys", "/sys");
    /* /job and /tmp before the named paths, so that a named path under /tmp (a venv, this
     * binary) is bound over the job's tmp/ rather than hidden by it */
    if (rc == 0 && c->job_dir) {
        snprintf(path, sizeof path, "%s/tmp", c->job_dir);
        rc = add3(a, "--bind", c->job_dir, "/job");
        if (rc == 0)
            rc = add3(a, "--bind", path, "/tmp");
    } else if (rc == 0) {
        rc = add3(a, "--tmpfs", "/tmp", NULL);
    }
    if (rc < 0)
        return err_set(err, rc, "out of memory");

    rc = bind_list(a, "--ro-bind", c->ro_paths, err);
    if (rc < 0)
        return rc;
    if (c->ro_binds && *c->ro_binds) {
        const char *p = c->ro_binds;
        while (*p) {
            const char *e = strchr(p, ',');
            size_t len = e ? (size_t)(e - p) : strlen(p);
            if (len >= sizeof path)
                return err_set(err, -ENAMETOOLONG, "a read-only bind path is too long");
            memcpy(path, p, len);
            path[len] = '\0';
            if (len > 0) {
                if (path[0] != '/')
                    return err_set(err, -EINVAL, "read-only bind \"%s\" is not an absolute path",
                                   path);
                const char *one[] = {path, NULL};
                rc = bind_list(a, "--ro-bind", one, err);
                if (rc < 0)
                    return rc;
            }
            p += len;
            if (*p == ',')
                p++;
        }
    }
    rc = bind_list(a, "--bind", c->rw_paths, err);
    if (rc < 0)
        return rc;
    if (c->launcher && add3(a, "--ro-bind", c->launcher, SANDBOX_LAUNCHER) < 0)
        return err_set(err, -ENOMEM, "out of memory");
    for (size_t i = 0; c->hidden && c->hidden[i]; i++)
        if (add3(a, "--tmpfs", c->hidden[i], NULL) < 0)
            return err_set(err, -ENOMEM, "out of memory");
    if (rc == 0) /* the root tmpfs bwrap builds on: no writes outside what is bound */
        rc = add3(a, "--remount-ro", "/", NULL);
    if (rc == 0 && c->chdir)
        rc = add3(a, "--chdir", c->chdir, NULL);
    if (rc < 0)
        return err_set(err, rc, "out of memory");
    return 0;
}

int sandbox_spawn(char *const argv[], char *const envp[], const char *cwd, int both, pid_t *pid,
                  int *fd, char *err)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return err_set(err, -errno, "pipe: %s", strerror(errno));
    pid_t parent = getpid();
    pid_t child = fork();
    if (child < 0) {
        close(p[0]);
        close(p[1]);
        return err_set(err, -errno, "fork: %s", strerror(errno));
    }
    if (child == 0) { /* async-signal-safe calls only */
        setsid();
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        signal(SIGPIPE, SIG_DFL);
        int nul = open("/dev/null", O_RDONLY);
        if (nul < 0 || dup2(nul, 0) < 0 || dup2(p[1], 1) < 0 || (both && dup2(p[1], 2) < 0))
            _exit(127);
        close_range(3, ~0u, 0);
        if (cwd && chdir(cwd) < 0)
            _exit(127);
        umask(022);
        execve(argv[0], argv, envp ? envp : environ);
        _exit(127);
    }
    close(p[1]);
    *pid = child;
    *fd = p[0];
    return 0;
}

int sandbox_wait(pid_t pid)
{
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -errno;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Runs argv outside any sandbox and returns its stdout (up to cap - 1 bytes). */
static int capture(char *const argv[], char *out, size_t cap, char *err)
{
    pid_t pid;
    int fd;
    int rc = sandbox_spawn(argv, NULL, NULL, 0, &pid, &fd, err);
    if (rc < 0)
        return rc;
    size_t n = 0;
    ssize_t k;
    while (n < cap - 1 && ((k = read(fd, out + n, cap - 1 - n)) > 0 || (k < 0 && errno == EINTR)))
        if (k > 0)
            n += (size_t)k;
    out[n] = '\0';
    close(fd);
    if (sandbox_wait(pid) != 0)
        return err_set(err, -ENOEXEC, "%s could not be run to find its prefix", argv[0]);
    return 0;
}

int sandbox_python_prefixes(const char *python, sandbox_args *ro, char *exe, size_t cap, char *err)
{
    char *argv[] = {(char *)python, "-c",
                    "import sys; print(sys.executable); print(sys.prefix); "
                    "print(sys.base_prefix); print(sys.exec_prefix); print(sys.base_exec_prefix)",
                    NULL};
    char out[5 * PATH_MAX];
    int rc = capture(argv, out, sizeof out, err);
    if (rc < 0)
        return rc;
    char *save = NULL, *first = strtok_r(out, "\n", &save);
    if (!first || first[0] != '/')
        return err_set(err, -ENOEXEC, "%s did not tell its sys.executable", python);
    for (char *line = strtok_r(NULL, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (line[0] != '/' || !strcmp(line, "/usr") || !strncmp(line, "/usr/", 5) ||
            !strcmp(line, "/"))
            continue;
        int dup = 0;
        for (size_t i = 0; i < ro->n; i++)
            dup |= !strcmp(ro->v[i], line);
        if (!dup && sandbox_args_add(ro, line) < 0)
            return err_set(err, -ENOMEM, "out of memory");
    }
    if (exe) {
        if (strlen(first) >= cap)
            return err_set(err, -ENAMETOOLONG, "the interpreter's path is too long");
        memcpy(exe, first, strlen(first) + 1);
    }
    return 0;
}

int sandbox_python_executable(const char *python, char *out, size_t cap, char *err)
{
    char *argv[] = {(char *)python, "-c", "import sys; print(sys.executable)", NULL};
    char got[PATH_MAX + 2];
    int rc = capture(argv, got, sizeof got, err);
    if (rc < 0)
        return rc;
    got[strcspn(got, "\n")] = '\0';
    if (got[0] != '/' || strlen(got) >= cap)
        return err_set(err, -ENOEXEC, "%s does not say where its executable is", python);
    snprintf(out, cap, "%s", got);
    return 0;
}

int sandbox_exec_main(int argc, char **argv)
{
    if (argc < 5 || strcmp(argv[3], "--") != 0) {
        fprintf(stderr,
                "usage: trainyard __script-exec FD DATA_LIMIT -- PROGRAM [ARGS...] (internal)\n");
        return 2;
    }
    int fd = atoi(argv[1]);
    unsigned long long limit = strtoull(argv[2], NULL, 10);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "trainyard: cannot start the script: %s\n", strerror(errno));
        _exit(127);
    }
    if (pid == 0) {
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        close(fd);
        struct rlimit rl = {.rlim_cur = limit, .rlim_max = limit};
        if (limit && setrlimit(RLIMIT_DATA, &rl) < 0) {
            fprintf(stderr, "trainyard: cannot limit the script's memory: %s\n", strerror(errno));
            _exit(127);
        }
        execv(argv[4], argv + 4);
        fprintf(stderr, "trainyard: cannot run %s: %s\n", argv[4], strerror(errno));
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            _exit(127);
    if (WIFSIGNALED(st)) {
        dprintf(fd, "signal %d\n", WTERMSIG(st));
        _exit(128 + WTERMSIG(st));
    }
    dprintf(fd, "exit %d\n", WEXITSTATUS(st));
    _exit(WEXITSTATUS(st)); /* not exit(): nothing of this process's own should run at its end */
}

int script_sandbox_available(char *err)
{
    static int known = -1;
    static char why[ERR_LEN];
    if (known >= 0) {
        if (!known)
            err_set(err, -ENOSYS, "%s", why);
        return known;
    }
    sandbox_args a = {0};
    sandbox_cfg c = {0};
    int rc = sandbox_args_bwrap(&c, &a, why);
    if (rc == 0)
        rc = add3(&a, "--", "/usr/bin/true", NULL);
    if (rc < 0) {
        sandbox_args_free(&a);
        known = 0;
        err_set(err, -ENOSYS, "%s", why);
        return 0;
    }
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0) {
        sandbox_args_free(&a);
        return err_set(err, -errno, "pipe: %s", strerror(errno)), 0;
    }
    pid_t pid = fork();
    if (pid == 0) {
        dup2(p[1], 2);
        int devnull = open("/dev/null", O_RDWR);
        if (devnull >= 0) {
            dup2(devnull, 0);
            dup2(devnull, 1);
        }
        execv(a.v[0], a.v);
        _exit(127);
    }
    close(p[1]);
    char out[400] = "";
    size_t n = 0;
    ssize_t k;
    while (pid > 0 && n < sizeof out - 1 && (k = read(p[0], out + n, sizeof out - 1 - n)) > 0)
        n += (size_t)k;
    out[n] = '\0';
    close(p[0]);
    int st = 0;
    while (pid > 0 && waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    sandbox_args_free(&a);
    known = pid > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0;
    if (!known) {
        char *nl = strchr(out, '\n');
        if (nl)
            *nl = '\0';
        snprintf(why, sizeof why,
                 "bubblewrap cannot make a sandbox here (%.200s); run scripts "
                 "without one with --no-sandbox only on a machine you trust the scripts with",
                 out[0]    ? out
                 : pid < 0 ? "fork failed"
                           : "bwrap failed");
        err_set(err, -ENOSYS, "%s", why);
    }
    return known;
}
