/* slurm_cmd: the Slurm executor's commands (see slurm.h) — the sbatch command line and batch
 * script made from a job, what a squeue state means, and running a command with its output
 * captured.
 *
 * Nothing here reads the database; slurm.c decides what to run. Commands are started with
 * posix_spawnp and an argv array. The batch script is the one text a shell reads: it holds
 * only serve's own settings (paths, the URL, the worker id), each single-quoted, and no word
 * of a job document. */
#include "scheduler/slurm.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util/err.h"

extern char **environ;

/* ---- sbatch ------------------------------------------------------------------------------ */

/* Formats one word into a's next storage slot and appends it to a->v. */
__attribute__((format(printf, 3, 4))) static int slurm_word(slurm_argv *a, int *n_words,
                                                            const char *fmt, ...)
{
    size_t n = 0;
    while (a->v[n])
        n++;
    if (*n_words >= (int)(sizeof a->words / sizeof a->words[0]) ||
        n + 2 > sizeof a->v / sizeof a->v[0])
        return -E2BIG;
    char *w = a->words[(*n_words)++];
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(w, sizeof a->words[0], fmt, ap);
    va_end(ap);
    if (len < 0 || (size_t)len >= sizeof a->words[0])
        return -E2BIG;
    a->v[n] = w;
    a->v[n + 1] = NULL;
    return 0;
}

/* Appends a borrowed word to a->v. */
static int slurm_arg(slurm_argv *a, const char *word)
{
    size_t n = 0;
    while (a->v[n])
        n++;
    if (n + 2 > sizeof a->v / sizeof a->v[0])
        return -E2BIG;
    a->v[n] = word;
    a->v[n + 1] = NULL;
    return 0;
}

int slurm_sbatch_argv(const slurm_opts *o, const slurm_submit *s, slurm_argv *a, char *err)
{
    int w = 0, rc = 0;
    memset(a, 0, sizeof *a);
    rc = slurm_arg(a, o->sbatch ? o->sbatch : "sbatch");
    /* --parsable: stdout is the job id alone; --no-requeue: a failed node ends the Slurm job
     * and trainyard retries it (an attempt counted, max_attempts applied) instead of Slurm
     * running the batch again behind its back. */
    if (rc == 0)
        rc = slurm_arg(a, "--parsable");
    if (rc == 0)
        rc = slurm_arg(a, "--no-requeue");
    if (rc == 0)
        rc = slurm_word(a, &w, "--job-name=trainyard-%s", s->job_id);
    if (rc == 0)
        rc = slurm_word(a, &w, "--ntasks=%d", s->replicas > 0 ? s->replicas : 1);
    if (rc == 0 && s->nodes > 0)
        rc = slurm_word(a, &w, "--nodes=%d", s->nodes);
    /* A GPU per rank: with nodes given, as many per node as its share of the ranks (rounded
     * up); without, --gpus-per-task lets Slurm place the ranks where GPUs are free. */
    if (rc == 0 && s->gpu && s->nodes > 0)
        rc = slurm_word(a, &w, "--gres=gpu:%d", (s->replicas + s->nodes - 1) / s->nodes);
    else if (rc == 0 && s->gpu)
        rc = slurm_arg(a, "--gpus-per-task=1");
    if (rc == 0 && s->time_limit_s > 0) {
        int64_t t = s->time_limit_s;
        rc = slurm_word(a, &w, "--time=%lld-%02lld:%02lld:%02lld", (long long)(t / 86400),
                        (long long)(t / 3600 % 24), (long long)(t / 60 % 60), (long long)(t % 60));
    }
    if (rc == 0 && o->partition)
        rc = slurm_word(a, &w, "--partition=%s", o->partition);
    if (rc == 0)
        rc = slurm_arg(a, "--output");
    if (rc == 0)
        rc = slurm_arg(a, s->output);
    if (rc < 0)
        return err_set(err, rc, "the sbatch command line is too long (--partition?)");
    return 0;
}

/* ---- the batch script --------------------------------------------------------------------- */

typedef struct slurm_text {
    char *p;
    size_t len, cap;
    int full;
} slurm_text;

static void slurm_put(slurm_text *t, const char *s)
{
    size_t n = strlen(s);
    if (t->full || t->len + n >= t->cap) {
        t->full = 1;
        return;
    }
    memcpy(t->p + t->len, s, n + 1);
    t->len += n;
}

