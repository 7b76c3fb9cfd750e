/* supervisor: spawn, watch and restart local workers (see supervisor.h).
 *
 * Invariant: slot i is either running (pid > 0) or waiting to restart at restart_at; only the
 * watcher thread changes slots after start, under the mutex, so supervisor_pid() may read them
 * from any thread.
 *
 * Workers get `--parent <serve's pid>`: they die with serve, even by kill -9 (cmd_worker.c
 * says why). The kernel's parent-death signal follows the THREAD that spawned a child, not the
 * process: a worker the watcher thread restarted would be killed the moment that thread
 * returns. So the watcher thread itself stops the workers (SIGTERM, grace, SIGKILL) before it
 * returns, and the first workers are spawned by the thread that calls supervisor_start (serve's
 * main thread, which lives as long as the process).
 *
 * A worker that ended is reported (opts.exited) and its work folder emptied on the watcher
 * thread before the slot's next process is spawned, on the same thread: the report can count
 * on no live process of that slot. */
#include "scheduler/supervisor.h"

#include <ftw.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util/datadir.h"
#include "util/err.h"
#include "util/timeutil.h"

#define SUPERVISOR_POLL_MS   100
#define SUPERVISOR_MIN_DELAY 0.5
#define SUPERVISOR_MAX_DELAY 30.0
#define SUPERVISOR_HEALTHY_S 60.0
#define SUPERVISOR_URGE_S    2.0 /* the second SIGTERM comes this long before the grace ends */

extern char **environ;

typedef struct slot {
    pid_t pid;
    int device;
    double started_at, restart_at, delay;
} slot;

struct supervisor {
    supervisor_opts o;
    char *exe, *url, *root, *allow, *work, *pin, *dataset_ca, *max_dataset;
    char *cache, *cache_bytes;
    char **extra; /* a copy of o.extra_args, NULL-terminated */
    slot slots[SUPERVISOR_MAX_WORKERS];
    pthread_mutex_t mu;
    pthread_t thread;
    int running, stopping, grace_ms;
};

