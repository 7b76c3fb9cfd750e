/* venv: a script job's requirements.txt installed into a venv, made once and cached.
 *
 * Layout: cache_dir/<key>/ is a venv (`python -m venv --system-site-packages`, then
 * `<venv>/bin/python -m pip install -r requirements.txt`), complete when it holds the marker
 * file .trainyard-complete; cache_dir/<key>.lock is flock'd around the look and the build, so
 * concurrent workers build one venv once and the others wait, then use it. key: the first 32 hex
 * digits of SHA-256("<sha256 of the file>\n<the interpreter's real path>"). venvs hold absolute
 * paths, so the venv is built in place (under the lock) and removed whole when a step fails.
 *
 * Sandboxed (sandbox = 1), both steps run in bubblewrap with the network on, the venv folder the
 * only writable path besides a private /tmp, and the code folder read-only (pip resolves the
 * relative paths in the file from it: it is the working folder). The environment is built from
 * nothing but PATH, LANG, HOME (/tmp), pip's no-cache and no-version-check switches, and the
 * worker's proxy and PIP_* index settings, so an operator's mirror reaches pip. */
#include "script/venv.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "script/sandbox.h"
#include "util/path.h"
#include "util/err.h"
#include "util/exepath.h"
#include "util/sha256.h"
#include "util/utf8.h"

#define VENV_LINE_MAX 1000

static const char *const passed_env[] = {
    "http_proxy",       "https_proxy",         "no_proxy",
    "HTTP_PROXY",       "HTTPS_PROXY",         "NO_PROXY",
    "PIP_INDEX_URL",    "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS",
    "PIP_TRUSTED_HOST", "PIP_NO_INDEX",        "PIP_CERT",
    "SSL_CERT_FILE",    "REQUESTS_CA_BUNDLE",  NULL,
};

