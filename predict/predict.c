/* predict: the serving engine of predict.h: one thread that owns the OpenCL device, a queue of
 * requests, dynamic batching and an LRU of device copies under a byte cap.
 *
 * Threads. Callers (any thread) read model files (load.c) and queue requests under e->mu; the
 * engine thread does every OpenCL call: it opens the device, then loops: wait for a request;
 * pick the oldest; if the device was idle and that model has fewer than max_batch rows queued,
 * wait up to window_us for more; gather up to max_batch rows of that model in queue order;
 * make sure the model is on the device (evicting least recently used ones to stay under the
 * cap); run ONE forward of exactly max_batch rows (the rest zero); turn logits into answers;
 * finish the requests whose rows are all answered (done = 1, then notify).
 *
 * Invariants:
 * - every forward of a model has the shape max_batch × inputs, so a row's answer is the same
 *   bits whatever shares its batch (kernels plan by shape; no inference layer mixes rows);
 * - a request is in the queue while some of its rows are not yet in a forward (`taken` < n);
 *   one served in part moves to the tail, so models with queued work take turns;
 * - m->queued is the sum of n − taken over m's queued requests;
 * - the engine holds one reference to each request from submit to its finish, and one to each
 *   model in its table; after an eviction the table lets go of the models no caller holds
 *   and that are not on the device (the next get reads the file again), the rest stay until
 *   predict_engine_free();
 * - a model is evicted only if it is not the one being loaded; those without queued rows go
 *   first, least recently used first (so a cap that fits one model still serves two, in turns).
 *
 * Counters and the table are under e->mu; device pointers of models belong to the thread. */
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "predict/predict_priv.h"
#include "util/array.h"
#include "util/err.h"

#define ENGINE_BATCH_DEFAULT  32
#define ENGINE_BATCH_MAX      1024
#define ENGINE_WINDOW_DEFAULT 250
#define ENGINE_WINDOW_MAX     100000
#define ENGINE_CAP_DEFAULT    ((uint64_t)1 << 30)

enum { DEV_OPENING = 0, DEV_READY = 1, DEV_FAILED = 2 };

struct predict_req {
    atomic_int refs;
    atomic_int done;
    predict_model *m;
    float *rows, *out; /* n × inputs and n × outputs */
    size_t n, taken;   /* rows put in forwards so far (e->mu) */
    int rc;            /* written before done */
    char err[ERR_LEN]; /* likewise */
    void (*notify)(void *arg);
    void *arg;
    struct predict_req *next; /* the queue (e->mu) */
};

struct predict_engine {
    pthread_mutex_t mu;
    pthread_cond_t wake;  /* the engine thread: a request, or stop (CLOCK_MONOTONIC) */
    pthread_cond_t ready; /* callers waiting for the device to open */
    pthread_t thread;
    char want[64]; /* the device asked for */
    uint64_t cap;
    int max_batch, window_us;
    void (*log)(void *user, const char *line);
    void *log_user;
    int dev_state; /* DEV_*; e->mu */
    int dev_rc;
    char dev_err[ERR_LEN], dev_name[128];
    int stopping;
    int joined;      /* predict_engine_stop joined the thread (or is joining it) */
    int open_wanted; /* a caller waits for the device (e->mu) */
    ocl_ctx *c;      /* the engine thread's, but k is read by callers once ready (immutable) */
    kern *k;
    predict_model *models;    /* the table */
    predict_req *head, *tail; /* the queue, oldest first */
    predict_stats st;
    /* the engine thread alone */
    uint64_t tick;
    float *xin, *yout; /* staging for one forward */
    size_t xin_cap, yout_cap;
};

/* One request's part of a forward. */
typedef struct segment {
    predict_req *q;
    size_t off, n; /* rows off..off+n of the request */
} segment;

