/* sandbox: bubblewrap's command line for script runs (script/run.c) and venv builds
 * (script/venv.c), and the launcher that runs first inside it.
 *
 * What the sandbox sees: /usr read-only (and /bin /lib /lib64 /sbin as the system has them:
 * symlinks recreated, folders bound read-only), a fixed list of /etc entries, /proc, a minimal
 * /dev plus the GPU devices that exist (/dev/nvidia*, /dev/dri, /dev/kfd), /sys read-only, the
 * read-only and read-write paths the caller names at their own paths, and the job folder
 * read-write at /job with its tmp/ at /tmp. Nothing else: no /home, /root, /var, /srv, /opt.
 * Every namespace is unshared (the network kept only when asked); bwrap dies with its parent.
 *
 * The launcher: a signal to the run's process group reaches bwrap's own processes too, and the
 * outer bwrap dying of SIGTERM would take the script with it (--die-with-parent) before its
 * grace. So bwrap is started with SIGTERM blocked (the mask survives exec and fork), and inside
 * it `<this binary> __script-exec FD DATA_LIMIT -- ARGV` forks the script with SIGTERM
 * unblocked and RLIMIT_DATA set (set there, not on bwrap: a sanitizer build of the launcher
 * reserves more address space than a script's limit), waits for it and writes "exit N" or
 * "signal N" to FD (bwrap's own exit status cannot tell a signal from an exit of 128 + N). The
 * binary is /proc/self/exe, bound read-only at SANDBOX_LAUNCHER, so a program that runs
 * sandboxed scripts must dispatch `__script-exec` to sandbox_exec_main() in its main()
 * (trainyard's cli/main.c does; so do the unit tests). */
#ifndef TRAINYARD_SCRIPT_SANDBOX_H
#define TRAINYARD_SCRIPT_SANDBOX_H

#include <stddef.h>
#include <sys/types.h>

#define SANDBOX_LAUNCHER "/run/trainyard/script-exec" /* where the launcher is inside */

/* A growing argv; v is NULL-terminated after every add. Freed with sandbox_args_free. */
typedef struct sandbox_args {
    char **v;
    size_t n, cap;
} sandbox_args;

typedef struct sandbox_cfg {
    const char *job_dir;         /* bound read-write at /job, its tmp/ at /tmp; NULL: none */
    const char *chdir;           /* the working folder inside, or NULL */
    int network;                 /* keep the network namespace */
    const char *ro_binds;        /* comma-separated extra read-only paths, or NULL */
    const char *const *ro_paths; /* NULL-terminated read-only paths bound at themselves, or NULL */
    const char *const *rw_paths; /* NULL-terminated read-write paths bound at themselves, or NULL */
    const char *launcher;        /* bound read-only at SANDBOX_LAUNCHER, or NULL */
    const char *const *hidden;   /* NULL-terminated paths inside covered by an empty tmpfs */
} sandbox_cfg;

/* Appends a copy of s: 0 or -ENOMEM. */
int sandbox_args_add(sandbox_args *a, const char *s);
/* Frees the strings and the array; accepts an empty (zeroed) one. */
void sandbox_args_free(sandbox_args *a);
/* The path of bwrap on PATH into out[cap]: 0, or -ENOENT with a sentence. */
int sandbox_bwrap_path(char *out, size_t cap, char *err);
/* Appends bwrap's path and its options for c (not the command, nor the "--" before it). */
int sandbox_args_bwrap(const sandbox_cfg *c, sandbox_args *a, char *err);
/* The interpreter's own executable (sys.executable) into out[cap]: what runs, rather than a
 * wrapper such as pyenv's shim, which needs things the script's environment and sandbox do not
 * have (PYENV_ROOT, $HOME/.pyenv). A venv's python stays the venv's. */
int sandbox_python_executable(const char *python, char *out, size_t cap, char *err);
/* Appends the interpreter's prefixes (sys.prefix, base_prefix, exec_prefix, base_exec_prefix;
 * asked once, outside any sandbox) that are not under /usr, such as a venv or /opt/conda, for
 * binding read-only; duplicates skipped. exe[cap] (unless NULL) gets its sys.executable, the
 * path to run inside, so that a wrapper such as a pyenv shim is not needed there. -ENOEXEC when
 * the interpreter cannot be run. */
int sandbox_python_prefixes(const char *python, sandbox_args *ro, char *exe, size_t cap, char *err);
/* Starts argv[0] (a path) with envp (NULL: this process's environment) in its own session,
 * killed when this thread ends (PR_SET_PDEATHSIG), stdin /dev/null, stdout (and stderr too when
 * both) on a pipe whose read end goes to *fd (the caller closes it), in cwd (NULL: here), with
 * no other descriptor of this process. *pid and *fd are written only on success. */
int sandbox_spawn(char *const argv[], char *const envp[], const char *cwd, int both, pid_t *pid,
                  int *fd, char *err);
/* Waits for pid: its exit status, 128 + the signal that ended it, or -errno. */
int sandbox_wait(pid_t pid);
/* `__script-exec FD DATA_LIMIT -- ARGV...` (argv[0] is "__script-exec"; DATA_LIMIT in bytes, 0
 * for none): the launcher; see above. Returns an exit status for main(). */
int sandbox_exec_main(int argc, char **argv);

#endif