/* Appends ' word' single-quoted for sh: every ' becomes '\''. */
static void slurm_put_quoted(slurm_text *t, const char *word)
{
    char one[2] = {0, 0};
    slurm_put(t, " '");
    for (const char *c = word; *c; c++) {
        if (*c == '\'') {
            slurm_put(t, "'\\''");
            continue;
        }
        one[0] = *c;
        slurm_put(t, one);
    }
    slurm_put(t, "'");
}

int slurm_script_build(const slurm_opts *o, const char *worker_id, char *out, size_t cap, char *err)
{
    slurm_text t = {.p = out, .len = 0, .cap = cap, .full = 0};
    char every[48];
    if (cap == 0)
        return err_set(err, -E2BIG, "no room for the batch script");
    out[0] = '\0';
    slurm_put(&t, "#!/bin/sh\n"
                  "# Made by trainyard serve --executor slurm: the job's ranks; rank 0 leases it\n"
                  "# as the worker below, with the token sbatch exported (TRAINYARD_TOKEN).\n"
                  "# PMIx: Open MPI 4.1 starts under srun only with --mpi=pmix.\n"
                  "exec srun --mpi=pmix --kill-on-bad-exit=1");
    slurm_put_quoted(&t, o->replica_exe);
    const struct {
        const char *flag, *value; /* passed on when value is set */
    } words[] = {{"--server", o->server_url},
                 {"--worker", worker_id},
                 {"--pin-cert", o->pin_cert},
                 {"--dataset-root", o->dataset_root},
                 {"--dataset-allow", o->dataset_allow},
                 {"--dataset-ca", o->dataset_ca},
                 {"--max-dataset-bytes", o->max_dataset_bytes},
                 {"--dataset-cache", o->dataset_cache}};
    for (size_t k = 0; k < sizeof words / sizeof words[0]; k++) {
        if (!words[k].value)
            continue;
        slurm_put(&t, " ");
        slurm_put(&t, words[k].flag);
        slurm_put_quoted(&t, words[k].value);
    }
    if (o->checkpoint_s >= 0) {
        snprintf(every, sizeof every, " --checkpoint-seconds %ld", o->checkpoint_s);
        slurm_put(&t, every);
    }
    if (o->dataset_stall_s > 0) {
        snprintf(every, sizeof every, " --dataset-stall-seconds %ld", o->dataset_stall_s);
        slurm_put(&t, every);
    }
    for (size_t k = 0; o->scripts && o->script_args && o->script_args[k]; k++)
        slurm_put_quoted(&t, o->script_args[k]); /* a script job's ranks run it as serve says */
    slurm_put(&t, "\n");
    if (t.full)
        return err_set(err, -E2BIG, "the batch script passes %zu bytes", cap);
    return 0;
}

/* ---- states ------------------------------------------------------------------------------- */

int slurm_state_class(const char *state)
{
    /* squeue's %T names (Slurm 22.05, man squeue "JOB STATE CODES") */
    static const char *const waiting[] = {
        "PENDING",       "CONFIGURING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD",
        "RESV_DEL_HOLD", "SUSPENDED",   "STOPPED",  "RESIZING",    NULL};
    static const char *const ended[] = {"COMPLETED",     "FAILED",       "CANCELLED", "TIMEOUT",
                                        "NODE_FAIL",     "PREEMPTED",    "BOOT_FAIL", "DEADLINE",
                                        "OUT_OF_MEMORY", "SPECIAL_EXIT", "REVOKED",   NULL};
    for (size_t i = 0; waiting[i]; i++)
        if (strcmp(state, waiting[i]) == 0)
            return SLURM_WAITING;
    for (size_t i = 0; ended[i]; i++)
        if (strcmp(state, ended[i]) == 0)
            return SLURM_ENDED;
    return SLURM_ALIVE; /* RUNNING, COMPLETING, SIGNALING, STAGE_OUT, and names to come */
}

/* ---- running a command -------------------------------------------------------------------- */

static int64_t slurm_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Reads what fd has into buf (len so far, cap bytes with the NUL); what passes cap is dropped.
 * Returns 0 at end of file (fd closed), 1 otherwise. */
static int slurm_drain(int *fd, char *buf, size_t *len, size_t cap)
{
    char chunk[4096];
    ssize_t n = read(*fd, chunk, sizeof chunk);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return 1;
    if (n <= 0) {
        close(*fd);
        *fd = -1;
        return 0;
    }
    size_t room = cap - 1 - *len;
    size_t take = (size_t)n < room ? (size_t)n : room;
    memcpy(buf + *len, chunk, take);
    *len += take;
    buf[*len] = '\0';
    return 1;
}