int script_venv_default_dir(char *dir, size_t cap)
{
    const char *v = getenv("TRAINYARD_VENV_CACHE");
    int n;
    if (v && *v) {
        n = snprintf(dir, cap, "%s", v);
    } else if ((v = getenv("XDG_CACHE_HOME")) && *v) {
        n = snprintf(dir, cap, "%s/trainyard/venvs", v);
    } else if ((v = getenv("HOME")) && *v) {
        n = snprintf(dir, cap, "%s/.cache/trainyard/venvs", v);
    } else {
        return -ENOENT;
    }
    return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

static int mkdirs(const char *path)
{
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return -ENAMETOOLONG;
    for (char *s = buf + 1; *s; s++)
        if (*s == '/') {
            *s = '\0';
            if (mkdir(buf, 0755) < 0 && errno != EEXIST)
                return -errno;
            *s = '/';
        }
    return mkdir(buf, 0755) < 0 && errno != EEXIST ? -errno : 0;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

static void rm_tree(const char *path)
{
    nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

typedef struct venv_log {
    void (*on_log)(void *, const char *);
    void *user;
    char last[VENV_LINE_MAX + 1]; /* the last non-empty line, for the error */
} venv_log;

static void emit(venv_log *l, char *line)
{
    char clean[VENV_LINE_MAX + 1];
    utf8_clean(clean, sizeof clean, line);
    if (clean[0])
        memcpy(l->last, clean, strlen(clean) + 1);
    if (l->on_log)
        l->on_log(l->user, clean);
}

/* Runs argv (stdout and stderr as log lines) and returns its exit status, or -errno. */
static int run_logged(char *const argv[], char *const envp[], const char *cwd, venv_log *l,
                      char *err)
{
    pid_t pid;
    int fd;
    int rc = sandbox_spawn(argv, envp, cwd, 1, &pid, &fd, err);
    if (rc < 0)
        return rc;
    char line[VENV_LINE_MAX + 1], buf[8192];
    size_t len = 0;
    ssize_t k;
    while ((k = read(fd, buf, sizeof buf)) != 0) {
        if (k < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        for (ssize_t i = 0; i < k; i++) {
            if (buf[i] == '\n' || buf[i] == '\r') {
                line[len] = '\0';
                if (len)
                    emit(l, line);
                len = 0;
            } else if (len < VENV_LINE_MAX) {
                line[len++] = buf[i] ? buf[i] : '?';
            }
        }
    }
    if (len) {
        line[len] = '\0';
        emit(l, line);
    }
    close(fd);
    rc = sandbox_wait(pid);
    if (rc < 0)
        return err_set(err, rc, "waitpid: %s", strerror(-rc));
    return rc;
}

/* The full command line for one step: bwrap's options and "--" first when sandboxed. */
static int step_argv(sandbox_args *a, int sandbox, const char *venv, const char *code_dir,
                     const char *requirements, const char *python, char *const cmd[], char *err)
{
    int rc = 0;
    if (sandbox) {
        sandbox_args ro = {0};
        char exe[PATH_MAX];
        rc = sandbox_python_prefixes(python, &ro, exe, sizeof exe, err);
        if (rc == 0 && code_dir)
            rc = sandbox_args_add(&ro, code_dir) < 0 ? -ENOMEM : 0;
        if (rc == 0 && requirements)
            rc = sandbox_args_add(&ro, requirements) < 0 ? -ENOMEM : 0;
        const char *rw[] = {venv, NULL};
        sandbox_cfg c = {
            .chdir = code_dir, .network = 1, .ro_paths = (const char *const *)ro.v, .rw_paths = rw};
        if (rc == 0)
            rc = sandbox_args_bwrap(&c, a, err);
        if (rc == 0 && sandbox_args_add(a, "--") < 0)
            rc = -ENOMEM;
        sandbox_args_free(&ro);
        if (rc == -ENOMEM)
            err_set(err, rc, "out of memory");
        if (rc < 0)
            return rc;
        /* the interpreter itself: its sys.executable (a pyenv shim cannot run in there) */
        if (!strcmp(cmd[0], python) && sandbox_args_add(a, exe) < 0)
            return err_set(err, -ENOMEM, "out of memory");
    }
    for (size_t i = sandbox && !strcmp(cmd[0], python) ? 1 : 0; cmd[i]; i++)
        if (sandbox_args_add(a, cmd[i]) < 0)
            return err_set(err, -ENOMEM, "out of memory");
    return 0;
}

static int find_python(const char *python, char *out, size_t cap, char *err)
{
    if (strchr(python, '/')) {
        if (snprintf(out, cap, "%s", python) >= (int)cap)
            return err_set(err, -ENAMETOOLONG, "the interpreter's path is too long");
        return 0;
    }
    if (exepath_which(python, out, cap) < 0)
        return err_set(err, -ENOENT, "the interpreter \"%s\" is not on PATH", python);
    return 0;
}

int script_venv(const char *python, const char *requirements, const char *code_dir,
                const char *cache_dir, int sandbox, void (*on_log)(void *, const char *),
                void *user, char *out_python, size_t cap, char *err)
{
    char py[PATH_MAX], real_py[PATH_MAX], req_real[PATH_MAX], code_real[PATH_MAX];
    int rc = find_python(python && *python ? python : "python3", py, sizeof py, err);
    if (rc < 0)
        return rc;
    if (!realpath(py, real_py))
        return err_set(err, -errno, "the interpreter %s: %s", py, strerror(errno));
    if (!realpath(requirements, req_real))
        return err_set(err, -errno, "%s: %s", requirements, strerror(errno));
    if (!realpath(code_dir ? code_dir : ".", code_real))
        return err_set(err, -errno, "%s: %s", code_dir, strerror(errno));
    char req_hex[65];
    uint64_t req_size;
    rc = sha256_file(req_real, req_hex, &req_size, err);
    if (rc < 0)
        return rc;
    char keytext[PATH_MAX + 80], key[65];
    snprintf(keytext, sizeof keytext, "%s\n%s", req_hex, real_py);
    sha256_buf_hex(keytext, strlen(keytext), key);
    key[32] = '\0';

    rc = mkdirs(cache_dir);
    if (rc < 0)
        return err_set(err, rc, "cannot make the venv cache %s: %s", cache_dir, strerror(-rc));
    char venv[PATH_MAX], lock[PATH_MAX + 8], mark[PATH_MAX + 24], bin[PATH_MAX + 16];
    if (path_join(venv, sizeof venv - 40, cache_dir, key, NULL) < 0) /* room for the suffixes */
        return err_set(err, -ENAMETOOLONG, "the venv cache's path is too long");
    snprintf(lock, sizeof lock, "%s.lock", venv);
    snprintf(mark, sizeof mark, "%s/.trainyard-complete", venv);
    snprintf(bin, sizeof bin, "%s/bin/python", venv);
    if (strlen(bin) >= cap)
        return err_set(err, -ENAMETOOLONG, "the venv's interpreter path does not fit");
    int lfd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (lfd < 0)
        return err_set(err, -errno, "cannot open %s: %s", lock, strerror(errno));
    while (flock(lfd, LOCK_EX) < 0)
        if (errno != EINTR) {
            rc = err_set(err, -errno, "cannot lock %s: %s", lock, strerror(errno));
            close(lfd);
            return rc;
        }
    if (access(mark, F_OK) == 0 && access(bin, X_OK) == 0)
        goto done; /* built before */

    venv_log l = {.on_log = on_log, .user = user};
    sandbox_args env = {0}, a = {0};
    rm_tree(venv); /* a build that died half-way */
    if (mkdir(venv, 0755) < 0) {
        rc = err_set(err, -errno, "cannot make %s: %s", venv, strerror(errno));
        goto fail;
    }
    char kv[PATH_MAX + 16];
    snprintf(kv, sizeof kv, "HOME=%s", sandbox ? "/tmp" : venv);
    if (sandbox_args_add(&env, "PATH=/usr/local/bin:/usr/bin:/bin") < 0 ||
        sandbox_args_add(&env, "LANG=C.UTF-8") < 0 || sandbox_args_add(&env, kv) < 0 ||
        sandbox_args_add(&env, "PIP_NO_CACHE_DIR=1") < 0 ||
        sandbox_args_add(&env, "PIP_DISABLE_PIP_VERSION_CHECK=1") < 0 ||
        sandbox_args_add(&env, "PYTHONUNBUFFERED=1") < 0) {
        rc = err_set(err, -ENOMEM, "out of memory");
        goto fail;
    }
    for (size_t i = 0; passed_env[i]; i++) {
        const char *v = getenv(passed_env[i]);
        if (!v)
            continue;
        char *one = malloc(strlen(passed_env[i]) + strlen(v) + 2);
        if (!one) {
            rc = err_set(err, -ENOMEM, "out of memory");
            goto fail;
        }
        sprintf(one, "%s=%s", passed_env[i], v);
        rc = sandbox_args_add(&env, one) < 0 ? err_set(err, -ENOMEM, "out of memory") : 0;
        free(one);
        if (rc < 0)
            goto fail;
    }

    char *mk[] = {py, "-m", "venv", "--system-site-packages", venv, NULL};
    rc = step_argv(&a, sandbox, venv, code_real, NULL, py, mk, err);
    if (rc < 0)
        goto fail;
    emit(&l, "making the venv for requirements.txt");
    rc = run_logged(a.v, env.v, code_real, &l, err);
    if (rc != 0) {
        if (rc > 0)
            rc = err_set(err, -EIO, "python -m venv failed (exit %d): %s", rc, l.last);
        goto fail;
    }
    sandbox_args_free(&a);
    char *pip[] = {bin, "-m", "pip", "install", "--no-input", "-r", req_real, NULL};
    rc = step_argv(&a, sandbox, venv, code_real, req_real, py, pip, err);
    if (rc < 0)
        goto fail;
    rc = run_logged(a.v, env.v, code_real, &l, err);
    if (rc != 0) {
        if (rc > 0)
            rc = err_set(err, -EIO, "pip install -r requirements.txt failed (exit %d): %s", rc,
                         l.last);
        goto fail;
    }
    int mfd = open(mark, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (mfd < 0) {
        rc = err_set(err, -errno, "cannot write %s: %s", mark, strerror(errno));
        goto fail;
    }
    close(mfd);
    sandbox_args_free(&a);
    sandbox_args_free(&env);
done:
    memcpy(out_python, bin, strlen(bin) + 1);
    close(lfd); /* releases the lock */
    return 0;
fail:
    rm_tree(venv);
    sandbox_args_free(&a);
    sandbox_args_free(&env);
    close(lfd);
    return rc;
}
