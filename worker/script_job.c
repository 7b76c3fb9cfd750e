/* script_job: a user's own training program as a job (see agent_priv.h).
 *
 * The job folder (dir) is laid out for script/run.h: code/ (the bundle, unpacked), data/ (the
 * dataset, fetched through the worker's dataset cache like a built-in job's, gunzipped when it
 * came gzipped), checkpoint/ (the previous attempt's snapshot, when the lease names one), lib/
 * (the trainyard Python module, so `import trainyard` works in every script), output/, and
 * artifacts/ (what is uploaded at the end). Code bundles are kept by address in
 * <script cache>/code/<sha256>.tar.gz: a worker fetches each bundle once, and the bytes are
 * checked against the address on every use.
 *
 * The run reports through the job's heartbeat thread like the trainer: each line the script
 * prints is a log line, each metrics line an epoch, each checkpoint snapshot a pending
 * checkpoint, uploaded with the epoch it follows (PUT .../checkpoint?epoch=N). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernels/ocl.h"
#include "script/bundle.h"
#include "script/run.h"
#include "script/venv.h"
#include "util/path.h"
#include "util/err.h"
#include "util/writefile.h"
#include "util/json_out.h"
#include "util/names.h"
#include "util/sha256.h"
#include "util/timeutil.h"
#include "worker/agent_priv.h"
#include "train/metrics_csv.h"
#include "train/early_stop.h"
#include "data/fetch.h"
#include "worker/pymodule.h"
#include "worker/rank_env.h"
#include "train/trainer.h"

#define SCRIPT_MAX_CODE_BYTES (256ull << 20) /* a code_url download */
#define SCRIPT_PRIVATE        AGENT_SCRIPT_PRIVATE
#define SCRIPT_ARTIFACTS      SCRIPT_PRIVATE "/artifacts"
#define SCRIPT_MAX_ARTIFACTS  1000   /* the server's cap per job */
#define SCRIPT_STOP_FILE      "stop" /* $TRAINYARD_STOP_FILE (script/run.c) */

/* What the run's hooks need besides the heartbeat. */
typedef struct script_ctx {
    beat *b;
    FILE *log;     /* .trainyard/artifacts/train.log: this attempt's lines */
    double last_t; /* when the script started, then its last epoch (time_mono) */
    /* A graceful end (early stopping on the script's metrics, or the server's stop): the
     * reason is written to <job>/stop ($TRAINYARD_STOP_FILE) for the script to see; one that
     * reports a further epoch after the one it was asked in ends as a cancelled one would
     * (SIGTERM), and the job still succeeds with what output/ holds. */
    const job_spec *job;
    const char *dir;
    early_stop es;
    int last_epoch;     /* the largest epoch the script reported */
    int asked_after;    /* the epoch after which the end was asked (0: not asked) */
    int ending;         /* the script was asked to end */
    int forced;         /* it went on past asked_after + 1: ended with SIGTERM */
    trainer_result end; /* stop_reason, stopped_epoch for the completion */
    char label[32];     /* "[rank N] " before each line of a distributed job's ranks, else "" */
} script_ctx;

static int mkdir_p(const char *path, char *err)
{
    if (mkdir(path, 0700) == 0 || errno == EEXIST)
        return 0;
    return err_set(err, -errno, "cannot create %s: %s", path, strerror(errno));
}

static void hook_script_log(void *user, const char *line)
{
    script_ctx *x = user;
    char labelled[1100];
    if (x->label[0]) {
        snprintf(labelled, sizeof labelled, "%s%s", x->label, line);
        line = labelled;
    }
    agent_hook_log(x->b, line);
    if (x->log)
        fprintf(x->log, "%s\n", line);
}

