/* sweep: the sweep controller and the leaderboard (see sweep.h). */
#include "scheduler/sweep.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "db/events.h"
#include "job/job.h"
#include "scheduler/asha.h"
#include "scheduler/lifecycle.h"
#include "scheduler/notify.h"
#include "util/array.h"
#include "util/json_out.h"
#include "util/timeutil.h"

/* ---- reading a sweep's trials ------------------------------------------------------------ */

typedef struct sweep_read {
    const sweep_spec *spec;
    sweep_board *b;
    size_t cap;
    int failed;
} sweep_read;

static int sweep_trial_row(void *ctx, const db_sweep_trial *t)
{
    sweep_read *r = ctx;
    sweep_board *b = r->b;
    int rc = ARRAY_GROW(b->entries, r->cap, b->n + 1, ARRAY_NO_MAX); /* rows of our database */
    if (rc < 0)
        return rc;
    sweep_entry *e = &b->entries[b->n];
    memset(e, 0, sizeof *e);
    e->seq = t->seq;
    snprintf(e->id, sizeof e->id, "%s", t->id);
    snprintf(e->name, sizeof e->name, "%s", t->name);
    e->status = t->status;
    e->value = NAN;
    e->epochs_run = t->epochs;
    e->stop_requested = t->stop_requested;
    json_t *doc = json_loads(t->document, 0, NULL);
    e->parameters = doc ? sweep_trial_params(r->spec, doc) : json_object();
    json_decref(doc);
    if (t->stop_reason && !(e->stop_reason = strdup(t->stop_reason)))
        e->parameters = (json_decref(e->parameters), NULL);
    if (!e->parameters) {
        free(e->stop_reason);
        return -ENOMEM;
    }
    b->n++;
    switch (t->status) {
    case DB_QUEUED:
        b->queued++;
        break;
    case DB_RUNNING:
        b->running++;
        break;
    case DB_SUCCEEDED:
        b->succeeded++;
        break;
    case DB_FAILED:
        b->failed++;
        break;
    default:
        b->cancelled++;
        break;
    }
    b->stopped_early += t->stop_reason != NULL; /* ASHA's, early stopping's, a user's stop */
    b->epochs_total += t->epochs;
    return 0;
}

/* The entry of job seq (entries are in seq order while reading), or -1. */
static long sweep_find(const sweep_board *b, int64_t seq)
{
    size_t lo = 0, hi = b->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (b->entries[mid].seq < seq)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < b->n && b->entries[lo].seq == seq ? (long)lo : -1;
}

typedef struct sweep_points {
    const sweep_board *b;
    int maximize;
    asha_point *pts;
    size_t n, cap;
} sweep_points;

static int sweep_point_row(void *ctx, const db_sweep_point *p)
{
    sweep_points *sp = ctx;
    long i = sweep_find(sp->b, p->job_seq);
    if (i < 0)
        return 0;
    sweep_entry *e = &sp->b->entries[i];
    if (asha_better(p->value, e->value, sp->maximize)) {
        e->value = p->value;
        e->epoch = p->epoch;
    }
    int rc = ARRAY_GROW(sp->pts, sp->cap, sp->n + 1, ARRAY_NO_MAX); /* rows of our database */
    if (rc < 0)
        return rc;
    sp->pts[sp->n++] = (asha_point){.trial = (int)i, .epoch = p->epoch, .value = p->value};
    return 0;
}

static int sweep_maximize_g; /* qsort has no context: set under sweep_sort_lock */
static pthread_mutex_t sweep_sort_lock = PTHREAD_MUTEX_INITIALIZER;