static void say(predict_engine *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void say(predict_engine *e, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (e->log)
        e->log(e->log_user, line);
    else
        fprintf(stderr, "predict: %s\n", line);
}

/* ---- the queue (e->mu held) ---------------------------------------------------------------- */

static void queue_append(predict_engine *e, predict_req *q)
{
    q->next = NULL;
    if (e->tail)
        e->tail->next = q;
    else
        e->head = q;
    e->tail = q;
}

/* Unlinks q, whose predecessor is prev (NULL at the head). */
static void queue_unlink(predict_engine *e, predict_req *prev, predict_req *q)
{
    if (prev)
        prev->next = q->next;
    else
        e->head = q->next;
    if (e->tail == q)
        e->tail = prev;
    q->next = NULL;
}

/* Takes up to max_batch rows of m from the queue in order into segs; returns their count. */
static size_t gather(predict_engine *e, predict_model *m, segment *segs, size_t *n_segs)
{
    size_t rows = 0, cap = (size_t)e->max_batch;
    predict_req *prev = NULL, *q = e->head;
    *n_segs = 0;
    while (q && rows < cap) {
        predict_req *next = q->next;
        if (q->m != m) {
            prev = q;
            q = next;
            continue;
        }
        size_t take = q->n - q->taken < cap - rows ? q->n - q->taken : cap - rows;
        segs[(*n_segs)++] = (segment){q, q->taken, take};
        q->taken += take;
        rows += take;
        m->queued -= take;
        queue_unlink(e, prev, q);
        if (q->taken < q->n) {
            queue_append(e, q); /* served in part: the others' turn first */
            break;
        }
        q = next;
    }
    return rows;
}

/* ---- requests ------------------------------------------------------------------------------ */

static void req_free(predict_req *q)
{
    predict_model_put(q->m);
    free(q->rows);
    free(q->out);
    free(q);
}

void predict_req_release(predict_req *q)
{
    if (q && atomic_fetch_sub(&q->refs, 1) == 1)
        req_free(q);
}

int predict_req_done(const predict_req *q)
{
    return atomic_load(&((predict_req *)q)->done);
}

int predict_req_result(const predict_req *q, const float **out, char *err)
{
    if (!predict_req_done(q))
        return err_set(err, -EAGAIN, "the request has not finished");
    if (q->rc < 0) {
        if (err)
            snprintf(err, ERR_LEN, "%s", q->err);
        return q->rc;
    }
    *out = q->out;
    return 0;
}

/* Marks q finished (with rc and its sentence when rc < 0), notifies and drops the engine's
 * reference. Called without e->mu. */
static void req_finish(predict_req *q)
{
    atomic_store(&q->done, 1);
    if (q->notify)
        q->notify(q->arg);
    predict_req_release(q);
}

/* Fails every queued request with rc (e->mu held); they go on the list at *done. */
static void queue_fail_all(predict_engine *e, int rc, const char *why, predict_req **done)
{
    while (e->head) {
        predict_req *q = e->head;
        queue_unlink(e, NULL, q);
        q->m->queued -= q->n - q->taken;
        q->taken = q->n;
        q->rc = rc;
        snprintf(q->err, sizeof q->err, "%s", why);
        q->next = *done;
        *done = q;
    }
}

static void finish_list(predict_req *done)
{
    while (done) {
        predict_req *next = done->next;
        req_finish(done);
        done = next;
    }
}

/* ---- the device ---------------------------------------------------------------------------- */

static int device_open(predict_engine *e, char *err)
{
    ocl_device dev;
    int rc;
    char *end = NULL;
    long index = strtol(e->want, &end, 10);
    if (end != e->want && *end == '\0') {
        ocl_device *all = NULL;
        size_t n = 0;
        rc = ocl_devices_list(&all, &n, err);
        if (rc == 0 && (index < 0 || (size_t)index >= n))
            rc = err_set(err, -ENODEV, "there is no OpenCL device %ld (this machine has %zu)",
                         index, n);
        if (rc == 0)
            dev = all[index];
        free(all);
    } else {
        rc = ocl_device_pick(e->want, &dev, err);
    }
    if (rc == 0)
        rc = ocl_ctx_new(&dev, NULL, &e->c, err);
    if (rc == 0)
        rc = kern_new_for(e->c,
                          KERN_FAM_GEMM | KERN_FAM_ACTIVATION | KERN_FAM_CONV | KERN_FAM_POOL |
                              KERN_FAM_BATCHNORM,
                          &e->k, err);
    return rc;
}

/* The least recently used loaded model other than m, preferring those without queued rows. */
static predict_model *victim(predict_engine *e, const predict_model *m)
{
    predict_model *best = NULL;
    pthread_mutex_lock(&e->mu);
    for (predict_model *o = e->models; o; o = o->next) {
        if (o == m || !o->dev)
            continue;
        int better = !best || (!o->queued && best->queued) ||
                     (!o->queued == !best->queued && o->used < best->used);
        if (better)
            best = o;
    }
    pthread_mutex_unlock(&e->mu);
    return best;
}

/* Drops from the table the models nobody holds (the table's reference alone) and that have no
 * device copy: host memory stays bounded by what is loaded or held. A get under the mutex is
 * the only way to a new reference, so refs == 1 there cannot grow behind our back. */
static void table_prune(predict_engine *e)
{
    predict_model *gone = NULL, **at = &e->models;
    pthread_mutex_lock(&e->mu);
    while (*at) {
        predict_model *m = *at;
        if (atomic_load(&m->refs) == 1 && !m->dev) {
            *at = m->next;
            m->next = gone;
            gone = m;
        } else {
            at = &m->next;
        }
    }
    pthread_mutex_unlock(&e->mu);
    while (gone) {
        predict_model *next = gone->next;
        predict_model_put(gone);
        gone = next;
    }
}

/* m on the device, within the cap. */
static int ensure_loaded(predict_engine *e, predict_model *m, char *err)
{
    m->used = ++e->tick;
    if (m->dev)
        return 0;
    uint64_t need = m->info.device_bytes;
    for (;;) {
        pthread_mutex_lock(&e->mu);
        int over = e->st.loaded_bytes + need > e->cap;
        pthread_mutex_unlock(&e->mu);
        predict_model *v = over ? victim(e, m) : NULL;
        if (!v)
            break;
        predict_model_unload(v);
        pthread_mutex_lock(&e->mu);
        e->st.loaded_bytes -= v->info.device_bytes;
        e->st.loaded--;
        e->st.evictions++;
        pthread_mutex_unlock(&e->mu);
        say(e, "model %s evicted from the device (%.2f MiB)", v->key,
            (double)v->info.device_bytes / (1 << 20));
        table_prune(e);
    }
    int rc = predict_model_upload(m, e->c, e->k, e->max_batch, err);
    if (rc < 0)
        return rc;
    pthread_mutex_lock(&e->mu);
    e->st.loaded_bytes += need;
    e->st.loaded++;
    e->st.loads++;
    pthread_mutex_unlock(&e->mu);
    say(e, "model %s loaded onto %s (%.2f MiB, batches of %d rows)", m->key, e->dev_name,
        (double)need / (1 << 20), e->max_batch);
    return 0;
}

/* Grows a staging array to hold n floats. */
static int staging(float **p, size_t *cap, size_t n, char *err)
{
    if (n > *cap && ARRAY_RESIZE(*p, *cap, n) < 0) /* exactly: batches have one size */
        return err_set(err, -ENOMEM, "out of memory for a batch of %zu floats", n);
    return 0;
}

/* One forward of m over the segments' rows (rows in all), answers into the requests. */
static int run_forward(predict_engine *e, predict_model *m, const segment *segs, size_t n_segs,
                       size_t rows, char *err)
{
    size_t cap = (size_t)e->max_batch, in = (size_t)m->info.inputs;
    size_t outs = (size_t)m->info.outputs;
    int rc = ensure_loaded(e, m, err);
    if (rc == 0)
        rc = staging(&e->xin, &e->xin_cap, cap * in, err);
    if (rc == 0)
        rc = staging(&e->yout, &e->yout_cap, cap * outs, err);
    if (rc < 0)
        return rc;
    size_t at = 0;
    for (size_t i = 0; i < n_segs; i++) {
        memcpy(e->xin + at * in, segs[i].q->rows + segs[i].off * in,
               segs[i].n * in * sizeof(float));
        at += segs[i].n;
    }
    memset(e->xin + rows * in, 0, (cap - rows) * in * sizeof(float));
    cl_mem y;
    rc = ocl_write(e->c, m->x, 0, cap * in * sizeof(float), e->xin, err);
    if (rc == 0)
        rc = model_forward(m->dev, (int)cap, m->x, &y, err);
    if (rc == 0)
        rc = ocl_read(e->c, y, 0, rows * outs * sizeof(float), e->yout, err);
    if (rc < 0)
        return rc;
    at = 0;
    for (size_t i = 0; i < n_segs; i++) {
        for (size_t r = 0; r < segs[i].n; r++, at++) {
            float *row = e->yout + at * outs;
            model_row_probabilities(m->loss, row, (int)outs);
            memcpy(segs[i].q->out + (segs[i].off + r) * outs, row, outs * sizeof *row);
        }
    }
    return 0;
}

/* After a forward (rc): requests whose rows are all answered, or that failed, are finished. */
static void forward_done(predict_engine *e, const segment *segs, size_t n_segs, int rc,
                         const char *why)
{
    predict_req *done = NULL;
    pthread_mutex_lock(&e->mu);
    e->st.forwards++;
    for (size_t i = 0; i < n_segs; i++) {
        predict_req *q = segs[i].q;
        if (rc < 0 && q->rc == 0) {
            q->rc = rc;
            snprintf(q->err, sizeof q->err, "%s", why);
            if (q->taken < q->n) { /* still queued: its other rows are not run */
                predict_req *prev = NULL;
                for (predict_req *p = e->head; p && p != q; p = p->next)
                    prev = p;
                queue_unlink(e, prev, q);
                q->m->queued -= q->n - q->taken;
                q->taken = q->n;
            }
        }
        if (q->taken == q->n) { /* a request has one segment per forward at most */
            q->next = done;
            done = q;
        }
    }
    pthread_mutex_unlock(&e->mu);
    finish_list(done);
}

static void window_wait(predict_engine *e, const predict_model *m)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    long ns = t.tv_nsec + (long)e->window_us * 1000L;
    t.tv_sec += ns / 1000000000L;
    t.tv_nsec = ns % 1000000000L;
    while (!e->stopping && m->queued < (size_t)e->max_batch)
        if (pthread_cond_timedwait(&e->wake, &e->mu, &t) != 0)
            break;
}