/* write() to a child's stdin that may already have exited: EPIPE, without the SIGPIPE that
 * would end a process that does not ignore it (serve does; this module does not rely on it). The
 * signal is blocked in this thread for the write, and one it raised is taken back while still
 * blocked, so nothing is left pending when the old mask returns. */
static ssize_t slurm_write_nosigpipe(int fd, const char *buf, size_t len)
{
    sigset_t pipe_set, old;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
    ssize_t n = write(fd, buf, len);
    int e = errno;
    if (n < 0 && e == EPIPE && !sigismember(&old, SIGPIPE)) {
        const struct timespec zero = {0, 0};
        while (sigtimedwait(&pipe_set, NULL, &zero) < 0 && errno == EINTR)
            ;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    errno = e;
    return n;
}

/* The child's stdin, stdout and stderr: p[0..1] stdin, p[2..3] stdout, p[4..5] stderr. */
static int slurm_spawn(const char *const *argv, char *const *envp, int p[6], pid_t *pid, char *err)
{
    posix_spawn_file_actions_t fa;
    for (int i = 0; i < 3; i++) {
        if (pipe2(p + 2 * i, O_CLOEXEC) != 0) {
            int e = errno;
            for (int k = 0; k < 2 * i; k++)
                close(p[k]);
            return err_set(err, -e, "pipe: %s", strerror(e));
        }
    }
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, p[0], 0);
    posix_spawn_file_actions_adddup2(&fa, p[3], 1);
    posix_spawn_file_actions_adddup2(&fa, p[5], 2);
    int rc = posix_spawnp(pid, argv[0], &fa, NULL, (char *const *)argv, envp ? envp : environ);
    posix_spawn_file_actions_destroy(&fa);
    close(p[0]);
    close(p[3]);
    close(p[5]);
    if (rc != 0) {
        close(p[1]);
        close(p[2]);
        close(p[4]);
        return err_set(err, -rc, "cannot run %s: %s", argv[0], strerror(rc));
    }
    return 0;
}

int slurm_cmd_run(const char *const *argv, char *const *envp, const char *in, char *out,
                  char *errout, size_t cap, int timeout_ms, char *err)
{
    int p[6];
    pid_t pid;
    size_t out_len = 0, err_len = 0, in_left = in ? strlen(in) : 0;
    out[0] = errout[0] = '\0';
    int rc = slurm_spawn(argv, envp, p, &pid, err);
    if (rc < 0)
        return rc;
    int fd_in = p[1], fd_out = p[2], fd_err = p[4];
    fcntl(fd_in, F_SETFL, O_NONBLOCK);
    if (in_left == 0) {
        close(fd_in);
        fd_in = -1;
    }
    int64_t deadline = slurm_mono_ms() + timeout_ms;
    int timed_out = 0;
    while (fd_out >= 0 || fd_err >= 0) {
        struct pollfd fds[3] = {{.fd = fd_out, .events = POLLIN},
                                {.fd = fd_err, .events = POLLIN},
                                {.fd = fd_in, .events = POLLOUT}};
        int64_t left = deadline - slurm_mono_ms();
        if (left <= 0) {
            timed_out = 1;
            break;
        }
        if (poll(fds, 3, (int)left) < 0 && errno != EINTR)
            break;
        if (fds[0].revents)
            slurm_drain(&fd_out, out, &out_len, cap);
        if (fds[1].revents)
            slurm_drain(&fd_err, errout, &err_len, cap);
        if (fd_in >= 0 && fds[2].revents) {
            ssize_t n = slurm_write_nosigpipe(fd_in, in, in_left);
            if (n > 0) {
                in += n;
                in_left -= (size_t)n;
            }
            if ((n < 0 && errno != EAGAIN && errno != EINTR) || in_left == 0) {
                close(fd_in);
                fd_in = -1;
            }
        }
    }
    if (fd_in >= 0)
        close(fd_in);
    if (fd_out >= 0)
        close(fd_out);
    if (fd_err >= 0)
        close(fd_err);
    if (timed_out)
        kill(pid, SIGKILL);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (timed_out)
        return err_set(err, -ETIMEDOUT, "%s did not answer within %d s", argv[0],
                       timeout_ms / 1000);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return WEXITSTATUS(status);
}