/* A line of the worker's own in the job's log (and its train.log). */
static void say_job(script_ctx *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void say_job(script_ctx *x, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    hook_script_log(x, line);
}

/* Reads a whole file (malloc'd) into *data, *len; -errno. */
static int read_file(const char *path, char **data, size_t *len, char *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return err_set(err, -errno, "cannot open %s: %s", path, strerror(errno));
    struct stat st;
    int rc = fstat(fileno(f), &st) < 0 ? -errno : 0;
    char *buf = rc == 0 ? malloc((size_t)st.st_size + 1) : NULL;
    if (rc == 0 && !buf)
        rc = -ENOMEM;
    if (rc == 0 && fread(buf, 1, (size_t)st.st_size, f) != (size_t)st.st_size)
        rc = -EIO;
    fclose(f);
    if (rc < 0) {
        free(buf);
        return err_set(err, rc, "cannot read %s: %s", path, strerror(-rc));
    }
    *data = buf;
    *len = (size_t)st.st_size;
    return 0;
}

/* The folder code bundles are kept in: <script cache>/code, made when missing; "" when there
 * is no cache (no HOME and no flag): bundles are then fetched for every job. */
static void code_cache_dir(const agent_opts *o, char *out, size_t cap)
{
    char root[4096];
    out[0] = '\0';
    if (agent_script_cache_dir(o, root, sizeof root) < 0)
        return;
    snprintf(out, cap, "%s/code", root);
    char err[ERR_LEN];
    if (mkdir_p(root, err) < 0 || mkdir_p(out, err) < 0)
        out[0] = '\0';
}

/* The bundle's bytes from the cache when there and intact (1), else 0. */
static int code_from_cache(const char *cache, const char *hex, char **data, size_t *len)
{
    char path[4200], err[ERR_LEN], got[65];
    if (!cache[0])
        return 0;
    snprintf(path, sizeof path, "%s/%s.tar.gz", cache, hex);
    if (read_file(path, data, len, err) < 0)
        return 0;
    sha256_buf_hex(*data, *len, got);
    if (strcmp(got, hex) == 0)
        return 1;
    free(*data);
    unlink(path); /* corrupt: fetched again */
    return 0;
}

static void code_to_cache(const char *cache, const char *hex, const char *data, size_t len)
{
    char path[4200], err[ERR_LEN];
    if (!cache[0])
        return;
    snprintf(path, sizeof path, "%s/%s.tar.gz", cache, hex);
    (void)writefile(path, data, len, err);
}

/* The job's code bundle (a .tar.gz) into *data, *len: from the cache by address, else from
 * the server (the lease's "code") or from code_url. */
static int fetch_code(const agent_opts *o, client *c, script_ctx *x, const json_t *lease,
                      const job_spec *job, const char *dir, char **data, size_t *len, char *err)
{
    char cache[4200], hex[65] = "";
    code_cache_dir(o, cache, sizeof cache);
    const char *want = job->code ? job->code + strlen("sha256:") : job->code_sha256;
    if (want && code_from_cache(cache, want, data, len)) {
        say_job(x, "code sha256:%s from the worker's cache", want);
        return 0;
    }
    int rc;
    if (job->code) {
        const char *path = json_string_value(json_object_get(lease, "code"));
        if (!path)
            return err_set(err, -EPROTO, "the lease of a job with code names no code to fetch");
        char file[4200];
        long status = 0;
        snprintf(file, sizeof file, "%s/" SCRIPT_PRIVATE "/code.tar.gz", dir);
        rc = client_download(c, path, file, &status, err);
        if (rc == 0 && status != 200)
            rc = err_set(err, -EIO, "fetching the code: the server answered %ld", status);
        if (rc == 0)
            rc = read_file(file, data, len, err);
        unlink(file);
    } else {
        fetch_opts fo = {.file_root = o->dataset_root,
                         .max_bytes = SCRIPT_MAX_CODE_BYTES,
                         .low_speed_timeout_s = o->dataset_stall_s,
                         .sha256 = job->code_sha256,
                         .allow = o->dataset_allow,
                         .ca_file = o->dataset_ca,
                         .s3 = o->s3,
                         .keep_gzip = 1,
                         .stop = o->stop};
        fetch_stats st;
        rc = fetch_url(job->code_url, &fo, data, len, &st, err);
        if (rc < 0) {
            char why[ERR_LEN];
            snprintf(why, sizeof why, "%s", err);
            return err_set(err, rc, "fetching code_url: %.400s", why);
        }
    }
    if (rc < 0)
        return rc;
    sha256_buf_hex(*data, *len, hex);
    if (want && strcmp(hex, want) != 0) {
        free(*data);
        return err_set(err, -EBADMSG, "the code's sha256 is %s, not %s", hex, want);
    }
    say_job(x, "code sha256:%s fetched (%zu bytes)", hex, *len);
    code_to_cache(cache, hex, *data, *len);
    return 0;
}

/* The dataset file's name in data/: the URL's last path segment (letters, digits, '.', '_',
 * '-'; else "dataset"), without ".gz" when it arrived gzipped (".tgz" becomes ".tar"). */
static void dataset_name(const char *url, int was_gzip, char *out, size_t cap)
{
    const char *path = strstr(url, "://");
    path = path ? strchr(path + 3, '/') : NULL;
    const char *end = path ? path + strcspn(path, "?#") : NULL;
    const char *base = end;
    while (base && base > path && base[-1] != '/')
        base--;
    size_t n = base ? (size_t)(end - base) : 0;
    int ok = n > 0 && n < cap && base[0] != '.';
    for (size_t i = 0; ok && i < n; i++) {
        char ch = base[i];
        ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
             ch == '.' || ch == '_' || ch == '-';
    }
    if (!ok) {
        snprintf(out, cap, "dataset");
        return;
    }
    snprintf(out, cap, "%.*s", (int)n, base);
    size_t len = strlen(out);
    if (was_gzip && len > 3 && !strcmp(out + len - 3, ".gz"))
        out[len - 3] = '\0';
    else if (was_gzip && len > 4 && !strcmp(out + len - 4, ".tgz"))
        snprintf(out + len - 4, cap - (len - 4), ".tar");
}

/* Fetches the dataset (when the job names one) into dir/data/<name>. */
static int fetch_dataset(const agent_opts *o, script_ctx *x, const job_spec *job, const char *dir,
                         char *err)
{
    if (!job->dataset_url)
        return 0;
    fetch_opts fo = {.file_root = o->dataset_root,
                     .max_bytes = o->max_dataset_bytes,
                     .low_speed_timeout_s = o->dataset_stall_s,
                     .sha256 = job->sha256,
                     .allow = o->dataset_allow,
                     .ca_file = o->dataset_ca,
                     .s3 = o->s3,
                     .stop = o->stop};
    fetch_stats st;
    dscache_result cr;
    char *data = NULL;
    size_t len = 0;
    int rc = dscache_fetch(o->dataset_cache, job->dataset_url, &fo, &data, &len, &st, &cr, err);
    if (cr.note[0])
        say_job(x, "dataset cache: %s", cr.note);
    if (rc < 0)
        return rc;
    if (cr.how == DSCACHE_FETCHED)
        agent_hook_dataset(x->b, st.downloaded);
    char name[256], path[4600];
    dataset_name(job->dataset_url, st.was_gzip, name, sizeof name);
    snprintf(path, sizeof path, "%s/data/%s", dir, name);
    rc = writefile(path, data, len, err);
    free(data);
    if (rc == 0)
        say_job(x, "dataset: %zu bytes%s%s, at $TRAINYARD_DATASET (data/%s)", len,
                st.was_gzip ? " (gunzipped)" : "",
                cr.how != DSCACHE_FETCHED ? " from the cache" : "", name);
    return rc;
}

/* When the lease names a checkpoint (the job's previous attempt uploaded one), unpacks it into
 * dir/checkpoint; one that cannot be had is said and the script starts without it. */
static void fetch_checkpoint(client *c, script_ctx *x, const json_t *lease, const char *dir)
{
    const char *from = json_string_value(json_object_get(lease, "checkpoint"));
    if (!from)
        return;
    char file[4200], into[4200], err[ERR_LEN] = "";
    snprintf(file, sizeof file, "%s/" SCRIPT_PRIVATE "/checkpoint.resume.tar.gz", dir);
    snprintf(into, sizeof into, "%s/checkpoint", dir);
    long status = 0;
    char *data = NULL;
    size_t len = 0;
    bundle_info info = {0};
    int rc = client_download(c, from, file, &status, err);
    if (rc == 0 && status != 200)
        rc = err_set(err, -EIO, "the server answered %ld", status);
    if (rc == 0)
        rc = read_file(file, &data, &len, err);
    if (rc == 0)
        rc = bundle_unpack(data, len, into, NULL, &info, err);
    free(data);
    unlink(file);
    if (rc == 0)
        say_job(x,
                "checkpoint of the previous attempt restored (%llu files) in "
                "$TRAINYARD_CHECKPOINT_DIR",
                (unsigned long long)info.files);
    else
        say_job(x, "cannot restore the previous attempt's checkpoint, starting without it: %s",
                err);
}

/* dir/lib/trainyard/__init__.py: the package's module, embedded at build time. */
static int write_module(const char *dir, char *err)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/lib", dir);
    int rc = mkdir_p(path, err);
    snprintf(path, sizeof path, "%s/lib/trainyard", dir);
    if (rc == 0)
        rc = mkdir_p(path, err);
    snprintf(path, sizeof path, "%s/lib/trainyard/__init__.py", dir);
    if (rc == 0)
        rc = writefile(path, pymodule_init_py, pymodule_init_py_len, err);
    return rc;
}