static void *engine_main(void *arg)
{
    predict_engine *e = arg;
    char err[ERR_LEN] = "";
    /* The device opens at the first use (a request, or a conv model's size asked for): a serve
     * that never predicts holds no second OpenCL context, no PoCL threads, no compiled kernels. */
    pthread_mutex_lock(&e->mu);
    while (!e->stopping && !e->head && !e->open_wanted)
        pthread_cond_wait(&e->wake, &e->mu);
    int never = e->stopping && !e->head && !e->open_wanted;
    pthread_mutex_unlock(&e->mu);
    int rc =
        never ? err_set(err, -ECANCELED, "the prediction engine is stopping") : device_open(e, err);
    pthread_mutex_lock(&e->mu);
    if (rc < 0) {
        e->dev_state = DEV_FAILED;
        e->dev_rc = rc;
        snprintf(e->dev_err, sizeof e->dev_err, "%s", err);
    } else {
        e->dev_state = DEV_READY;
        snprintf(e->dev_name, sizeof e->dev_name, "%s", e->c->dev.name);
    }
    pthread_cond_broadcast(&e->ready);
    pthread_mutex_unlock(&e->mu);
    if (rc < 0) {
        if (!never)
            say(e, "the device could not be opened: %s", err);
    } else
        say(e, "device: %s (%s), kernels %s in %.2f s", e->c->dev.name, ocl_device_kind(&e->c->dev),
            e->c->from_cache ? "from the cache" : "compiled", e->c->build_seconds);
    segment *segs = malloc((size_t)e->max_batch * sizeof *segs);
    for (;;) {
        predict_req *done = NULL;
        int idle = 0;
        pthread_mutex_lock(&e->mu);
        while (!e->stopping && !e->head) {
            idle = 1;
            pthread_cond_wait(&e->wake, &e->mu);
        }
        if (e->stopping) {
            pthread_mutex_unlock(&e->mu);
            break;
        }
        if (e->dev_state == DEV_FAILED || !segs) {
            queue_fail_all(e, segs ? e->dev_rc : -ENOMEM, segs ? e->dev_err : "out of memory",
                           &done);
            pthread_mutex_unlock(&e->mu);
            finish_list(done);
            continue;
        }
        predict_model *m = e->head->m;
        if (idle && e->max_batch > 1 && e->window_us > 0 && m->queued < (size_t)e->max_batch)
            window_wait(e, m);
        if (e->stopping) {
            pthread_mutex_unlock(&e->mu);
            break;
        }
        size_t n_segs, rows = gather(e, m, segs, &n_segs);
        pthread_mutex_unlock(&e->mu);
        err[0] = '\0';
        rc = run_forward(e, m, segs, n_segs, rows, err);
        if (rc < 0)
            say(e, "a forward of model %s failed: %s", m->key, err);
        forward_done(e, segs, n_segs, rc, err);
    }
    free(segs);
    /* Stopping: the queued requests are cancelled, the device copies and the device freed. */
    predict_req *done = NULL;
    pthread_mutex_lock(&e->mu);
    queue_fail_all(e, -ECANCELED, "the prediction engine is stopping", &done);
    pthread_mutex_unlock(&e->mu);
    finish_list(done);
    pthread_mutex_lock(&e->mu);
    for (predict_model *m = e->models; m; m = m->next)
        predict_model_unload(m);
    /* a caller in predict_model_get from now on finds the device gone, not a freed kern */
    e->dev_state = DEV_FAILED;
    e->dev_rc = -ECANCELED;
    snprintf(e->dev_err, sizeof e->dev_err, "the prediction engine is stopping");
    pthread_mutex_unlock(&e->mu);
    kern_free(e->k);
    e->k = NULL;
    ocl_ctx_free(e->c);
    e->c = NULL;
    return NULL;
}

