/* sweep_spec: the sweep document's checks and its trials' documents (see sweep_spec.h). */
#include "scheduler/sweep_spec.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "job/job.h"
#include "util/url.h"
#include "util/utf8.h"

/* ---- paths: name ('.' name | '[' index ']')* ------------------------------------------------ */

enum { SWEEP_TOK_END, SWEEP_TOK_NAME, SWEEP_TOK_INDEX };

typedef struct sweep_tok {
    int kind;
    char name[SWEEP_PATH_MAX + 1];
    size_t index;
} sweep_tok;

/* The next token of *p into *t; -EINVAL on a malformed path. */
static int sweep_tok_next(const char **p, int first, sweep_tok *t)
{
    const char *s = *p;
    if (!*s) {
        t->kind = SWEEP_TOK_END;
        return 0;
    }
    if (*s == '[') {
        char *end = NULL;
        if (!isdigit((unsigned char)s[1]))
            return -EINVAL;
        unsigned long v = strtoul(s + 1, &end, 10);
        if (*end != ']' || v > 1000000)
            return -EINVAL;
        t->kind = SWEEP_TOK_INDEX;
        t->index = v;
        *p = end + 1;
        return 0;
    }
    if (!first) {
        if (*s != '.')
            return -EINVAL;
        s++;
    }
    size_t n = 0;
    while (isalnum((unsigned char)s[n]) || s[n] == '_')
        n++;
    if (n == 0 || n > SWEEP_PATH_MAX)
        return -EINVAL;
    t->kind = SWEEP_TOK_NAME;
    memcpy(t->name, s, n);
    t->name[n] = '\0';
    *p = s + n;
    return 0;
}

static int sweep_path_ok(const char *path)
{
    sweep_tok t;
    int first = 1;
    for (;;) {
        if (sweep_tok_next(&path, first, &t) < 0)
            return 0;
        if (t.kind == SWEEP_TOK_END)
            return !first;
        if (first && t.kind != SWEEP_TOK_NAME)
            return 0;
        first = 0;
    }
}

/* Sets root's member at path to value (stolen). Objects on the way that base does not have
 * are made; array elements must exist. -EINVAL with why otherwise, -ENOMEM. */
static int sweep_path_set(json_t *root, const char *path, json_t *value, char *why, size_t cap)
{
    sweep_tok t, next;
    const char *p = path;
    json_t *cur = root;
    int rc = sweep_tok_next(&p, 1, &t);
    while (rc == 0) {
        rc = sweep_tok_next(&p, 0, &next);
        if (rc < 0)
            break;
        if (t.kind == SWEEP_TOK_NAME && !json_is_object(cur)) {
            snprintf(why, cap, "base has no object where %s is", path);
            rc = -EINVAL;
            break;
        }
        if (t.kind == SWEEP_TOK_INDEX && (!json_is_array(cur) || t.index >= json_array_size(cur))) {
            snprintf(why, cap, "base has no element [%zu] on the way to %s", t.index, path);
            rc = -EINVAL;
            break;
        }
        if (next.kind == SWEEP_TOK_END) { /* the member to set */
            int set = t.kind == SWEEP_TOK_NAME ? json_object_set_new(cur, t.name, value)
                                               : json_array_set_new(cur, t.index, value);
            return set < 0 ? -ENOMEM : 0;
        }
        json_t *child =
            t.kind == SWEEP_TOK_NAME ? json_object_get(cur, t.name) : json_array_get(cur, t.index);
        if (!child && t.kind == SWEEP_TOK_NAME && next.kind == SWEEP_TOK_NAME) {
            child = json_object();
            if (!child || json_object_set_new(cur, t.name, child) < 0) {
                rc = -ENOMEM;
                break;
            }
        } else if (!child) {
            snprintf(why, cap, "base has no %s on the way to %s", t.name, path);
            rc = -EINVAL;
            break;
        }
        cur = child;
        t = next;
    }
    json_decref(value);
    if (rc == -EINVAL && !why[0])
        snprintf(why, cap, "is not a path of the job document");
    return rc;
}