/* The device's platform index and its index within that platform; -1s when not found. */
static void device_place(const ocl_device *dev, int *platform, int *device)
{
    *platform = *device = -1;
    cl_platform_id plats[16];
    cl_uint np = 0;
    if (clGetPlatformIDs(16, plats, &np) != CL_SUCCESS)
        return;
    for (cl_uint p = 0; p < np && p < 16; p++) {
        if (plats[p] != dev->platform)
            continue;
        cl_device_id ids[64];
        cl_uint nd = 0;
        if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 64, ids, &nd) != CL_SUCCESS)
            return;
        for (cl_uint d = 0; d < nd && d < 64; d++) {
            if (ids[d] == dev->id) {
                *platform = (int)p;
                *device = (int)d;
            }
        }
    }
}

/* CUDA_VISIBLE_DEVICES for the worker's device: an NVIDIA GPU by its UUID ("GPU-xxxxxxxx-...",
 * from cl_khr_device_uuid, NVML or nvidia-smi: kernels/devices.h), else by its place among the
 * platform's devices in PCI order; any other device hides CUDA's GPUs (""), since they belong
 * to other workers. */
static void cuda_visible(const ocl_device *dev, int device, char *out, size_t cap)
{
    out[0] = '\0';
    if (dev->uuid[0])
        snprintf(out, cap, "%s", dev->uuid);
    else if (dev->opencl && strstr(dev->platform_name, "NVIDIA") &&
             (dev->type & CL_DEVICE_TYPE_GPU))
        snprintf(out, cap, "%d", device);
}