/* ---- the API ------------------------------------------------------------------------------- */

int predict_engine_new(const predict_opts *o, predict_engine **out, char *err)
{
    predict_opts d = {0};
    d.window_us = -1;
    if (!o)
        o = &d;
    const char *want = o->device ? o->device : "any";
    int batch = o->max_batch ? o->max_batch : ENGINE_BATCH_DEFAULT;
    int window = o->window_us == -1 ? ENGINE_WINDOW_DEFAULT : o->window_us;
    char *end = NULL;
    long index = strtol(want, &end, 10);
    int named = !strcmp(want, "any") || !strcmp(want, "gpu") || !strcmp(want, "cpu");
    if (!named && (end == want || *end != '\0' || index < 0 || strlen(want) >= 64))
        return err_set(err, -EINVAL, "device must be any, gpu, cpu or a device index, not '%s'",
                       want);
    if (batch < 1 || batch > ENGINE_BATCH_MAX)
        return err_set(err, -EINVAL, "max_batch must be 1..%d", ENGINE_BATCH_MAX);
    if (window < 0 || window > ENGINE_WINDOW_MAX)
        return err_set(err, -EINVAL, "window_us must be 0..%d", ENGINE_WINDOW_MAX);
    predict_engine *e = calloc(1, sizeof *e);
    if (!e)
        return err_set(err, -ENOMEM, "out of memory");
    snprintf(e->want, sizeof e->want, "%s", want);
    e->cap = o->memory_cap ? o->memory_cap : ENGINE_CAP_DEFAULT;
    e->max_batch = batch;
    e->window_us = window;
    e->log = o->log;
    e->log_user = o->log_user;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->wake, &ca);
    pthread_cond_init(&e->ready, NULL);
    pthread_condattr_destroy(&ca);
    int prc = pthread_create(&e->thread, NULL, engine_main, e);
    if (prc != 0) {
        pthread_mutex_destroy(&e->mu);
        pthread_cond_destroy(&e->wake);
        pthread_cond_destroy(&e->ready);
        free(e);
        return err_set(err, -prc, "cannot start the prediction engine's thread: %s", strerror(prc));
    }
    *out = e;
    return 0;
}