static int sweep_entry_cmp(const void *pa, const void *pb)
{
    const sweep_entry *a = pa, *b = pb;
    if (asha_better(a->value, b->value, sweep_maximize_g))
        return -1;
    if (asha_better(b->value, a->value, sweep_maximize_g))
        return 1;
    return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/* Reads the board in seq order with every point; *pts (may be NULL) gets the points in stored
 * order for ASHA (the caller frees them). */
static int sweep_board_load(db *d, const db_sweep *s, const sweep_spec *spec, sweep_board *out,
                            asha_point **pts, size_t *n_pts, char *err)
{
    sweep_board b;
    memset(&b, 0, sizeof b);
    b.best = -1;
    sweep_read r = {.spec = spec, .b = &b};
    int rc = db_sweep_trials(d, s->seq, sweep_trial_row, &r, err);
    sweep_points sp = {.b = &b, .maximize = spec->maximize};
    if (rc >= 0)
        rc = db_sweep_points(d, s->seq, spec->metric, sweep_point_row, &sp, err);
    if (rc < 0) {
        if (rc == -ENOMEM)
            err_set(err, rc, "out of memory");
        free(sp.pts);
        sweep_board_free(&b);
        return rc;
    }
    if (pts) {
        *pts = sp.pts;
        *n_pts = sp.n;
    } else {
        free(sp.pts);
    }
    *out = b;
    return 0;
}

/* Sorts b best first and finds the best succeeded trial. */
static void sweep_board_rank(sweep_board *b, int maximize)
{
    pthread_mutex_lock(&sweep_sort_lock);
    sweep_maximize_g = maximize;
    if (b->n > 1)
        qsort(b->entries, b->n, sizeof b->entries[0], sweep_entry_cmp);
    pthread_mutex_unlock(&sweep_sort_lock);
    b->best = -1;
    for (size_t i = 0; i < b->n && b->best < 0; i++)
        if (b->entries[i].status == DB_SUCCEEDED && !isnan(b->entries[i].value))
            b->best = (int)i;
}

int sweep_board_read(db *d, const db_sweep *s, const sweep_spec *spec, sweep_board *out, char *err)
{
    int rc = sweep_board_load(d, s, spec, out, NULL, NULL, err);
    if (rc == 0)
        sweep_board_rank(out, spec->maximize);
    return rc;
}

void sweep_board_free(sweep_board *b)
{
    for (size_t i = 0; b && i < b->n; i++) {
        free(b->entries[i].stop_reason);
        json_decref(b->entries[i].parameters);
    }
    if (b) {
        free(b->entries);
        memset(b, 0, sizeof *b);
        b->best = -1;
    }
}

int sweep_spec_stored(const char *document, sweep_spec **out, char *err)
{
    json_t *doc = json_loads(document, 0, NULL);
    if (!doc)
        return err_set(err, -EIO, "a stored sweep document does not parse");
    field_errors errs;
    int rc = sweep_spec_parse_stored(doc, out, &errs);
    json_decref(doc);
    if (rc == -EINVAL)
        return err_set(err, -EIO, "a stored sweep document no longer validates: %s: %s",
                       errs.count ? errs.items[0].field : "",
                       errs.count ? errs.items[0].message : "");
    if (rc < 0)
        return err_set(err, rc, "out of memory");
    return 0;
}

/* ---- the pass ---------------------------------------------------------------------------- */

/* Submits trial n of sweep s. */
static int sweep_make_trial(db *d, const db_sweep *s, const sweep_spec *spec, int n, int64_t now,
                            char *err)
{
    json_t *doc = sweep_trial_doc(spec, n), *resolved = NULL;
    job_spec *js = NULL;
    char *text = NULL;
    field_errors errs;
    int rc = doc ? job_from_json(doc, &js, &errs) : -ENOMEM;
    if (rc == -EINVAL) {
        rc = err_set(err, -EIO, "sweep %s: trial %d's document does not validate: %s: %s", s->id, n,
                     errs.items[0].field, errs.items[0].message);
        goto out;
    }
    if (rc < 0)
        goto nomem;
    resolved = job_to_json(js);
    text = resolved ? json_out_dumps(resolved, JSON_COMPACT) : NULL;
    if (!text)
        goto nomem;
    sched_new_job nj = {.name = js->name,
                        .document = text,
                        .device_kind = js->device,
                        .max_attempts = js->max_attempts,
                        .max_runtime_seconds = js->max_runtime_seconds,
                        .priority = js->priority,
                        .owner = s->owner[0] ? s->owner : NULL,
                        .script = job_is_script(js),
                        .replicas = js->replicas,
                        .sweep_seq = s->seq};
    db_job j;
    int created = 0;
    rc = sched_job_submit(d, &nj, now, &j, &created, err);
    if (rc == 0)
        db_job_clear(&j);
    goto out;
nomem:
    rc = err_set(err, -ENOMEM, "out of memory");
out:
    free(text);
    json_decref(resolved);
    json_decref(doc);
    job_free(js);
    return rc;
}

/* ASHA's verdicts over the board's points: stop_at[i] (malloc'd, b->n entries) is the rung at
 * which entry i fell out, 0 when it did not. *stop_at is NULL when the sweep has no rungs. */
static int sweep_verdicts(const sweep_spec *spec, const sweep_board *b, const asha_point *pts,
                          size_t n_pts, int **stop_at, char *err)
{
    int rungs[ASHA_MAX_RUNGS];
    int n_rungs = spec->asha ? asha_rungs(spec->min_epochs, spec->eta, spec->max_epochs, rungs) : 0;
    *stop_at = NULL;
    if (n_rungs == 0 || b->n == 0)
        return 0;
    int *v = calloc(b->n, sizeof *v);
    if (!v)
        return err_set(err, -ENOMEM, "out of memory");
    int rc = asha_decide(pts, n_pts, b->n, rungs, n_rungs, spec->eta, spec->maximize, v);
    if (rc < 0) {
        free(v);
        return err_set(err, rc, "ASHA's replay failed");
    }
    *stop_at = v;
    return 0;
}

/* The stop request's words for a trial ASHA dropped at rung epoch. */
static void sweep_stop_words(const sweep_spec *spec, int epoch, char *out, size_t cap)
{
    snprintf(out, cap, "sweep: not in the top 1/%d of %s at epoch %d (ASHA)", spec->eta,
             spec->metric, epoch);
}

/* ASHA over the points: asks every running trial that fell out at a rung to stop (those the
 * heartbeat's own judgement, sched_sweep_judge, has not asked already). */
static int sweep_asha(db *d, const sweep_spec *spec, const sweep_board *b, const asha_point *pts,
                      size_t n_pts, sweep_tick_stats *st, char *err)
{
    int *stop_at = NULL;
    int rc = sweep_verdicts(spec, b, pts, n_pts, &stop_at, err);
    for (size_t i = 0; rc == 0 && stop_at && i < b->n; i++) {
        const sweep_entry *e = &b->entries[i];
        if (!stop_at[i] || e->status != DB_RUNNING || e->stop_requested)
            continue;
        char why[200];
        sweep_stop_words(spec, stop_at[i], why, sizeof why);
        rc = sched_job_request_stop(d, e->seq, why, err);
        if (rc == -EBUSY || rc == -ENOENT) { /* it ended meanwhile */
            rc = 0;
            continue;
        }
        if (rc >= 0) {
            rc = 0;
            st->stops_requested++;
        }
    }
    free(stop_at);
    return rc;
}

int sched_sweep_judge(db *d, db_job *j, const db_metric *epochs, size_t n_epochs, int64_t now,
                      char *err)
{
    db_sweep s;
    sweep_spec *spec = NULL;
    sweep_board b;
    asha_point *pts = NULL;
    size_t n_pts = 0;
    int *stop_at = NULL, rungs[ASHA_MAX_RUNGS], rc;
    memset(&b, 0, sizeof b);
    if (j->sweep_seq <= 0 || j->stop_requested[0] || n_epochs == 0)
        return 0;
    rc = db_sweep_get_seq(d, j->sweep_seq, &s, err);
    if (rc < 0)
        return rc == -ENOENT ? 0 : rc;
    if (s.status != DB_SWEEP_RUNNING)
        goto out;
    rc = sweep_spec_stored(s.document, &spec, err);
    if (rc < 0 || !spec->asha)
        goto out;
    int n_rungs = asha_rungs(spec->min_epochs, spec->eta, spec->max_epochs, rungs), at_rung = 0;
    for (size_t i = 0; i < n_epochs; i++)
        for (int k = 0; k < n_rungs; k++)
            at_rung |= epochs[i].epoch == rungs[k];
    if (!at_rung) /* only a rung's epoch can change this trial's verdict */
        goto out;
    rc = sweep_board_load(d, &s, spec, &b, &pts, &n_pts, err);
    if (rc == 0)
        rc = sweep_verdicts(spec, &b, pts, n_pts, &stop_at, err);
    long i = rc == 0 && stop_at ? sweep_find(&b, j->seq) : -1;
    if (i < 0 || !stop_at[i])
        goto out;
    char words[DB_STOP_MAX], why[DB_STOP_MAX + 32];
    sweep_stop_words(spec, stop_at[i], words, sizeof words);
    snprintf(why, sizeof why, "stop requested: %s", words);
    rc = db_job_set_stop_requested(d, j->seq, words, err);
    if (rc == 1)
        rc =
            db_event_append(d, j->seq, now, DB_RUNNING, DB_RUNNING, j->phase, j->attempt, why, err);
    if (rc == 0) {
        snprintf(j->stop_requested, sizeof j->stop_requested, "%s", words);
        rc = 1;
    }
out:
    free(stop_at);
    free(pts);
    sweep_board_free(&b);
    sweep_spec_free(spec);
    db_sweep_clear(&s);
    return rc;
}

json_t *sweep_summary(const db_sweep *s, int status, const sweep_board *b)
{
    static const sweep_board none = {.best = -1};
    if (!b)
        b = &none;
    json_t *best = json_null();
    if (b->best >= 0) {
        const sweep_entry *e = &b->entries[b->best];
        json_decref(best);
        best = json_pack("{s:s, s:f, s:i, s:O}", "job_id", e->id, "value", e->value, "epoch",
                         e->epoch, "parameters", e->parameters);
    }
    return json_pack("{s:s, s:s, s:s, s:{s:i, s:i, s:i, s:i, s:i, s:i, s:i}, s:I, s:o}", "id",
                     s->id, "name", s->name, "status", db_sweep_status_name(status), "trials",
                     "created", (int)b->n, "queued", b->queued, "running", b->running, "succeeded",
                     b->succeeded, "failed", b->failed, "cancelled", b->cancelled, "stopped_early",
                     b->stopped_early, "epochs_total", (json_int_t)b->epochs_total, "best",
                     best ? best : json_null());
}

int sweep_announce(db *d, const db_sweep *s, const json_t *doc, int status, const sweep_board *b,
                   int64_t now, char *err)
{
    const json_t *notify = json_object_get(doc, "notify");
    if (json_array_size(notify) == 0)
        return 0;
    json_t *body = sweep_summary(s, status, b);
    if (!body)
        return err_set(err, -ENOMEM, "out of memory");
    int rc = notify_enqueue_sweep(d, s->seq, s->owner[0] ? s->owner : NULL,
                                  db_sweep_status_name(status), body, notify, now, err);
    json_decref(body);
    return rc < 0 ? rc : 0;
}

/* running → status with its webhooks, in one transaction: rows changed (0: it had ended). */
static int sweep_end(db *d, const db_sweep *s, const sweep_spec *spec, int status,
                     const sweep_board *b, int64_t best, const char *error, int64_t now, char *err)
{
    int rc = db_begin(d, err);
    if (rc < 0)
        return rc;
    rc = db_sweep_set_finished(d, s->seq, status, best, error, now, err);
    if (rc == 1 && spec) {
        int announced = sweep_announce(d, s, spec->doc, status, b, now, err);
        if (announced < 0)
            rc = announced;
    }
    if (rc < 0) {
        db_rollback(d);
        return rc;
    }
    int c = db_commit(d, err);
    return c < 0 ? c : rc;
}

/* One running sweep's step. */
static int sweep_step(db *d, int64_t seq, int64_t now, sweep_tick_stats *st, char *err)
{
    db_sweep s;
    sweep_spec *spec = NULL;
    sweep_board b;
    asha_point *pts = NULL;
    size_t n_pts = 0;
    memset(&b, 0, sizeof b);
    int rc = db_sweep_get_seq(d, seq, &s, err);
    if (rc < 0)
        return rc == -ENOENT ? 0 : rc;
    if (s.status != DB_SWEEP_RUNNING)
        goto out;
    rc = sweep_spec_stored(s.document, &spec, err);
    if (rc == -EIO) { /* cannot go on: the sweep fails, saying why */
        char why[ERR_LEN];
        snprintf(why, sizeof why, "%s", err);
        rc = sweep_end(d, &s, NULL, DB_SWEEP_FAILED, NULL, 0, why, now, err);
        st->sweeps_finished += rc > 0;
        goto out;
    }
    if (rc < 0)
        goto out;
    rc = sweep_board_load(d, &s, spec, &b, &pts, &n_pts, err);
    if (rc < 0)
        goto out;
    if (spec->asha) {
        rc = sweep_asha(d, spec, &b, pts, n_pts, st, err);
        if (rc < 0)
            goto out;
    }
    int unfinished = b.queued + b.running;
    int made = s.trials_created;
    while (unfinished < spec->max_concurrent && made < spec->n_trials) {
        rc = sweep_make_trial(d, &s, spec, made + 1, now, err);
        if (rc == -ECANCELED) { /* cancelled meanwhile */
            rc = 0;
            goto out;
        }
        if (rc < 0)
            goto out;
        made++;
        unfinished++;
        st->trials_created++;
    }
    if (made >= spec->n_trials && unfinished == 0) {
        sweep_board_rank(&b, spec->maximize);
        int64_t best = b.best >= 0 ? b.entries[b.best].seq : 0;
        int status = b.succeeded > 0 ? DB_SWEEP_SUCCEEDED : DB_SWEEP_FAILED;
        rc = sweep_end(d, &s, spec, status, &b, best, NULL, now, err);
        if (rc < 0)
            goto out;
        st->sweeps_finished += rc > 0;
        rc = 0;
    }
out:
    free(pts);
    sweep_board_free(&b);
    sweep_spec_free(spec);
    db_sweep_clear(&s);
    return rc;
}

int sched_sweeps_tick(db *d, const char *artifacts_dir, int64_t now, sweep_tick_stats *st,
                      char *err)
{
    (void)artifacts_dir;
    int64_t seqs[SWEEP_TICK_MAX], after = 0;
    memset(st, 0, sizeof *st);
    int rc = 0, n;
    do { /* a page at a time, so that every running sweep gets its step */
        n = db_sweep_running(d, after, seqs, SWEEP_TICK_MAX, err);
        if (n < 0)
            return n;
        for (int i = 0; i < n; i++) {
            int r = sweep_step(d, seqs[i], now, st, err);
            if (r < 0 && rc == 0)
                rc = r; /* the others still get their step; the first error is reported */
        }
        if (n > 0)
            after = seqs[n - 1];
    } while (n == SWEEP_TICK_MAX);
    return rc;
}

typedef struct sweep_cancel_walk {
    int64_t seqs[SWEEP_MAX_TRIALS];
    char ids[SWEEP_MAX_TRIALS][DB_ID_LEN + 1];
    int n;
} sweep_cancel_walk;

static int sweep_cancel_row(void *ctx, const db_sweep_trial *t)
{
    sweep_cancel_walk *w = ctx;
    if (db_status_terminal(t->status) || w->n >= SWEEP_MAX_TRIALS)
        return 0;
    w->seqs[w->n] = t->seq;
    snprintf(w->ids[w->n++], DB_ID_LEN + 1, "%s", t->id);
    return 0;
}

int sched_sweep_cancel(db *d, int64_t seq, const char *artifacts_dir, int64_t now, int *changed,
                       char *err)
{
    *changed = 0;
    db_sweep s;
    sweep_spec *spec = NULL;
    sweep_board b;
    memset(&b, 0, sizeof b);
    b.best = -1;
    int rc = db_sweep_get_seq(d, seq, &s, err);
    if (rc < 0)
        return rc;
    /* the webhook's body: the trials as they were when the sweep was cancelled */
    if (s.status == DB_SWEEP_RUNNING && sweep_spec_stored(s.document, &spec, err) == 0)
        rc = sweep_board_read(d, &s, spec, &b, err);
    if (rc == 0)
        rc = sweep_end(d, &s, spec, DB_SWEEP_CANCELLED, &b, 0, NULL, now, err);
    sweep_board_free(&b);
    sweep_spec_free(spec);
    db_sweep_clear(&s);
    if (rc < 0)
        return rc;
    if (rc == 0)
        return err_set(err, -EBUSY, "the sweep has already ended; there is nothing to cancel");
    sweep_cancel_walk *w = calloc(1, sizeof *w);
    if (!w)
        return err_set(err, -ENOMEM, "out of memory");
    rc = db_sweep_trials(d, seq, sweep_cancel_row, w, err);
    for (int i = 0; rc >= 0 && i < w->n; i++) {
        db_job j;
        rc = sched_job_cancel(d, w->ids[i], artifacts_dir, now, &j, err);
        if (rc == -EBUSY || rc == -ENOENT) { /* ended or deleted meanwhile */
            rc = 0;
            continue;
        }
        if (rc == 0) {
            db_job_clear(&j);
            (*changed)++;
        }
    }
    free(w);
    return rc < 0 ? rc : 0;
}

/* ---- the controller's thread ------------------------------------------------------------- */

struct sweep_ctl {
    char *db_path, *artifacts_dir;
    void (*changed)(void *user, const sweep_tick_stats *st);
    void (*log)(void *user, const char *line);
    void *user;
    db *d;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop;
};

static void *sweep_ctl_main(void *arg)
{
    sweep_ctl *c = arg;
    char err[ERR_LEN];
    int failing = 0;
    pthread_mutex_lock(&c->mu);
    while (!c->stop) {
        pthread_mutex_unlock(&c->mu);
        sweep_tick_stats st;
        int rc = sched_sweeps_tick(c->d, c->artifacts_dir, time_wall_ms(), &st, err);
        if (rc < 0 && !failing && c->log) {
            char line[ERR_LEN + 16];
            snprintf(line, sizeof line, "sweeps: %s", err);
            c->log(c->user, line); /* once, until a pass succeeds */
        }
        failing = rc < 0;
        if ((st.trials_created || st.stops_requested || st.sweeps_finished) && c->changed)
            c->changed(c->user, &st);
        pthread_mutex_lock(&c->mu);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += SWEEP_CTL_INTERVAL_MS * 1000000L;
        ts.tv_sec += ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
        if (!c->stop)
            pthread_cond_timedwait(&c->cv, &c->mu, &ts);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

int sweep_ctl_start(const sweep_ctl_opts *o, sweep_ctl **out, char *err)
{
    sweep_ctl *c = calloc(1, sizeof *c);
    if (!c)
        return err_set(err, -ENOMEM, "out of memory");
    c->db_path = strdup(o->db_path);
    c->artifacts_dir = o->artifacts_dir ? strdup(o->artifacts_dir) : NULL;
    c->changed = o->changed;
    c->log = o->log;
    c->user = o->user;
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    int rc = !c->db_path || (o->artifacts_dir && !c->artifacts_dir)
                 ? err_set(err, -ENOMEM, "out of memory")
                 : db_open(c->db_path, &c->d, err);
    if (rc == 0 && pthread_create(&c->thread, NULL, sweep_ctl_main, c) != 0)
        rc = err_set(err, -EAGAIN, "cannot start the sweep controller's thread");
    if (rc < 0) {
        db_close(c->d);
        pthread_mutex_destroy(&c->mu);
        pthread_cond_destroy(&c->cv);
        free(c->db_path);
        free(c->artifacts_dir);
        free(c);
        return rc;
    }
    *out = c;
    return 0;
}

void sweep_ctl_stop(sweep_ctl *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&c->mu);
    c->stop = 1;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
    pthread_join(c->thread, NULL);
    db_close(c->d);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    free(c->db_path);
    free(c->artifacts_dir);
    free(c);
}
