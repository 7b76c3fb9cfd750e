/* kbuild: a job's kernels built on two cores (see kbuild.h for the scheme).
 *
 * Split: the helper takes the GEMM and conv families (the heaviest compiles: gemm_cpu's
 * work-group function alone is most of a dense job's), this process everything else, so that
 * both finish at about the same time while this process also fetches and parses the data.
 * The helper is this same binary (/proc/self/exe) started with posix_spawn, so it shares
 * nothing with this process's OpenCL runtime; it reads its job and shapes from a socket on its
 * stdin (a socket so that a write to a dead helper fails with EPIPE instead of a signal), and
 * asks the kernel to kill it should this process die (PR_SET_PDEATHSIG). It never writes
 * trainyard's cache: this process saves every family it built when its context is freed.
 *
 * This process's share builds on a thread started by kbuild_start, so that it overlaps the
 * caller's fetch and parse of the dataset (host work: PoCL's one-compile-at-a-time limit is
 * about compiles, not threads); kbuild_dry joins it before anything else touches the context.
 *
 * Invariants: a kbuild with a helper owns its pid until kbuild_finish or kbuild_free reaps it;
 * b->k is a kern of this process's share in dry mode until kbuild_finish replaces it; nothing
 * but the build thread touches b->c between kbuild_start and the join. */
#include "train/kbuild.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "util/dynbuf.h"
#include "util/err.h"
#include "model/model.h"

extern char **environ;

#define KBUILD_HELPER_FAMILIES (KERN_FAM_GEMM | KERN_FAM_CONV)
#define KBUILD_LINE_MAX        (1 << 20) /* the helper's request: a job document and sizes */

struct kbuild {
    ocl_ctx *c;
    const job_spec *job;
    unsigned families, theirs; /* the job's families; the helper's share of them */
    kern *k;                   /* this process's share (dry), or every family when not split */
    pid_t pid;                 /* the helper, 0 when none (or reaped) */
    int fd;                    /* our end of the helper's stdin, -1 when closed */
    pthread_t thread;          /* builds this process's share while the caller loads data */
    int threaded;              /* thread started and not yet joined */
    int build_rc;              /* the thread's result, with its sentence in build_err */
    char build_err[ERR_LEN];
};

/* A PoCL platform whose kernel cache is on: what the helper compiles, this process finds; and
 * not TRAINYARD_KERNEL_BUILD=serial (everything in this process, as before kbuild). */
static int pocl_cache_shared(const ocl_device *d)
{
    const char *off = getenv("POCL_KERNEL_CACHE"), *env = getenv("TRAINYARD_KERNEL_BUILD");
    if (env && !strcmp(env, "serial"))
        return 0;
    return strstr(d->platform_name, "Portable Computing Language") && !(off && !strcmp(off, "0"));
}

static int helper_spawn(kbuild *b)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        return -errno;
    char ppid[24], dev[24], fam[24];
    snprintf(ppid, sizeof ppid, "%ld", (long)getpid());
    snprintf(dev, sizeof dev, "%d", b->c->dev.index);
    snprintf(fam, sizeof fam, "%x", b->theirs);
    char *argv[] = {"trainyard", "__kernel-build", ppid, dev, fam, b->c->cache_dir, NULL};
    posix_spawn_file_actions_t fa;
    int rc = posix_spawn_file_actions_init(&fa);
    if (rc == 0)
        rc = posix_spawn_file_actions_adddup2(&fa, sv[1], 0);
    if (rc == 0)
        rc = posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    if (rc == 0)
        rc = posix_spawn(&b->pid, "/proc/self/exe", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(sv[1]);
    if (rc != 0) {
        b->pid = 0;
        close(sv[0]);
        return -rc;
    }
    b->fd = sv[0];
    return 0;
}

/* Reaps the helper: 0 when it exited 0, -EIO otherwise. With stop, asks it to stop first. */
static int helper_reap(kbuild *b, int stop)
{
    if (b->fd >= 0) {
        close(b->fd);
        b->fd = -1;
    }
    if (b->pid <= 0)
        return -EIO;
    if (stop)
        kill(b->pid, SIGKILL);
    int status = 0;
    pid_t got;
    do
        got = waitpid(b->pid, &status, 0);
    while (got < 0 && errno == EINTR);
    b->pid = 0;
    return got > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -EIO;
}

static void *build_share(void *arg)
{
    kbuild *b = arg;
    b->build_rc = kern_new_for(b->c, b->families & ~b->theirs, &b->k, b->build_err);
    if (b->build_rc == 0)
        kern_set_dry(b->k, 1);
    return NULL;
}