/* The member at path (borrowed), or NULL. */
static const json_t *sweep_path_get(const json_t *root, const char *path)
{
    sweep_tok t;
    const char *p = path;
    const json_t *cur = root;
    int first = 1;
    while (cur && sweep_tok_next(&p, first, &t) == 0 && t.kind != SWEEP_TOK_END) {
        cur =
            t.kind == SWEEP_TOK_NAME ? json_object_get(cur, t.name) : json_array_get(cur, t.index);
        first = 0;
    }
    return cur;
}

/* ---- sampling ---------------------------------------------------------------------------- */

static uint64_t sweep_mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull; /* splitmix64 */
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* A uniform double in [0, 1) for (seed, trial, parameter). */
static double sweep_uniform01(uint64_t seed, int trial, size_t param)
{
    uint64_t x = sweep_mix(sweep_mix(sweep_mix(seed) ^ (uint64_t)trial) ^ (uint64_t)param);
    return (double)(x >> 11) * (1.0 / 9007199254740992.0);
}

/* Parameter i's value in trial n (new reference). */
static json_t *sweep_value(const sweep_spec *s, size_t i, int n)
{
    const sweep_param *p = &s->params[i];
    if (s->grid) {
        size_t k = (size_t)(n - 1);
        for (size_t j = s->n_params; j-- > i + 1;)
            k /= json_array_size(s->params[j].values);
        k %= json_array_size(p->values);
        return json_deep_copy(json_array_get(p->values, k));
    }
    double u = sweep_uniform01(s->seed, n, i);
    switch (p->type) {
    case SWEEP_LOG_UNIFORM: {
        double v = exp(log(p->min) + u * (log(p->max) - log(p->min)));
        return json_real(v < p->min ? p->min : v > p->max ? p->max : v);
    }
    case SWEEP_UNIFORM:
        return json_real(p->min + u * (p->max - p->min));
    case SWEEP_INT_UNIFORM: {
        double span = p->max - p->min + 1;
        double v = p->min + floor(u * span);
        return json_integer((json_int_t)(v > p->max ? p->max : v));
    }
    default: {
        size_t k = (size_t)(u * (double)json_array_size(p->values));
        if (k >= json_array_size(p->values))
            k = json_array_size(p->values) - 1;
        return json_deep_copy(json_array_get(p->values, k));
    }
    }
}

static int sweep_trial_fill(const sweep_spec *s, int n, json_t *doc, char *why, size_t cap)
{
    char name[512];
    snprintf(name, sizeof name, "%s-%d", s->name, n);
    json_object_del(doc, "model_name"); /* the alias: a trial is named here */
    if (json_object_set_new(doc, "name", json_string(name)) < 0)
        return -ENOMEM;
    for (size_t i = 0; i < s->n_params; i++) {
        json_t *v = sweep_value(s, i, n);
        if (!v)
            return -ENOMEM;
        why[0] = '\0';
        int rc = sweep_path_set(doc, s->params[i].path, v, why, cap);
        if (rc < 0)
            return rc;
    }
    return 0;
}

json_t *sweep_trial_doc(const sweep_spec *s, int n)
{
    char why[256];
    json_t *doc = json_deep_copy(s->base);
    if (!doc || sweep_trial_fill(s, n, doc, why, sizeof why) < 0) {
        json_decref(doc);
        return NULL;
    }
    return doc;
}

json_t *sweep_trial_params(const sweep_spec *s, const json_t *doc)
{
    json_t *o = json_object();
    for (size_t i = 0; o && i < s->n_params; i++) {
        const json_t *v = sweep_path_get(doc, s->params[i].path);
        if (json_object_set_new(o, s->params[i].path, v ? json_deep_copy(v) : json_null()) < 0) {
            json_decref(o);
            return NULL;
        }
    }
    return o;
}

void sweep_spec_free(sweep_spec *s)
{
    if (!s)
        return;
    json_decref(s->doc);
    free(s);
}

/* ---- validation -------------------------------------------------------------------------- */