/* Asks the script to end after the epoch it is in: why goes into <job>/stop. */
static void script_ask_end(script_ctx *x, const char *why)
{
    if (x->ending)
        return;
    x->ending = 1;
    x->asked_after = x->last_epoch;
    snprintf(x->end.stop_reason, sizeof x->end.stop_reason, "%s", why);
    char path[4200], err[ERR_LEN];
    snprintf(path, sizeof path, "%s/" SCRIPT_STOP_FILE, x->dir);
    if (writefile(path, why, strlen(why), err) < 0)
        say_job(x, "cannot write %s: %s", path, err);
    say_job(x, "%s: asking %s to end after epoch %d (it sees $TRAINYARD_STOP_FILE)", why,
            x->job->script, x->last_epoch + (x->b->stop_asked ? 1 : 0));
}

/* Early stopping on the script's own metrics (any name it reports). */
static void script_judge(script_ctx *x, const json_t *epoch)
{
    const job_early_stopping *cfg = &x->job->early_stopping;
    int e = (int)json_integer_value(json_object_get(epoch, "epoch"));
    if (e > x->last_epoch)
        x->last_epoch = e;
    if (x->ending) {
        if (e > x->asked_after + 1 && !x->forced) {
            x->forced = 1;
            say_job(x, "%s went on past epoch %d: ending it", x->job->script, x->asked_after + 1);
        }
        return;
    }
    if (!cfg->enabled)
        return;
    const json_t *v = json_object_get(epoch, cfg->monitor);
    double value = json_is_number(v) ? json_number_value(v) : NAN;
    if (early_stop_update(&x->es, cfg, e, value) & EARLY_STOP_STOP) {
        char why[TRAINER_STOP_REASON];
        early_stop_reason(&x->es, cfg, why, sizeof why);
        script_ask_end(x, why);
    }
}

/* An epoch the script reported; without "seconds" of its own it gets the time since the
 * previous one (or since the start), as a built-in job's epochs have. */
static void hook_script_metrics(void *user, json_t *epoch)
{
    script_ctx *x = user;
    script_judge(x, epoch);
    double now = time_mono();
    json_t *e = json_object_get(epoch, "seconds") ? json_incref(epoch) : json_deep_copy(epoch);
    if (e && !json_object_get(e, "seconds"))
        json_object_set_new(e, "seconds", json_real(now - x->last_t));
    x->last_t = now;
    if (e)
        agent_queue_epoch(x->b, e);
    json_decref(e);
}

/* A new snapshot of checkpoint/: it becomes the pending checkpoint (a newer one replaces a
 * pending one not sent yet). */
static void hook_script_checkpoint(void *user, const char *tar_gz, int epoch)
{
    script_ctx *x = user;
    beat *b = x->b;
    char pending[4200];
    snprintf(pending, sizeof pending, "%s/" AGENT_CKPT_PENDING, b->dir);
    pthread_mutex_lock(&b->mu);
    if (rename(tar_gz, pending) == 0) {
        b->ckpt_pending = 1;
        b->ckpt_epoch = epoch;
        b->urgent = 1;
        pthread_cond_signal(&b->cv);
    }
    pthread_mutex_unlock(&b->mu);
}

/* Every rank's: a cancel, a lost lease (for a follower also rank 0's end of the job) or the
 * worker's stop ends the script; a stop request reaches it through its stop file. forced follows
 * the metrics, which only rank 0's run reads. */
static int hook_script_stop(void *user)
{
    script_ctx *x = user;
    char why[512];
    if (!x->ending && agent_stop_asked(x->b, why, sizeof why))
        script_ask_end(x, why);
    return x->b->cancel || x->b->lost || *x->b->o->stop || x->forced;
}