/* Waits for the build thread; its result. */
static int build_join(kbuild *b, char *err)
{
    if (!b->threaded)
        return 0;
    pthread_join(b->thread, NULL);
    b->threaded = 0;
    if (b->build_rc < 0 && err)
        snprintf(err, ERR_LEN, "%s", b->build_err);
    return b->build_rc;
}

int kbuild_start(ocl_ctx *c, const job_spec *job, unsigned families, kbuild **out, char *err)
{
    kbuild *b = calloc(1, sizeof *b);
    if (!b)
        return err_set(err, -ENOMEM, "out of memory");
    b->c = c;
    b->job = job;
    b->families = families;
    b->fd = -1;
    unsigned missing = families & ~kern_families_cached(c, families);
    if (pocl_cache_shared(&c->dev))
        b->theirs = missing & KBUILD_HELPER_FAMILIES;
    if (b->theirs && (b->theirs == families || helper_spawn(b) < 0))
        b->theirs = 0; /* nothing left here to overlap with, or no helper: build it all here */
    /* Split: this process's share builds on a thread while the caller loads the data (which
     * touches no OpenCL object until kbuild_dry); else in line, as before. */
    if (b->theirs && pthread_create(&b->thread, NULL, build_share, b) == 0) {
        b->threaded = 1;
        *out = b;
        return 0;
    }
    int rc = kern_new_for(c, families & ~b->theirs, &b->k, err);
    if (rc < 0) {
        kbuild_free(b);
        return rc;
    }
    kern_set_dry(b->k, b->theirs != 0);
    *out = b;
    return 0;
}

/* A zero-filled buffer of bytes (at least 4). */
static int zeros(ocl_ctx *c, size_t bytes, cl_mem *out, char *err)
{
    if (bytes < 4)
        bytes = 4;
    int rc = ocl_buffer_new(c, bytes, out, err);
    if (rc < 0)
        return rc;
    float zero = 0.0f;
    cl_int cl = clEnqueueFillBuffer(c->queue, *out, &zero, sizeof zero, 0, bytes, 0, NULL, NULL);
    if (cl != CL_SUCCESS) {
        clReleaseMemObject(*out);
        return err_set(err, -EIO, "clEnqueueFillBuffer: %s", ocl_strerror(cl));
    }
    return 0;
}

/* A throwaway model of the job's shapes: one batch made as the trainer makes it, one training
 * step and one evaluation, on zeros. With a dry kern only its own families' kernels run. */
static int dry_step(ocl_ctx *c, kern *k, const job_spec *job, const kbuild_shape *s, char *err)
{
    model *m = NULL;
    cl_mem buf[5] = {NULL}; /* x, y, idx, source, label source */
    size_t xbytes = (size_t)s->capacity * s->inputs * 4, ybytes = (size_t)s->capacity * 4;
    kern_image g = s->image_geom;
    g.n_src = 1;
    size_t src_bytes = s->image ? (size_t)g.sh * g.sw * g.c * (g.src_u8 ? 1 : 4) : xbytes;
    int rc = model_new(c, k, job, s->inputs, s->outputs, s->loss, s->capacity, 0, &m, err);
    size_t sizes[5] = {xbytes, ybytes, ybytes, src_bytes, ybytes};
    for (int i = 0; i < 5 && rc == 0; i++)
        rc = zeros(c, sizes[i], &buf[i], err);
    int krc = 0; /* the inputs as imagedata_batch or the trainer's gather, then the labels */
    if (rc == 0 && s->image)
        krc = kern_image_batch(k, &g, s->batch, buf[3], buf[2], 0, NULL, NULL, buf[0]);
    else if (rc == 0)
        krc = kern_gather_rows(k, s->batch, s->inputs, buf[3], buf[2], 0, buf[0]);
    if (rc == 0 && krc == 0)
        krc = kern_gather_rows(k, s->batch, 1, buf[4], buf[2], 0, buf[1]);
    if (krc < 0)
        rc = err_set(err, krc, "%s", kern_last_error(k));
    if (rc == 0)
        rc = model_train_step(m, s->batch, buf[0], buf[1], err);
    if (rc == 0 && s->val_rows > 0)
        rc = model_evaluate(m, s->val_rows < s->capacity ? s->val_rows : s->capacity, buf[0],
                            buf[1], err);
    if (rc == 0)
        rc = ocl_finish(c, err);
    for (int i = 0; i < 5; i++)
        if (buf[i])
            clReleaseMemObject(buf[i]);
    model_free(m);
    return rc;
}