static void say(supervisor *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void say(supervisor *s, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (s->o.log)
        s->o.log(line);
    else
        fprintf(stderr, "%s\n", line);
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

/* Removes slot i's work folder with whatever a dead worker left in it (the job folder of a
 * worker killed mid-job: its dataset copy, checkpoints, artifacts); the next process makes it
 * again. Only that slot's process ever uses it, and serve's lock on the data directory rules
 * out another serve's. */
static void work_clean(supervisor *s, int i)
{
    char work[DATADIR_PATH_MAX];
    if (datadir_worker_dir(s->work, i, work) == 0)
        nftw(work, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
}

static int spawn(supervisor *s, int i, char *err)
{
    char device[16], name[64], work[DATADIR_PATH_MAX], parent[24];
    snprintf(device, sizeof device, "%d", s->slots[i].device);
    snprintf(name, sizeof name, SUPERVISOR_NAME_FMT, i);
    if (datadir_worker_dir(s->work, i, work) < 0)
        return err_set(err, -ENAMETOOLONG, "%s: a local worker's folder path is too long", s->work);
    const char *argv[64];
    int n = 0;
    argv[n++] = s->exe;
    argv[n++] = "worker";
    argv[n++] = "--server";
    argv[n++] = s->url;
    argv[n++] = "--device";
    argv[n++] = device;
    argv[n++] = "--name";
    argv[n++] = name;
    argv[n++] = "--work-dir";
    argv[n++] = work;
    snprintf(parent, sizeof parent, "%d", (int)getpid());
    argv[n++] = "--parent";
    argv[n++] = parent;
    const struct {
        const char *flag, *value; /* passed on when value is set */
    } optional[] = {{"--pin-cert", s->pin},
                    {"--dataset-ca", s->dataset_ca},
                    {"--dataset-root", s->root},
                    {"--dataset-allow", s->allow},
                    {"--max-dataset-bytes", s->max_dataset},
                    {"--dataset-cache", s->cache},
                    {"--dataset-cache-bytes", s->cache_bytes}};
    for (size_t k = 0; k < sizeof optional / sizeof optional[0]; k++) {
        if (optional[k].value) {
            argv[n++] = optional[k].flag;
            argv[n++] = optional[k].value;
        }
    }
    char stall[32];
    if (s->o.dataset_stall_s > 0) {
        snprintf(stall, sizeof stall, "%ld", s->o.dataset_stall_s);
        argv[n++] = "--dataset-stall-seconds";
        argv[n++] = stall;
    }
    char every[32];
    if (s->o.checkpoint_s >= 0) {
        snprintf(every, sizeof every, "%ld", s->o.checkpoint_s);
        argv[n++] = "--checkpoint-seconds";
        argv[n++] = every;
    }
    for (size_t k = 0; s->extra && s->extra[k] && n < 62; k++)
        argv[n++] = s->extra[k];
    argv[n] = NULL;
    pid_t pid;
    int rc = posix_spawn(&pid, s->exe, NULL, NULL, (char *const *)argv, environ);
    if (rc != 0)
        return err_set(err, -rc, "cannot start %s worker: %s", s->exe, strerror(rc));
    s->slots[i].pid = pid;
    s->slots[i].started_at = time_mono();
    say(s, "local worker %d started (pid %d, device %d)", i, (int)pid, s->slots[i].device);
    return 0;
}

static void describe_exit(int status, char *out, size_t cap)
{
    if (WIFEXITED(status))
        snprintf(out, cap, "exited with status %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(out, cap, "was killed by signal %d", WTERMSIG(status));
    else
        snprintf(out, cap, "stopped");
}

/* Sends SIGTERM to every running worker (finish the epoch, checkpoint, hand the job back),
 * a second one SUPERVISOR_URGE_S before grace_ms ends (stop at the next step: an epoch may be
 * longer than the grace), then SIGKILLs what is left. Runs on the thread that spawned them
 * (see the top). */
static void terminate_all(supervisor *s, int grace_ms)
{
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < s->o.count; i++)
        if (s->slots[i].pid > 0)
            kill(s->slots[i].pid, SIGTERM);
    pthread_mutex_unlock(&s->mu);
    double start = time_mono(), deadline = start + grace_ms / 1000.0;
    double urge_at = grace_ms > 2000 * SUPERVISOR_URGE_S ? deadline - SUPERVISOR_URGE_S
                                                         : start + grace_ms / 2000.0;
    int urged = 0;
    for (int i = 0; i < s->o.count; i++) {
        slot *sl = &s->slots[i];
        while (sl->pid > 0) {
            pid_t gone = 0;
            if (!urged && time_mono() >= urge_at) {
                for (int k = i; k < s->o.count; k++)
                    if (s->slots[k].pid > 0)
                        kill(s->slots[k].pid, SIGTERM);
                urged = 1;
            }
            if (waitpid(sl->pid, NULL, WNOHANG) == sl->pid) {
                gone = sl->pid;
            } else if (time_mono() >= deadline) {
                say(s, "local worker %d (pid %d) did not stop in time: killed", i, (int)sl->pid);
                kill(sl->pid, SIGKILL);
                waitpid(sl->pid, NULL, 0);
                gone = sl->pid;
            } else {
                struct timespec ts = {0, 20 * 1000000L};
                nanosleep(&ts, NULL);
            }
            if (gone) {
                pthread_mutex_lock(&s->mu);
                sl->pid = 0;
                pthread_mutex_unlock(&s->mu);
            }
        }
    }
}

/* A worker that ended, reported to opts.exited once the mutex is dropped. */
typedef struct supervisor_exit {
    int slot;
    pid_t pid;
    char how[64];
} supervisor_exit;

static void *watch(void *arg)
{
    supervisor *s = arg;
    char err[ERR_LEN];
    supervisor_exit ended[SUPERVISOR_MAX_WORKERS];
    for (;;) {
        int n_ended = 0;
        pthread_mutex_lock(&s->mu);
        if (s->stopping) {
            int grace_ms = s->grace_ms;
            pthread_mutex_unlock(&s->mu);
            terminate_all(s, grace_ms);
            break;
        }
        double now = time_mono();
        for (int i = 0; i < s->o.count; i++) {
            slot *sl = &s->slots[i];
            if (sl->pid > 0) {
                int status;
                if (waitpid(sl->pid, &status, WNOHANG) != sl->pid)
                    continue;
                supervisor_exit *e = &ended[n_ended++];
                e->slot = i;
                e->pid = sl->pid;
                describe_exit(status, e->how, sizeof e->how);
                /* A worker that ran a while gets restarted at once; one dying young backs off. */
                if (now - sl->started_at >= SUPERVISOR_HEALTHY_S)
                    sl->delay = SUPERVISOR_MIN_DELAY;
                else
                    sl->delay =
                        sl->delay * 2 > SUPERVISOR_MAX_DELAY ? SUPERVISOR_MAX_DELAY : sl->delay * 2;
                say(s, "local worker %d (pid %d) %s; restarting in %.1fs", i, (int)sl->pid, e->how,
                    sl->delay);
                sl->pid = 0;
                sl->restart_at = now + sl->delay;
            } else if (now >= sl->restart_at && spawn(s, i, err) < 0) {
                say(s, "%s", err);
                sl->restart_at = now + SUPERVISOR_MAX_DELAY;
            }
        }
        pthread_mutex_unlock(&s->mu);
        /* On this thread, so before the slot's next process can start (restart_at is ahead). */
        for (int k = 0; k < n_ended; k++) {
            char name[64];
            snprintf(name, sizeof name, SUPERVISOR_NAME_FMT, ended[k].slot);
            if (s->o.exited)
                s->o.exited(s->o.user, name, ended[k].pid, ended[k].how);
            work_clean(s, ended[k].slot);
        }
        struct timespec ts = {0, SUPERVISOR_POLL_MS * 1000000L};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

static char *dup_or_null(const char *v)
{
    return v ? strdup(v) : NULL;
}

int supervisor_start(const supervisor_opts *o, supervisor **out, char *err)
{
    if (o->count < 1 || o->count > SUPERVISOR_MAX_WORKERS)
        return err_set(err, -EINVAL, "local workers: %d is not from 1 to %d", o->count,
                       SUPERVISOR_MAX_WORKERS);
    supervisor *s = calloc(1, sizeof *s);
    if (!s)
        return err_set(err, -ENOMEM, "out of memory");
    s->o = *o;
    s->o.extra_args = NULL; /* s->extra holds the copy */
    s->exe = strdup(o->exe);
    s->url = strdup(o->server_url);
    s->work = strdup(o->work_dir);
    s->root = dup_or_null(o->dataset_root);
    s->allow = dup_or_null(o->dataset_allow);
    s->pin = dup_or_null(o->pin_cert);
    s->dataset_ca = dup_or_null(o->dataset_ca);
    s->max_dataset = dup_or_null(o->max_dataset_bytes);
    s->cache = dup_or_null(o->dataset_cache);
    s->cache_bytes = dup_or_null(o->dataset_cache_bytes);
    pthread_mutex_init(&s->mu, NULL);
    int rc = 0;
    size_t n_extra = 0;
    while (o->extra_args && o->extra_args[n_extra])
        n_extra++;
    if (n_extra > 24)
        rc = err_set(err, -E2BIG, "too many options for the local workers");
    s->extra = rc == 0 && n_extra ? calloc(n_extra + 1, sizeof *s->extra) : NULL;
    for (size_t k = 0; s->extra && k < n_extra; k++)
        if (!(s->extra[k] = strdup(o->extra_args[k])))
            rc = err_set(err, -ENOMEM, "out of memory");
    if (rc == 0 && n_extra && !s->extra)
        rc = err_set(err, -ENOMEM, "out of memory");
    if (!s->exe || !s->url || !s->work || (o->dataset_allow && !s->allow) ||
        (o->pin_cert && !s->pin) || (o->dataset_ca && !s->dataset_ca) ||
        (o->max_dataset_bytes && !s->max_dataset) || (o->dataset_cache && !s->cache) ||
        (o->dataset_cache_bytes && !s->cache_bytes))
        rc = err_set(err, -ENOMEM, "out of memory");
    for (int i = 0; i < o->count && rc == 0; i++) {
        s->slots[i].device = o->devices ? o->devices[i] : 0;
        s->slots[i].delay = SUPERVISOR_MIN_DELAY;
        work_clean(s, i); /* what a serve killed mid-job left */
        rc = spawn(s, i, err);
    }
    if (rc == 0 && pthread_create(&s->thread, NULL, watch, s) != 0)
        rc = err_set(err, -EAGAIN, "cannot start the supervisor thread");
    if (rc < 0) {
        supervisor_stop(s, 0);
        return rc;
    }
    s->running = 1;
    *out = s;
    return 0;
}

pid_t supervisor_pid(supervisor *s, int i)
{
    pthread_mutex_lock(&s->mu);
    pid_t pid = i >= 0 && i < s->o.count ? s->slots[i].pid : 0;
    pthread_mutex_unlock(&s->mu);
    return pid;
}

void supervisor_stop(supervisor *s, int grace_ms)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    s->stopping = 1;
    s->grace_ms = grace_ms;
    pthread_mutex_unlock(&s->mu);
    if (s->running)
        pthread_join(s->thread, NULL); /* it stops the workers */
    else
        terminate_all(s, grace_ms);
    pthread_mutex_destroy(&s->mu);
    free(s->exe);
    free(s->url);
    free(s->work);
    free(s->root);
    free(s->allow);
    free(s->pin);
    free(s->dataset_ca);
    free(s->max_dataset);
    free(s->cache);
    free(s->cache_bytes);
    for (size_t k = 0; s->extra && s->extra[k]; k++)
        free(s->extra[k]);
    free(s->extra);
    free(s);
}