void predict_engine_stop(predict_engine *e)
{
    if (!e)
        return;
    pthread_mutex_lock(&e->mu);
    int joined = e->joined;
    e->stopping = 1;
    e->joined = 1;
    pthread_cond_broadcast(&e->wake);
    pthread_mutex_unlock(&e->mu);
    if (!joined)
        pthread_join(e->thread, NULL);
}

void predict_engine_free(predict_engine *e)
{
    if (!e)
        return;
    predict_engine_stop(e);
    predict_model *m = e->models;
    while (m) {
        predict_model *next = m->next;
        m->next = NULL;
        predict_model_put(m);
        m = next;
    }
    free(e->xin);
    free(e->yout);
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->wake);
    pthread_cond_destroy(&e->ready);
    free(e);
}

void predict_engine_stats(predict_engine *e, predict_stats *s)
{
    pthread_mutex_lock(&e->mu);
    *s = e->st;
    pthread_mutex_unlock(&e->mu);
}

int predict_engine_device(predict_engine *e, char *name, size_t cap, char *err)
{
    pthread_mutex_lock(&e->mu);
    int rc = e->dev_state == DEV_FAILED ? e->dev_rc : 0;
    if (cap)
        snprintf(name, cap, "%s", e->dev_state == DEV_READY ? e->dev_name : "");
    if (rc < 0 && err)
        snprintf(err, ERR_LEN, "%s", e->dev_err);
    pthread_mutex_unlock(&e->mu);
    return rc;
}