int agent_script_cache_dir(const agent_opts *o, char *out, size_t cap)
{
    const char *dir = o->script_cache ? o->script_cache : getenv("TRAINYARD_SCRIPT_CACHE");
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int n;
    if (dir && *dir)
        n = snprintf(out, cap, "%s", dir);
    else if (xdg && *xdg)
        n = snprintf(out, cap, "%s/trainyard/scripts", xdg);
    else if (home && *home)
        n = snprintf(out, cap, "%s/.cache/trainyard/scripts", home);
    else
        return -ENOENT;
    return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

/* The interpreter for .py scripts: --python, or a venv made from code/requirements.txt when
 * the worker allows pip. */
static int pick_python(const agent_opts *o, script_ctx *x, const char *dir, char *python,
                       size_t cap, char *err)
{
    char req[4200], code[4200], root[4096], venvs[4200];
    snprintf(python, cap, "%s", o->python ? o->python : "python3");
    snprintf(req, sizeof req, "%s/code/requirements.txt", dir);
    snprintf(code, sizeof code, "%s/code", dir);
    if (access(req, F_OK) != 0)
        return 0;
    if (!o->allow_pip) {
        say_job(x, "requirements.txt is not installed: this worker runs without --allow-pip");
        return 0;
    }
    if (agent_script_cache_dir(o, root, sizeof root) < 0)
        return err_set(err, -ENOENT, "no folder for venvs: give the worker --script-cache DIR");
    snprintf(venvs, sizeof venvs, "%s/venvs", root);
    int rc = mkdir_p(root, err);
    if (rc == 0)
        rc = mkdir_p(venvs, err);
    char venv_python[4096];
    if (rc == 0)
        rc = script_venv(python, req, code, venvs, !o->no_sandbox, hook_script_log, x, venv_python,
                         sizeof venv_python, err);
    if (rc == 0)
        snprintf(python, cap, "%s", venv_python);
    if (rc == 0)
        say_job(x, "requirements.txt installed: %s", python);
    return rc;
}

/* qsort's comparison of two names. */
static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Moves what the script left in output/ to the artifacts (a folder packed as NAME.tar.gz);
 * names the API cannot take, links and special files are said and left out. The script made
 * every entry here, output/ itself included, and a link it planted would name a file of the
 * worker's: output/ is opened without following a link, its entries looked at with
 * AT_SYMLINK_NOFOLLOW and moved with renameat, and a folder is packed through the descriptor
 * (bundle_pack follows no link below it). */
static int collect_output(script_ctx *x, const char *dir, char *err)
{
    char out[4200], arts[4200];
    snprintf(out, sizeof out, "%s/output", dir);
    snprintf(arts, sizeof arts, "%s/" SCRIPT_ARTIFACTS, dir);
    int fd = open(out, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        if (errno != ENOENT)
            say_job(x, "output is not a folder: nothing of it is uploaded");
        return 0;
    }
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return err_set(err, -errno, "cannot read output/: %s", strerror(errno));
    }
    /* the names first, sorted, so the artifacts' order and the cap do not depend on readdir */
    json_t *names = json_array();
    struct dirent *e;
    while (names && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            json_array_append_new(names, json_string(e->d_name));
    int rc = names ? 0 : err_set(err, -ENOMEM, "out of memory");
    size_t n = json_array_size(names);
    const char **sorted = rc == 0 ? calloc(n + 1, sizeof *sorted) : NULL;
    for (size_t i = 0; sorted && i < n; i++)
        sorted[i] = json_string_value(json_array_get(names, i));
    if (sorted && n > 1)
        qsort(sorted, n, sizeof *sorted, cmp_names);
    if (rc == 0 && !sorted)
        rc = err_set(err, -ENOMEM, "out of memory");
    int kept = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const char *name = sorted[i];
        struct stat st;
        char art[300], to[4700];
        if (fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        snprintf(art, sizeof art, S_ISDIR(st.st_mode) ? "%s.tar.gz" : "%s", name);
        if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) {
            say_job(x, "output/%s is not a file or a folder: not uploaded", name);
        } else if (!name_artifact_ok(art)) {
            say_job(x,
                    "output/%s: an artifact's name is 1 to 128 letters, digits, '.', '_' or "
                    "'-', not starting with '.': not uploaded",
                    name);
        } else if (!strcmp(art, "job.json") || !strcmp(art, "metrics.csv") ||
                   !strcmp(art, "train.log")) {
            say_job(x, "output/%s: the worker writes %s itself: not uploaded", name, art);
        } else if (kept >= SCRIPT_MAX_ARTIFACTS - 3) {
            say_job(x, "output/%s: more than %d artifacts: not uploaded", name,
                    SCRIPT_MAX_ARTIFACTS - 3);
        } else {
            rc = path_join(to, sizeof to, arts, art, err);
            if (rc < 0) {
                break;
            } else if (S_ISDIR(st.st_mode)) {
                char from[4400];
                bundle_info info;
                snprintf(from, sizeof from, "/proc/self/fd/%d/%s", fd, name);
                rc = bundle_pack(from, to, NULL, &info, err);
            } else if (renameat(fd, name, AT_FDCWD, to) < 0) {
                rc = err_set(err, -errno, "cannot move output/%s: %s", name, strerror(errno));
            }
            kept++;
        }
    }
    free(sorted);
    json_decref(names);
    closedir(d);
    return rc;
}