static int sweep_is_int(const json_t *v)
{
    if (json_is_integer(v))
        return 1;
    return json_is_real(v) && floor(json_real_value(v)) == json_real_value(v) &&
           fabs(json_real_value(v)) < 9e15;
}

/* An integer member in [lo, hi], def when absent; problems go to errs under field. */
static int sweep_int(const json_t *o, const char *key, const char *field, long lo, long hi,
                     long def, long *out, field_errors *errs)
{
    const json_t *v = json_object_get(o, key);
    *out = def;
    if (!v)
        return 0;
    if (!sweep_is_int(v) || json_number_value(v) < lo || json_number_value(v) > hi) {
        field_errors_add(errs, field, "must be an integer from %ld to %ld", lo, hi);
        return -EINVAL;
    }
    *out = (long)json_number_value(v);
    return 0;
}

static int sweep_param_cmp(const void *a, const void *b)
{
    return strcmp(((const sweep_param *)a)->path, ((const sweep_param *)b)->path);
}

/* parameters: each PATH and its distribution. */
static void sweep_parse_params(sweep_spec *s, const json_t *params, field_errors *errs)
{
    static const char *const types[] = {"log_uniform", "uniform", "int_uniform", "choice"};
    char f[160];
    if (!json_is_object(params) || json_object_size(params) == 0 ||
        json_object_size(params) > SWEEP_MAX_PARAMS) {
        field_errors_add(errs, "parameters", "must be an object of 1 to %d parameters",
                         SWEEP_MAX_PARAMS);
        return;
    }
    const char *path;
    const json_t *p;
    json_object_foreach ((json_t *)params, path, p) {
        snprintf(f, sizeof f, "parameters[\"%.100s\"]", path);
        if (strlen(path) > SWEEP_PATH_MAX || !sweep_path_ok(path)) {
            field_errors_add(errs, f,
                             "must be a path of the job document such as "
                             "hyperparameters.learning_rate or model.layers[0].units");
            continue;
        }
        if (!strcmp(path, "name") || !strcmp(path, "model_name")) {
            field_errors_add(errs, f, "trials are named <sweep name>-<n>; name is not a parameter");
            continue;
        }
        if (!json_is_object(p)) {
            field_errors_add(errs, f, "must be an object with a type");
            continue;
        }
        sweep_param *sp = &s->params[s->n_params];
        memset(sp, 0, sizeof *sp);
        snprintf(sp->path, sizeof sp->path, "%s", path);
        const char *type = json_string_value(json_object_get(p, "type"));
        int t = -1;
        for (int i = 0; type && i < 4; i++)
            if (!strcmp(type, types[i]))
                t = i;
        char ff[200];
        snprintf(ff, sizeof ff, "%s.type", f);
        if (t < 0) {
            field_errors_add(errs, ff, "must be log_uniform, uniform, int_uniform or choice");
            continue;
        }
        sp->type = t;
        static const char *const range_keys[] = {"type", "min", "max", NULL};
        static const char *const choice_keys[] = {"type", "values", NULL};
        size_t before = errs->count;
        field_errors_unknown(errs, p, f, t == SWEEP_CHOICE ? choice_keys : range_keys);
        if (t == SWEEP_CHOICE) {
            const json_t *vals = json_object_get(p, "values");
            snprintf(ff, sizeof ff, "%s.values", f);
            if (!json_is_array(vals) || json_array_size(vals) == 0 ||
                json_array_size(vals) > SWEEP_MAX_CHOICES)
                field_errors_add(errs, ff, "must be an array of 1 to %d values", SWEEP_MAX_CHOICES);
            sp->values = vals;
        } else {
            const json_t *lo = json_object_get(p, "min"), *hi = json_object_get(p, "max");
            int isint = t == SWEEP_INT_UNIFORM;
            snprintf(ff, sizeof ff, "%s.min", f);
            if (!json_is_number(lo) || (isint && !sweep_is_int(lo)))
                field_errors_add(errs, ff, "must be %s", isint ? "an integer" : "a number");
            else if (t == SWEEP_LOG_UNIFORM && json_number_value(lo) <= 0)
                field_errors_add(errs, ff, "must be > 0 for log_uniform");
            snprintf(ff, sizeof ff, "%s.max", f);
            if (!json_is_number(hi) || (isint && !sweep_is_int(hi)))
                field_errors_add(errs, ff, "must be %s", isint ? "an integer" : "a number");
            else if (json_is_number(lo) && (isint ? json_number_value(hi) < json_number_value(lo)
                                                  : json_number_value(hi) <= json_number_value(lo)))
                field_errors_add(errs, ff, "must be %s min", isint ? ">=" : ">");
            sp->min = json_number_value(lo);
            sp->max = json_number_value(hi);
        }
        if (errs->count == before)
            s->n_params++;
    }
    qsort(s->params, s->n_params, sizeof s->params[0], sweep_param_cmp);
}