/* The model under key in the table with a new reference, or NULL (e->mu held). */
static predict_model *table_find(predict_engine *e, const char *key)
{
    for (predict_model *m = e->models; m; m = m->next)
        if (!strcmp(m->key, key)) {
            atomic_fetch_add(&m->refs, 1);
            return m;
        }
    return NULL;
}

static int has_conv(const job_spec *job)
{
    for (size_t i = 0; i < job->n_layers; i++)
        if (job->layers[i].type == JOB_LAYER_CONV2D)
            return 1;
    return 0;
}

/* device_bytes of m at the engine's batch: the model and its input rows. A conv layer's
 * workspace depends on the device's conv path, so those wait for the device to be open (the
 * kern is not changed after it is made: reading its plan from here is safe). */
static int device_bytes(predict_engine *e, predict_model *m, char *err)
{
    kern *k = NULL;
    if (has_conv(m->job)) {
        pthread_mutex_lock(&e->mu);
        if (e->dev_state == DEV_OPENING && !e->open_wanted) {
            e->open_wanted = 1;
            pthread_cond_broadcast(&e->wake);
        }
        while (e->dev_state == DEV_OPENING)
            pthread_cond_wait(&e->ready, &e->mu);
        int rc = e->dev_state == DEV_FAILED ? e->dev_rc : 0;
        if (rc < 0)
            err_set(err, rc, "%s", e->dev_err);
        k = e->k;
        pthread_mutex_unlock(&e->mu);
        if (rc < 0)
            return rc;
    }
    const predict_info *in = &m->info;
    uint64_t bytes = model_device_bytes_inference(k, m->job, in->inputs, in->outputs, e->max_batch);
    if (bytes == 0)
        return err_set(err, -EINVAL, "the model's layers do not fit its input");
    m->info.device_bytes = bytes + (uint64_t)e->max_batch * (uint64_t)in->inputs * 4;
    if (m->info.device_bytes > e->cap)
        return err_set(err, -E2BIG,
                       "the model needs %.1f MiB of device memory for batches of %d rows, more "
                       "than the %.1f MiB all models may take together",
                       (double)m->info.device_bytes / (1 << 20), e->max_batch,
                       (double)e->cap / (1 << 20));
    return 0;
}