static json_t *shape_json(const job_spec *job, const kbuild_shape *s)
{
    const kern_image *g = &s->image_geom;
    return json_pack("{s:o, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:[i, i, i, i, i, i]}", "job",
                     job_to_json(job), "inputs", s->inputs, "outputs", s->outputs, "loss", s->loss,
                     "capacity", s->capacity, "batch", s->batch, "val_rows", s->val_rows, "image",
                     s->image, "geom", g->src_u8, g->sh, g->sw, g->c, g->dh, g->dw);
}

int kbuild_dry(kbuild *b, const kbuild_shape *s, char *err)
{
    if (!b->theirs)
        return 0;
    json_t *j = shape_json(b->job, s);
    char *line = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (line) {
        /* best effort: a helper that cannot be told leaves its share to kbuild_finish */
        size_t len = strlen(line), off = 0;
        while (off < len) {
            ssize_t n = send(b->fd, line + off, len - off, MSG_NOSIGNAL);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                break;
            off += (size_t)n;
        }
        send(b->fd, "\n", 1, MSG_NOSIGNAL);
        free(line);
    }
    shutdown(b->fd, SHUT_WR);
    int rc = build_join(b, err);
    if (rc < 0)
        return rc;
    /* An optimisation: should it fail, the first batch compiles what it did not, and a real
     * problem (a model that does not fit) is reported by the trainer's own model_new. */
    char dry_err[ERR_LEN];
    dry_step(b->c, b->k, b->job, s, dry_err);
    return 0;
}

int kbuild_finish(kbuild *b, kern **out, char *err)
{
    int rc = build_join(b, err); /* when kbuild_dry was skipped */
    if (rc < 0)
        return rc;
    if (b->theirs) {
        helper_reap(b, 0); /* whatever it did not compile, the build below does */
        kern_free(b->k);
        b->k = NULL;
        rc = kern_new_for(b->c, b->families, &b->k, err);
        if (rc < 0)
            return rc;
    }
    *out = b->k;
    b->k = NULL;
    return 0;
}

void kbuild_free(kbuild *b)
{
    if (!b)
        return;
    build_join(b, NULL);
    if (b->pid > 0)
        helper_reap(b, 1);
    kern_free(b->k);
    free(b);
}

/* Reads one line from fd (at most KBUILD_LINE_MAX bytes, the rest of a longer one left
 * unread); NULL at EOF before any byte, or out of memory. */
static char *read_line(int fd)
{
    dynbuf b;
    char chunk[65536];
    dynbuf_init(&b, KBUILD_LINE_MAX);
    for (;;) {
        size_t room = KBUILD_LINE_MAX - dynbuf_len(&b);
        ssize_t n = room ? read(fd, chunk, room < sizeof chunk ? room : sizeof chunk) : 0;
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0 || dynbuf_add(&b, chunk, (size_t)n) < 0 || memchr(chunk, '\n', (size_t)n))
            break;
    }
    if (dynbuf_len(&b) == 0) {
        dynbuf_free(&b);
        return NULL;
    }
    return dynbuf_take(&b, NULL);
}

static int helper_dry(ocl_ctx *c, kern *k, const char *line, char *err)
{
    json_error_t je;
    json_t *req = json_loads(line, JSON_DISABLE_EOF_CHECK, &je);
    job_spec *job = NULL;
    field_errors errs = {0};
    kbuild_shape s = {0};
    kern_image *g = &s.image_geom;
    int rc = req ? 0 : err_set(err, -EINVAL, "request: %s", je.text);
    if (rc == 0 &&
        json_unpack_ex(req, &je, 0, "{s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:[i,i,i,i,i,i]}",
                       "inputs", &s.inputs, "outputs", &s.outputs, "loss", &s.loss, "capacity",
                       &s.capacity, "batch", &s.batch, "val_rows", &s.val_rows, "image", &s.image,
                       "geom", &g->src_u8, &g->sh, &g->sw, &g->c, &g->dh, &g->dw) < 0)
        rc = err_set(err, -EINVAL, "request: %s", je.text);
    if (rc == 0 && job_from_json(json_object_get(req, "job"), &job, &errs) < 0)
        rc = err_set(err, -EINVAL, "request: not a job");
    if (rc == 0)
        rc = dry_step(c, k, job, &s, err);
    job_free(job);
    json_decref(req);
    return rc;
}