/* Everything before the run: the code unpacked into code/, the dataset into data/, the
 * previous attempt's checkpoint into checkpoint/, the module into lib/, and the interpreter
 * (a venv's when requirements.txt is installed) into python[cap]. */
static int prepare(const agent_opts *o, client *c, script_ctx *x, const json_t *lease,
                   const job_spec *job, const char *dir, bundle_info *info, char *python,
                   size_t cap, char *err)
{
    char *code = NULL;
    size_t code_len = 0;
    int rc = fetch_code(o, c, x, lease, job, dir, &code, &code_len, err);
    if (rc == 0) {
        char into[4200];
        snprintf(into, sizeof into, "%s/code", dir);
        rmdir(into); /* bundle_unpack makes it */
        rc = bundle_unpack(code, code_len, into, NULL, info, err);
        free(code);
    }
    if (rc == 0)
        rc = fetch_dataset(o, x, job, dir, err);
    if (rc < 0)
        return rc;
    fetch_checkpoint(c, x, lease, dir);
    rc = write_module(dir, err);
    if (rc == 0)
        rc = pick_python(o, x, dir, python, cap, err);
    return rc;
}

/* The script's environment besides what script_run adds: the job, the attempt, the
 * hyperparameters and the device. env[] gets pointers into bufs (and *hp, malloc'd). */
typedef struct script_env {
    char job[200], attempt[64], dev[64], plat[64], devi[64], cuda[128];
    char *hp;
    const char *v[8 + RANK_ENV_COUNT];
} script_env;

static int make_env(const agent_opts *o, const json_t *lease, const job_spec *job, script_env *e)
{
    size_t n = 0;
    snprintf(e->job, sizeof e->job, "TRAINYARD_JOB_ID=%s",
             json_string_value(json_object_get(lease, "job_id")));
    snprintf(e->attempt, sizeof e->attempt, "TRAINYARD_ATTEMPT=%lld",
             (long long)json_integer_value(json_object_get(lease, "attempt")));
    e->v[n++] = e->job;
    e->v[n++] = e->attempt;
    size_t hp_len = strlen("TRAINYARD_HYPERPARAMETERS=") + strlen(job->hyperparameters_json) + 1;
    e->hp = malloc(hp_len);
    if (!e->hp)
        return -ENOMEM;
    snprintf(e->hp, hp_len, "TRAINYARD_HYPERPARAMETERS=%s", job->hyperparameters_json);
    e->v[n++] = e->hp;
    const ocl_device *dev = o->device_info;
    if (dev) {
        int plat = -1, devi = -1;
        char visible[100];
        if (dev->opencl)
            device_place(dev, &plat, &devi);
        cuda_visible(dev, devi, visible, sizeof visible);
        snprintf(e->dev, sizeof e->dev, "TRAINYARD_DEVICE=%d", dev->index);
        snprintf(e->plat, sizeof e->plat, "TRAINYARD_OPENCL_PLATFORM=%d", plat);
        snprintf(e->devi, sizeof e->devi, "TRAINYARD_OPENCL_DEVICE=%d", devi);
        snprintf(e->cuda, sizeof e->cuda, "CUDA_VISIBLE_DEVICES=%s", visible);
        e->v[n++] = e->dev;
        e->v[n++] = e->plat;
        e->v[n++] = e->devi;
        e->v[n++] = e->cuda;
    }
    for (size_t i = 0; o->script_rank_env && o->script_rank_env[i] && i < RANK_ENV_COUNT; i++)
        e->v[n++] = o->script_rank_env[i];
    e->v[n] = NULL;
    return 0;
}