/* A trial document's problem, renamed to what the user wrote: the parameter whose member it
 * is, else base.<field>. */
static void sweep_map_error(const sweep_spec *s, const field_error *e, int n, field_errors *errs)
{
    char f[200];
    const sweep_param *owner = NULL;
    for (size_t i = 0; i < s->n_params; i++) {
        size_t len = strlen(s->params[i].path);
        if (!strncmp(e->field, s->params[i].path, len) &&
            (e->field[len] == '\0' || e->field[len] == '.' || e->field[len] == '['))
            owner = &s->params[i];
    }
    if (owner)
        snprintf(f, sizeof f, "parameters[\"%s\"]", owner->path);
    else
        snprintf(f, sizeof f, "base%s%s", e->field[0] ? "." : "", e->field);
    if (n > 0)
        field_errors_add(errs, f, "%s (in trial %d's document)", e->message, n);
    else
        field_errors_add(errs, f, "%s", e->message);
}

/* Builds and parses every trial's document; the first one that fails is reported. Also checks
 * what the first trial's spec says against the metric. */
static int sweep_check_trials(sweep_spec *s, int upto, field_errors *errs)
{
    char why[256];
    for (int n = 1; n <= upto; n++) {
        json_t *doc = json_deep_copy(s->base);
        if (!doc)
            return -ENOMEM;
        why[0] = '\0';
        int rc = sweep_trial_fill(s, n, doc, why, sizeof why);
        if (rc == -EINVAL) {
            for (size_t i = 0; i < s->n_params; i++)
                if (strstr(why, s->params[i].path)) {
                    char f[160];
                    snprintf(f, sizeof f, "parameters[\"%s\"]", s->params[i].path);
                    field_errors_add(errs, f, "%s", why);
                    break;
                }
            json_decref(doc);
            return -EINVAL;
        }
        if (rc < 0) {
            json_decref(doc);
            return rc;
        }
        field_errors terrs = {0};
        job_spec *js = NULL;
        rc = job_from_json(doc, &js, &terrs);
        json_decref(doc);
        if (rc == -EINVAL) {
            for (size_t i = 0; i < terrs.count; i++)
                sweep_map_error(s, &terrs.items[i], n, errs);
            return -EINVAL;
        }
        if (rc < 0)
            return rc;
        if (n == 1) {
            s->script = job_is_script(js);
            s->max_epochs = js->epochs;
            if (s->script) {
                const json_t *ep =
                    json_object_get(json_object_get(s->base, "hyperparameters"), "epochs");
                s->max_epochs = sweep_is_int(ep) ? (int)json_number_value(ep) : 0;
            }
            size_t at, len;
            if (js->dataset_url && url_userinfo_span(js->dataset_url, &at, &len))
                field_errors_add(errs, "base.dataset_url",
                                 "a sweep's base cannot hold credentials (user:password@): "
                                 "its document is shown as given");
        }
        if (!s->script) {
            static const char *const known[] = {"loss", "val_loss", "accuracy", "val_accuracy"};
            int k = 0;
            while (k < 4 && strcmp(known[k], s->metric))
                k++;
            if (k == 4)
                field_errors_add(errs, "metric.name",
                                 "a built-in job reports loss, val_loss, accuracy and "
                                 "val_accuracy only");
            else if (k >= 2 && js->task == JOB_TASK_REGRESSION)
                field_errors_add(errs, "metric.name",
                                 "a regression reports no accuracy: use loss or val_loss");
            else if ((k & 1) && js->format == JOB_FORMAT_CSV && js->validation_split <= 0)
                field_errors_add(errs, "metric.name",
                                 "%s needs validation data: set base "
                                 "hyperparameters.validation_split above 0 (trial %d has 0)",
                                 s->metric, n);
        }
        job_free(js);
        if (errs->count)
            return -EINVAL;
    }
    return 0;
}