/* One small product: compiles the GEMM kernel a step uses, before its shapes are known. */
static void warm_gemm(ocl_ctx *c, kern *k)
{
    char err[ERR_LEN];
    cl_mem a = NULL;
    if (zeros(c, 64 * sizeof(float), &a, err) == 0) {
        kern_gemm(k, 0, 0, 8, 8, 8, 1.0f, a, 8, a, 8, 0.0f, a, 8);
        ocl_finish(c, err);
        clReleaseMemObject(a);
    }
}

/* The context of the device at `index` of this process's listing (the parent's, since the
 * listing is stable on one machine), with cache_dir. */
static int ctx_at(const char *index, const char *cache_dir, ocl_ctx **out, char *err)
{
    ocl_device *list = NULL;
    size_t n = 0;
    int i = (int)strtol(index, NULL, 10);
    int rc = ocl_devices_list(&list, &n, err);
    if (rc == 0 && (i < 0 || (size_t)i >= n))
        rc = err_set(err, -ENODEV, "no OpenCL device %d", i);
    if (rc == 0)
        rc = ocl_ctx_new(&list[i], cache_dir, out, err);
    free(list);
    return rc;
}

int kbuild_helper_main(int argc, char **argv)
{
    if (argc != 5)
        return 2;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if ((long)getppid() != strtol(argv[1], NULL, 10))
        return 1; /* the parent is gone already */
    char err[ERR_LEN] = "";
    unsigned families = (unsigned)strtoul(argv[3], NULL, 16);
    ocl_ctx *c = NULL;
    kern *k = NULL;
    char *line = NULL;
    int rc = ctx_at(argv[2], argv[4], &c, err);
    if (rc == 0)
        rc = kern_new_for(c, families, &k, err);
    if (rc == 0) {
        kern_set_dry(k, 1);
        /* While the parent loads the data: gemm_cpu's work-group function, the longest compile
         * of all and the same for every shape (one work-item per group, a small grid). */
        if (families & KERN_FAM_GEMM)
            warm_gemm(c, k);
        line = read_line(0);
        rc = line ? helper_dry(c, k, line, err) : -ECANCELED;
    }
    if (c)
        memset(c->unsaved, 0, sizeof c->unsaved); /* the parent saves what it builds */
    free(line);
    kern_free(k);
    ocl_ctx_free(c);
    return rc == 0 ? 0 : 1;
}

void kbuild_save_detached(ocl_ctx *c, unsigned families)
{
    families = kern_families_unsaved(c, families); /* what this process compiled */
    if (!families || !c->cache_dir[0] || !pocl_cache_shared(&c->dev))
        return;
    char lock[4200], dev[24], fam[24];
    snprintf(lock, sizeof lock, "%s/.save.lock", c->cache_dir);
    int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        close(fd); /* a saver is at work: it, or the next run, writes these */
        memset(c->unsaved, 0, sizeof c->unsaved);
        return;
    }
    snprintf(dev, sizeof dev, "%d", c->dev.index);
    snprintf(fam, sizeof fam, "%x", families);
    char *argv[] = {"trainyard", "__kernel-save", dev, fam, c->cache_dir, NULL};
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    pid_t pid;
    int rc = posix_spawn_file_actions_init(&fa);
    if (rc == 0 && (rc = posix_spawnattr_init(&at)) != 0)
        posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
        close(fd);
        return;
    }
    /* its own session: a Ctrl-C meant for this command does not cut a file short */
    rc = posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSID);
    if (rc == 0)
        rc = posix_spawn_file_actions_adddup2(&fa, fd, 3); /* the lock, held until it exits */
    if (rc == 0)
        rc = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    for (int out = 1; out <= 2 && rc == 0; out++) /* nobody waits for its output */
        rc = posix_spawn_file_actions_addopen(&fa, out, "/dev/null", O_WRONLY, 0);
    if (rc == 0)
        rc = posix_spawn(&pid, "/proc/self/exe", &fa, &at, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    close(fd);
    if (rc == 0)
        memset(c->unsaved, 0, sizeof c->unsaved);
}

int kbuild_saver_main(int argc, char **argv)
{
    if (argc != 4)
        return 2;
    char err[ERR_LEN] = "";
    unsigned families = (unsigned)strtoul(argv[2], NULL, 16);
    ocl_ctx *c = NULL;
    kern *k = NULL;
    int rc = ctx_at(argv[1], argv[3], &c, err);
    if (rc == 0)
        rc = kern_new_for(c, families, &k, err); /* from PoCL's cache: what this run compiled */
    kern_free(k);
    ocl_ctx_free(c); /* saves */
    return rc == 0 ? 0 : 1;
}