int predict_model_get(predict_engine *e, const char *key, const char *path, predict_model **out,
                      char *err)
{
    pthread_mutex_lock(&e->mu);
    int stopping = e->stopping;
    predict_model *m = stopping ? NULL : table_find(e, key);
    pthread_mutex_unlock(&e->mu);
    if (stopping)
        return err_set(err, -ECANCELED, "the prediction engine is stopping");
    if (m) {
        *out = m;
        return 0;
    }
    int rc = predict_model_read(key, path, &m, err);
    if (rc == 0)
        rc = device_bytes(e, m, err);
    if (rc < 0) {
        predict_model_destroy(m);
        return rc;
    }
    pthread_mutex_lock(&e->mu);
    predict_model *other = table_find(e, key); /* read by another caller meanwhile */
    if (!other) {
        atomic_fetch_add(&m->refs, 1); /* the table's */
        m->next = e->models;
        e->models = m;
    }
    pthread_mutex_unlock(&e->mu);
    if (other) {
        predict_model_destroy(m);
        m = other;
    }
    *out = m;
    return 0;
}

const predict_info *predict_model_info(const predict_model *m)
{
    return &m->info;
}

void predict_model_put(predict_model *m)
{
    if (m && atomic_fetch_sub(&m->refs, 1) == 1)
        predict_model_destroy(m);
}

int predict_submit(predict_engine *e, predict_model *m, const float *rows, size_t n,
                   void (*notify)(void *arg), void *arg, predict_req **out, char *err)
{
    size_t in = (size_t)m->info.inputs, outs = (size_t)m->info.outputs;
    if (n < 1 || !rows || n > SIZE_MAX / sizeof(float) / (in > outs ? in : outs))
        return err_set(err, -EINVAL, "a request needs 1 or more rows");
    predict_req *q = calloc(1, sizeof *q);
    if (q) {
        q->rows = malloc(n * in * sizeof *q->rows);
        q->out = malloc(n * outs * sizeof *q->out);
    }
    if (!q || !q->rows || !q->out) {
        if (q) {
            free(q->rows);
            free(q->out);
        }
        free(q);
        return err_set(err, -ENOMEM, "out of memory for a request of %zu rows", n);
    }
    memcpy(q->rows, rows, n * in * sizeof *q->rows);
    q->n = n;
    q->notify = notify;
    q->arg = arg;
    q->m = m;
    atomic_init(&q->refs, 2); /* the caller's and the engine's */
    atomic_init(&q->done, 0);
    pthread_mutex_lock(&e->mu);
    if (e->stopping) {
        pthread_mutex_unlock(&e->mu);
        free(q->rows);
        free(q->out);
        free(q);
        return err_set(err, -ECANCELED, "the prediction engine is stopping");
    }
    atomic_fetch_add(&m->refs, 1);
    queue_append(e, q);
    m->queued += n;
    e->st.requests++;
    e->st.rows += n;
    pthread_cond_signal(&e->wake);
    pthread_mutex_unlock(&e->mu);
    *out = q;
    return 0;
}