int agent_script_run(const agent_opts *o, client *c, beat *b, const json_t *lease,
                     const job_spec *job, const char *dir, int *exit_code, int *stopped,
                     trainer_result *end, char *tail, size_t tail_cap, char *err)
{
    static const char *const subdirs[] = {
        "", "/" SCRIPT_PRIVATE, "/" SCRIPT_ARTIFACTS, "/code", "/data", "/checkpoint"};
    char path[4200], python[4096];
    int rc = 0;
    /* rank 0 (or a job of one) reports; the other ranks of a distributed job only run */
    int lead = o->script_rank == 0;
    agent_script_cleanup(dir); /* what an earlier attempt's script may have left */
    for (size_t i = 0; rc == 0 && i < sizeof subdirs / sizeof subdirs[0]; i++) {
        snprintf(path, sizeof path, "%s%s", dir, subdirs[i]);
        rc = mkdir_p(path, err);
    }
    if (rc < 0)
        return rc;
    snprintf(path, sizeof path, "%s/" SCRIPT_ARTIFACTS "/train.log", dir);
    script_ctx ctx = {.b = b, .log = lead ? fopen(path, "w") : NULL, .job = job, .dir = dir},
               *x = &ctx;
    if (o->script_ranks > 1)
        snprintf(ctx.label, sizeof ctx.label, "[rank %d] ", o->script_rank);
    early_stop_init(&ctx.es, &job->early_stopping);
    script_env env = {.hp = NULL};
    bundle_info info = {0};
    if (lead)
        agent_hook_phase(b, TRAINER_PHASE_DOWNLOADING);
    rc = prepare(o, c, x, lease, job, dir, &info, python, sizeof python, err);
    if (rc == 0 && make_env(o, lease, job, &env) < 0)
        rc = err_set(err, -ENOMEM, "out of memory");
    if (rc < 0)
        goto out;

    script_opts so = {.job_dir = dir,
                      .script = job->script,
                      .python = python,
                      .env = env.v,
                      .sandbox = !o->no_sandbox,
                      .network = o->script_network,
                      .memory_bytes = o->script_memory,
                      .ro_binds = o->script_ro_bind,
                      .grace_s = o->script_grace_s,
                      .checkpoint_poll_s = o->script_checkpoint_poll_s,
                      .netns_holder = o->script_netns};
    /* Only rank 0's metrics and checkpoints count: the other ranks' are the same run's. */
    script_hooks hooks = {.user = x,
                          .on_log = hook_script_log,
                          .on_metrics = lead ? hook_script_metrics : NULL,
                          .on_checkpoint = lead ? hook_script_checkpoint : NULL,
                          .should_stop = hook_script_stop};
    script_result res;
    memset(&res, 0, sizeof res);
    say_job(x, "running %s (code sha256:%s, %llu files)%s%s", job->script,
            job->code ? job->code + strlen("sha256:") : "from code_url",
            (unsigned long long)info.files, o->no_sandbox ? " without a sandbox" : " in bubblewrap",
            o->script_netns > 0 ? ", in the network namespace the job's ranks share" : "");
    if (lead)
        agent_hook_phase(b, TRAINER_PHASE_TRAINING);
    ctx.last_t = time_mono();
    rc = script_run(&so, &hooks, &res, err);
    if (rc == 0) {
        *exit_code = res.exit_code >= 0 ? res.exit_code : -res.signal;
        *stopped = res.stopped;
        snprintf(tail, tail_cap, "%s", res.tail);
        int cancelled = b->cancel || b->lost || *o->stop;
        if (x->ending && !cancelled && (*exit_code == 0 || x->forced)) {
            /* a graceful end: the job succeeds with what output/ holds */
            *exit_code = 0;
            *stopped = 0;
            res.stopped = 0;
            x->end.stopped_epoch = x->last_epoch; /* a script's own count of epochs is its own */
            *end = x->end;
        }
        if (!res.stopped && *exit_code == 0 && lead) {
            agent_hook_phase(b, TRAINER_PHASE_SAVING);
            rc = collect_output(x, dir, err);
        } else if (!res.stopped && *exit_code != 0) {
            say_job(x, "%s ended with %s %d", job->script, *exit_code > 0 ? "status" : "signal",
                    *exit_code > 0 ? *exit_code : -*exit_code);
        }
    }
out:
    if (rc < 0)
        say_job(x, "%s", err);
    free(env.hp);
    if (ctx.log)
        fclose(ctx.log);
    return rc;
}

int agent_script_follow(const agent_opts *o, client *c, const char *worker_id, const json_t *lease,
                        const job_spec *job, char *err)
{
    const char *job_id = json_string_value(json_object_get(lease, "job_id"));
    char prefix[512], dir[4096], private_dir[4200], name[200];
    snprintf(prefix, sizeof prefix, "/workers/%s/jobs/%s", worker_id, job_id);
    snprintf(name, sizeof name, "%s.rank%d", job_id, o->script_rank);
    int rc = path_join(dir, sizeof dir, o->work_dir, name, err);
    if (rc < 0)
        return rc;
    snprintf(private_dir, sizeof private_dir, "%s/" SCRIPT_PRIVATE, dir);
    beat b;
    rc = agent_beat_start(&b, o, prefix, private_dir, 1, err);
    int exit_code = 0, stopped = 0;
    trainer_result end = {0};
    char tail[2048] = "";
    if (rc == 0)
        rc = agent_script_run(o, c, &b, lease, job, dir, &exit_code, &stopped, &end, tail,
                              sizeof tail, err);
    agent_beat_free(&b); /* its last heartbeats carry this rank's last lines */
    agent_script_cleanup(dir);
    /* Stopped by the job's end or cancel, or the worker's stop: rank 0 says how the job ended. */
    if (rc == 0 && (stopped || exit_code == 0))
        return 0;
    if (rc == 0) {
        agent_script_ended(job, exit_code, tail, err, ERR_LEN);
        rc = -EIO;
    }
    return rc;
}