/* Parses doc (borrowed) as a job document; its problems renamed into errs with note. */
static int sweep_check_doc(const sweep_spec *s, const json_t *doc, const char *note,
                           field_errors *errs)
{
    field_errors terrs = {0};
    job_spec *js = NULL;
    int rc = job_from_json(doc, &js, &terrs);
    job_free(js);
    for (size_t i = 0; rc == -EINVAL && i < terrs.count; i++) {
        field_error e = terrs.items[i];
        char msg[sizeof e.message];
        snprintf(msg, sizeof msg, "%.160s%s", terrs.items[i].message, note);
        snprintf(e.message, sizeof e.message, "%s", msg);
        sweep_map_error(s, &e, 0, errs);
    }
    return rc;
}

/* Each parameter at each end of its range and at each of its choices, the others as in trial
 * 1: a value that only some trial would draw is refused now, whatever the seed. */
static int sweep_check_ends(const sweep_spec *s, field_errors *errs)
{
    for (size_t i = 0; i < s->n_params; i++) {
        const sweep_param *p = &s->params[i];
        size_t n = p->type == SWEEP_CHOICE ? json_array_size(p->values) : 2;
        for (size_t k = 0; k < n; k++) {
            json_t *v;
            if (p->type == SWEEP_CHOICE)
                v = json_deep_copy(json_array_get(p->values, k));
            else if (p->type == SWEEP_INT_UNIFORM)
                v = json_integer((json_int_t)(k ? p->max : p->min));
            else
                v = json_real(k ? p->max : p->min);
            json_t *doc = sweep_trial_doc(s, 1);
            char why[256] = "";
            int rc = v && doc ? sweep_path_set(doc, p->path, v, why, sizeof why) : -ENOMEM;
            if (!v || !doc)
                json_decref(v);
            if (rc == 0) {
                char note[64];
                snprintf(note, sizeof note, " (with %s at its %s)",
                         p->type == SWEEP_CHOICE ? "a choice" : "the range",
                         p->type == SWEEP_CHOICE ? "values"
                         : k                     ? "max"
                                                 : "min");
                rc = sweep_check_doc(s, doc, note, errs);
            }
            json_decref(doc);
            if (rc < 0)
                return rc;
        }
    }
    return 0;
}

/* notify: checked by the job document's own rules, on a copy of base that carries it. */
static int sweep_check_notify(const json_t *base, const json_t *notify, field_errors *errs)
{
    json_t *doc = json_deep_copy(base);
    if (!doc || json_object_set(doc, "notify", (json_t *)notify) < 0) {
        json_decref(doc);
        return -ENOMEM;
    }
    field_errors terrs = {0};
    job_spec *js = NULL;
    int rc = job_from_json(doc, &js, &terrs);
    json_decref(doc);
    job_free(js);
    if (rc == -EINVAL)
        for (size_t i = 0; i < terrs.count; i++)
            if (!strncmp(terrs.items[i].field, "notify", 6))
                field_errors_add(errs, terrs.items[i].field, "%s", terrs.items[i].message);
    return rc == -ENOMEM ? rc : 0;
}