void agent_script_ended(const job_spec *job, int exit_code, const char *tail, char *out, size_t cap)
{
    if (exit_code > 0)
        snprintf(out, cap, "%s exited with status %d; its last lines:\n%s", job->script, exit_code,
                 tail);
    else
        snprintf(out, cap, "%s was killed by signal %d (%s); its last lines:\n%s", job->script,
                 -exit_code, strsignal(-exit_code), tail);
}

/* dir/artifacts/metrics.csv from the server's metrics of the job (every attempt's epochs):
 * epoch, then every metric name in the order first seen. */
static int write_metrics_csv(client *c, const char *prefix, const char *path, char *err)
{
    char url[1100];
    long status = 0;
    json_t *reply = NULL;
    snprintf(url, sizeof url, "%s/metrics", prefix);
    int rc = client_get_json(c, url, &status, &reply, err);
    /* a server that is away (restarting) is waited for a while, as uploads are */
    for (int i = 0; i < 60 && (rc < 0 || status == 502 || status == 503 || status == 504); i++) {
        json_decref(reply);
        reply = NULL;
        sleep(1);
        rc = client_get_json(c, url, &status, &reply, err);
    }
    if (rc == 0 && status != 200)
        rc = err_set(err, -EIO, "reading the job's metrics: the server answered %ld", status);
    json_t *epochs = json_object_get(reply, "epochs");
    json_t *cols = json_array();
    size_t i;
    json_t *e;
    json_array_foreach (epochs, i, e) {
        const char *key;
        json_t *v;
        json_object_foreach (e, key, v) {
            int have = !strcmp(key, "epoch");
            for (size_t k = 0; !have && k < json_array_size(cols); k++)
                have = !strcmp(json_string_value(json_array_get(cols, k)), key);
            if (!have)
                json_array_append_new(cols, json_string(key));
        }
    }
    const char **names = rc == 0 ? calloc(json_array_size(cols) + 1, sizeof *names) : NULL;
    if (rc == 0 && !names)
        rc = err_set(err, -ENOMEM, "out of memory");
    metrics_csv *w = NULL;
    if (rc == 0) {
        names[0] = "epoch";
        for (size_t k = 0; k < json_array_size(cols); k++)
            names[k + 1] = json_string_value(json_array_get(cols, k));
        rc = metrics_csv_open(path, names, json_array_size(cols) + 1, &w, err);
    }
    if (rc == 0) {
        json_array_foreach (epochs, i, e)
            metrics_csv_row(w, e);
        rc = metrics_csv_close(w, err);
    }
    free(names);
    json_decref(cols);
    json_decref(reply);
    return rc;
}

int agent_script_upload(const agent_opts *o, client *c, const char *prefix, const job_spec *job,
                        const char *dir, char *err)
{
    char arts[4200], path[4600];
    snprintf(arts, sizeof arts, "%s/" SCRIPT_ARTIFACTS, dir);
    snprintf(path, sizeof path, "%s/job.json", arts);
    json_t *doc = job_to_json(job);
    int rc = doc ? json_out_dump_file(doc, path, JSON_INDENT(2)) : -ENOMEM;
    json_decref(doc);
    if (rc < 0)
        return err_set(err, rc, "cannot write job.json");
    snprintf(path, sizeof path, "%s/metrics.csv", arts);
    rc = write_metrics_csv(c, prefix, path, err);
    if (rc < 0)
        return rc;
    struct dirent **list = NULL;
    int n = scandir(arts, &list, NULL, alphasort);
    if (n < 0)
        return err_set(err, -errno, "cannot read %s: %s", arts, strerror(errno));
    for (int i = 0; i < n; i++) {
        const char *name = list[i]->d_name;
        if (rc == 0 && name[0] != '.') {
            rc = path_join(path, sizeof path, arts, name, err);
            if (rc == 0)
                rc = agent_upload(o, c, prefix, name, path, err);
        }
        free(list[i]);
    }
    free(list);
    return rc;
}

/* Removes path and everything under it, not following links. */
static void remove_tree(const char *path)
{
    struct stat st;
    if (lstat(path, &st) < 0)
        return;
    if (S_ISDIR(st.st_mode)) {
        /* the script may have left folders it cannot be read from: let the owner in again */
        chmod(path, 0700);
        DIR *d = opendir(path);
        struct dirent *e;
        while (d && (e = readdir(d))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                continue;
            char sub[4200];
            if (path_join(sub, sizeof sub, path, e->d_name, NULL) == 0)
                remove_tree(sub);
        }
        if (d)
            closedir(d);
        rmdir(path);
    } else {
        unlink(path);
    }
}

void agent_script_cleanup(const char *dir)
{
    remove_tree(dir);
}