static int sweep_spec_parse_upto(const json_t *doc, int all, sweep_spec **out, field_errors *errs)
{
    static const char *const keys[] = {"name", "base",   "parameters", "algorithm",
                                       "seed", "metric", "max_trials", "max_concurrent",
                                       "asha", "notify", NULL};
    memset(errs, 0, sizeof *errs);
    if (!json_is_object(doc)) {
        field_errors_add(errs, "", "a sweep document must be a JSON object");
        return -EINVAL;
    }
    sweep_spec *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    int rc = 0;
    field_errors_unknown(errs, doc, "", keys);

    const json_t *name = json_object_get(doc, "name");
    const char *nm = name ? json_string_value(name) : "sweep";
    if (!nm || !*nm || utf8_chars(nm) > SWEEP_NAME_CHARS) {
        field_errors_add(errs, "name", "must be a string of 1 to %d characters", SWEEP_NAME_CHARS);
        nm = "sweep";
    }
    const json_t *base = json_object_get(doc, "base");
    if (!json_is_object(base))
        field_errors_add(errs, "base", "must be a job document (an object), as POST /train takes");
    sweep_parse_params(s, json_object_get(doc, "parameters"), errs);

    const json_t *alg = json_object_get(doc, "algorithm");
    const char *a = alg ? json_string_value(alg) : "random";
    if (!a || (strcmp(a, "random") && strcmp(a, "grid")))
        field_errors_add(errs, "algorithm", "must be random or grid");
    else
        s->grid = !strcmp(a, "grid");
    long seed = 0, max_trials = 0, max_conc = 0, min_ep = 1, eta = 3;
    sweep_int(doc, "seed", "seed", 0, 9007199254740991L, 0, &seed, errs);
    s->seed = (uint64_t)seed;
    sweep_int(doc, "max_trials", "max_trials", 1, SWEEP_MAX_TRIALS, s->grid ? -1 : 10, &max_trials,
              errs);
    sweep_int(doc, "max_concurrent", "max_concurrent", 1, SWEEP_MAX_TRIALS, 1, &max_conc, errs);

    const json_t *metric = json_object_get(doc, "metric");
    const char *mname = json_string_value(json_object_get(metric, "name"));
    const char *mode = json_string_value(json_object_get(metric, "mode"));
    if (!json_is_object(metric)) {
        field_errors_add(errs, "metric", "must be an object {\"name\": ..., \"mode\": min|max}");
    } else {
        static const char *const mkeys[] = {"name", "mode", NULL};
        field_errors_unknown(errs, metric, "metric", mkeys);
        size_t ok = mname ? strspn(mname, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                          "0123456789_.:/-")
                          : 0;
        if (!mname || !*mname || ok != strlen(mname) || strlen(mname) >= SWEEP_METRIC_MAX)
            field_errors_add(errs, "metric.name",
                             "must be a metric's name: 1 to 63 of A-Z a-z 0-9 _ . : / -");
        else
            snprintf(s->metric, sizeof s->metric, "%s", mname);
        if (json_object_get(metric, "mode") &&
            (!mode || (strcmp(mode, "min") && strcmp(mode, "max"))))
            field_errors_add(errs, "metric.mode", "must be min or max");
        else if (mode)
            s->maximize = !strcmp(mode, "max");
        else /* as early_stopping's auto: accuracies grow, losses shrink */
            s->maximize = mname && strstr(mname, "acc") != NULL;
    }
    const json_t *asha = json_object_get(doc, "asha");
    if (asha && !json_is_null(asha)) {
        static const char *const akeys[] = {"min_epochs", "reduction_factor", NULL};
        if (!json_is_object(asha)) {
            field_errors_add(errs, "asha", "must be an object {min_epochs, reduction_factor}");
        } else {
            field_errors_unknown(errs, asha, "asha", akeys);
            sweep_int(asha, "min_epochs", "asha.min_epochs", 1, JOB_MAX_EPOCHS, 1, &min_ep, errs);
            sweep_int(asha, "reduction_factor", "asha.reduction_factor", 2, 100, 3, &eta, errs);
            s->asha = 1;
            for (size_t i = 0; i < s->n_params; i++)
                if (!strcmp(s->params[i].path, "hyperparameters.epochs"))
                    field_errors_add(errs, "parameters[\"hyperparameters.epochs\"]",
                                     "cannot be a parameter with asha: its rungs are on base's "
                                     "epochs");
        }
    }
    s->min_epochs = (int)min_ep;
    s->eta = (int)eta;
    s->max_trials = (int)max_trials;
    s->max_concurrent = (int)max_conc;
    const json_t *notify = json_object_get(doc, "notify");
    if (notify && !(json_is_array(notify) && json_array_size(notify) == 0) &&
        json_is_object(base) && !errs->count) {
        rc = sweep_check_notify(base, notify, errs);
        if (rc < 0)
            goto fail;
    }
    if (errs->count) {
        rc = -EINVAL;
        goto fail;
    }

    /* the grid's size decides the trials; random makes max_trials */
    if (s->grid) {
        double size = 1;
        for (size_t i = 0; i < s->n_params; i++) {
            if (s->params[i].type != SWEEP_CHOICE) {
                char f[160];
                snprintf(f, sizeof f, "parameters[\"%s\"].type", s->params[i].path);
                field_errors_add(errs, f, "a grid takes choice parameters only");
            }
            size *= s->params[i].values ? (double)json_array_size(s->params[i].values) : 1;
        }
        if (!errs->count && max_trials < 0)
            max_trials = size <= SWEEP_MAX_TRIALS ? (long)size : SWEEP_MAX_TRIALS;
        if (!errs->count && size > (double)max_trials)
            field_errors_add(errs, "max_trials",
                             "the grid has %.0f points, more than max_trials (%ld): raise "
                             "max_trials (at most %d) or take fewer values",
                             size, max_trials, SWEEP_MAX_TRIALS);
        s->max_trials = (int)max_trials;
        s->n_trials = (int)size;
    } else {
        s->n_trials = s->max_trials;
    }
    if (errs->count) {
        rc = -EINVAL;
        goto fail;
    }

    s->doc = json_pack(
        "{s:s, s:O, s:O, s:s, s:I, s:{s:s, s:s}, s:i, s:i, s:o, s:o}", "name", nm, "base", base,
        "parameters", json_object_get(doc, "parameters"), "algorithm", s->grid ? "grid" : "random",
        "seed", (json_int_t)seed, "metric", "name", s->metric, "mode", s->maximize ? "max" : "min",
        "max_trials", s->max_trials, "max_concurrent", s->max_concurrent, "asha",
        s->asha ? json_pack("{s:i, s:i}", "min_epochs", s->min_epochs, "reduction_factor", s->eta)
                : json_null(),
        "notify", notify ? json_incref((json_t *)notify) : json_array());
    if (!s->doc) {
        rc = -ENOMEM;
        goto fail;
    }
    s->name = json_string_value(json_object_get(s->doc, "name"));
    s->base = json_object_get(s->doc, "base");
    /* choice values point into the kept document, not the caller's */
    const json_t *kept = json_object_get(s->doc, "parameters");
    for (size_t i = 0; i < s->n_params; i++)
        if (s->params[i].type == SWEEP_CHOICE)
            s->params[i].values =
                json_object_get(json_object_get(kept, s->params[i].path), "values");
    rc = sweep_check_trials(s, all ? s->n_trials : 1, errs);
    if (rc == 0 && all && !s->grid)
        rc = sweep_check_ends(s, errs);
    if (rc == 0 && errs->count)
        rc = -EINVAL;
    if (rc < 0)
        goto fail;
    if (s->asha && s->max_epochs <= s->min_epochs) {
        field_errors_add(errs, "asha.min_epochs",
                         s->max_epochs > 0
                             ? "must be below base's hyperparameters.epochs (%d): the rungs lie "
                               "between them"
                             : "needs base hyperparameters.epochs, an integer (%d)",
                         s->max_epochs);
        rc = -EINVAL;
        goto fail;
    }
    *out = s;
    return 0;
fail:
    sweep_spec_free(s);
    return rc;
}

int sweep_spec_parse(const json_t *doc, sweep_spec **out, field_errors *errs)
{
    return sweep_spec_parse_upto(doc, 1, out, errs);
}

int sweep_spec_parse_stored(const json_t *doc, sweep_spec **out, field_errors *errs)
{
    return sweep_spec_parse_upto(doc, 0, out, errs);
}
