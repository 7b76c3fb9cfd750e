/* predictions: TensorFlow Serving's REST inference API for the models trainyard trained, and
 * POST /jobs/{id}/predict for one job's model.
 *
 *   POST /v1/models/{name}[/versions/{v}]:predict   {"instances": [...]} → {"predictions": [...]}
 *                                                    {"inputs": ...}      → {"outputs": ...}
 *   POST /v1/models/{name}[/versions/{v}]:classify  {"examples": [...]}  → {"results": [[[label,
 *                                                    score], ...], ...]}
 *   POST /v1/models/{name}[/versions/{v}]:regress   {"examples": [...]}  → {"results": [v, ...]}
 *   POST /jobs/{id}/predict                          as :predict, the job's own version
 *
 * Without a version the newest available one answers. An instance is a list of numbers (a CSV
 * model's features in column order), an object of the features by name, a nested list h×w×c
 * (or h×w for one channel) of pixel values as the training images had them (0..255 for 8-bit
 * images), {"b64": "<PNG or JPEG>"}, or {"inputs": one of those}. The values go through the
 * training's preprocessing (predict_prepare: the saved standardisation; images resized, scaled
 * and standardised). :classify and :regress take TensorFlow's examples: objects of features by
 * name (or {"inputs": ...}), with "context" adding features common to every example.
 *
 * Every prediction row is the model's output row (predict.h: probabilities, a sigmoid
 * probability, or the value), floats written with the fewest digits that read back as the same
 * float32, so answers compare bit for bit.
 *
 * The handler reads the body, resolves the model and prepares the rows on its HTTP thread, then
 * submits them to serve's inference engine and parks the request on one of the app's predict
 * signals; the engine's thread raises it when the answer is there (HTTP threads never wait).
 *
 * Visibility and tokens are the models' (api/models.c): an admin uses every model, a user the
 * models of its own jobs; others are a 404 naming the model. gRPC (predict/grpc.c) resolves
 * through api_predict_resolve(), the same rules for a bearer token given in call metadata. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_priv.h"
#include "db/models.h"
#include "db/tokens.h"
#include "predict/predict.h"
#include "util/array.h"
#include "util/base64.h"
#include "util/json_out.h"
#include "data/decode.h"

#define API_PREDICT_MAX_ROWS   65536       /* instances in one request */
#define API_PREDICT_MAX_DIMS   4           /* nesting of one instance */
#define API_PREDICT_PARK_MS    60000       /* how long a request waits for the engine */
#define API_PREDICT_MAX_VALUES (64u << 20) /* floats of one request's instances, in all */

enum api_pred_kind { API_PRED_ROW, API_PRED_COLUMNAR, API_PRED_CLASSIFY, API_PRED_REGRESS };

/* A request between its submit and its answer. */
typedef struct api_pred {
    predict_model *m;
    predict_req *q;
    http_signal *sig; /* what the engine raises when it answers */
    int kind;         /* enum api_pred_kind */
    size_t n;         /* instances */
} api_pred;

static void api_pred_free(void *p)
{
    api_pred *s = p;
    predict_req_release(s->q);
    predict_model_put(s->m);
    free(s);
}

/* ---- which model ---------------------------------------------------------------------------- */

/* The walk that picks one version: the one asked for, or the newest available. */
typedef struct api_pick {
    int64_t version; /* 0: the newest available */
    db_model found;
    int have, retired;
} api_pick;

static int api_pick_add(void *ctx, const db_model *m)
{
    api_pick *p = ctx;
    if (p->have)
        return 0;
    if (m->state == DB_MODEL_RETIRED) {
        p->retired += p->version != 0;
        return 0;
    }
    p->found = *m;
    p->have = 1;
    return 0;
}

/* The version of name (0: newest available) that owner (NULL: anyone's) may use, into *out;
 * -ENOENT with a sentence when there is none. */
static int api_pick_model(db *d, const char *name, int64_t version, const char *owner,
                          db_model *out, char *err)
{
    db_model_filter f = {.name = name, .owner = owner, .version = version};
    api_pick p = {.version = version};
    int rc = db_model_list(d, &f, api_pick_add, &p, err);
    if (rc < 0)
        return rc;
    if (p.have) {
        *out = p.found;
        return 0;
    }
    if (p.retired)
        return err_set(err, -ENOENT,
                       "version %lld of model %s was retired when its job was deleted: GET "
                       "/v1/models/%s lists its versions",
                       (long long)version, name, name);
    if (version)
        return err_set(err, -ENOENT,
                       "model %s has no version %lld (or none you may see): GET /v1/models/%s "
                       "lists its versions",
                       name, (long long)version, name);
    return err_set(err, -ENOENT,
                   "no model is named %s (or none you may see, or every version is retired): a "
                   "job of that name publishes one when it succeeds",
                   name);
}

/* Fills t for the model row m. */
static int api_target_fill(app *a, const db_model *m, predict_target *t, char *err)
{
    memset(t, 0, sizeof *t);
    snprintf(t->key, sizeof t->key, "%s", m->job_id);
    snprintf(t->name, sizeof t->name, "%s", m->name);
    t->version = m->version;
    char path[DATADIR_PATH_MAX];
    int rc = datadir_job_file(a->artifacts_dir, m->job_id, "model.safetensors", path);
    if (rc < 0)
        return err_set(err, rc, "the model's path is too long");
    snprintf(t->path, sizeof t->path, "%s", path);
    return 0;
}

int api_predict_resolve(app *a, const char *token, const char *name, int64_t version,
                        predict_target *t, char *err)
{
    if (!token || !*token)
        return err_set(err, -EPERM,
                       "this call needs a token: send the metadata \"authorization: Bearer "
                       "<token>\"");
    if (!name || !*name || strlen(name) > DB_NAME_MAX)
        return err_set(err, -ENOENT, "model_spec.name must name a model (1 to 128 characters)");
    api_caller c;
    int rc = api_caller_of_token(a, token, &c, err);
    if (rc < 0)
        return rc;
    if (c.role != DB_ROLE_ADMIN && c.role != DB_ROLE_USER)
        return err_set(err, -EACCES,
                       "a %s token may not call predictions: it needs an admin or "
                       "user token",
                       db_role_name(c.role));
    db *d = app_db(a);
    if (!d)
        return err_set(err, -EIO, "the database cannot be opened");
    db_model m;
    rc = api_pick_model(d, name, version, api_sees_every_job(&c) ? NULL : c.token_id, &m, err);
    return rc < 0 ? rc : api_target_fill(a, &m, t, err);
}

/* ---- instances → numbers -------------------------------------------------------------------- */

/* The numbers of one request's instances, each with its own shape. */
typedef struct api_rows {
    float *vals; /* every instance's values, one after another */
    size_t n_vals, cap;
    size_t n;                              /* instances */
    size_t *start;                         /* where each begins in vals */
    int64_t (*dims)[API_PREDICT_MAX_DIMS]; /* each one's shape */
    int *ndim;
    size_t start_cap, dims_cap, ndim_cap; /* each array's own: one may grow and the next fail */
} api_rows;

static void api_rows_free(api_rows *w)
{
    free(w->vals);
    free(w->start);
    free(w->dims);
    free(w->ndim);
}

/* A bad value: 400 naming the field. */
static int api_bad(http_req *r, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int api_bad(http_req *r, const char *field, const char *fmt, ...)
{
    char msg[ERR_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    http_field_error e = {field, msg};
    return http_reply_problem(r, 400, "Invalid request",
                              "the request does not fit the model's input", &e, 1) < 0
               ? -EIO
               : -EINVAL;
}

/* Starts a new instance; -ENOMEM, -EFBIG past the caps. */
static int api_rows_begin(api_rows *w)
{
    int rc = ARRAY_GROW(w->start, w->start_cap, w->n + 1, API_PREDICT_MAX_ROWS);
    if (rc == 0)
        rc = ARRAY_GROW(w->dims, w->dims_cap, w->n + 1, API_PREDICT_MAX_ROWS);
    if (rc == 0)
        rc = ARRAY_GROW(w->ndim, w->ndim_cap, w->n + 1, API_PREDICT_MAX_ROWS);
    if (rc < 0)
        return rc;
    w->start[w->n] = w->n_vals;
    w->ndim[w->n] = 0;
    return 0;
}

static int api_rows_push(api_rows *w, float v)
{
    int rc = ARRAY_GROW(w->vals, w->cap, w->n_vals + 1, API_PREDICT_MAX_VALUES);
    if (rc < 0)
        return rc;
    w->vals[w->n_vals++] = v;
    return 0;
}

/* Appends the numbers of a nested list whose shape is dims[level..ndim); field is its JSON path
 * (extended in place for the message). 1 with the message in msg when it is not that shape. */
static int api_nested(api_rows *w, const json_t *v, const int64_t *dims, int ndim, int level,
                      char *field, size_t field_cap, char *msg)
{
    if (level == ndim) {
        if (!json_is_number(v)) {
            snprintf(msg, ERR_LEN, "must be a number, not %s",
                     json_is_array(v) ? "a list (the instance is deeper than its first values)"
                                      : "this");
            return 1;
        }
        double x = json_number_value(v);
        if (!isfinite((float)x)) {
            snprintf(msg, ERR_LEN, "%g does not fit a float32", x);
            return 1;
        }
        int rc = api_rows_push(w, (float)x);
        return rc < 0 ? rc : 0;
    }
    if (!json_is_array(v) || (int64_t)json_array_size(v) != dims[level]) {
        snprintf(msg, ERR_LEN,
                 "must be a list of %lld values, as the instance's first list at this depth is",
                 (long long)dims[level]);
        return 1;
    }
    size_t len = strlen(field);
    for (size_t i = 0; i < json_array_size(v); i++) {
        int rc = api_nested(w, json_array_get(v, i), dims, ndim, level + 1, field, field_cap, msg);
        if (rc == 1) {
            /* the path is written on the way back from a bad value only: formatting an index
             * for every number cost a tenth of a request's CPU */
            char idx[24];
            size_t k = (size_t)snprintf(idx, sizeof idx, "[%zu]", i), tail = strlen(field + len);
            if (len + k + tail < field_cap) {
                memmove(field + len + k, field + len, tail + 1);
                memcpy(field + len, idx, k);
            }
        }
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* An image sent as {"b64": "..."}: its pixels as numbers 0..255, shape h×w×c. */
static int api_b64_image(api_rows *w, const predict_info *in, const json_t *b64, char *msg)
{
    const char *text = json_string_value(b64);
    if (!text) {
        snprintf(msg, ERR_LEN, "b64 must be a string: a PNG or JPEG file in base64");
        return 1;
    }
    if (!in->image) {
        snprintf(msg, ERR_LEN, "b64 images are for image models; this model takes %d features",
                 in->inputs);
        return 1;
    }
    size_t len = json_string_length(b64);
    unsigned char *bytes = malloc(base64_decoded_max(len));
    if (!bytes)
        return -ENOMEM;
    long n = base64_decode(text, len, bytes);
    decode_shape sh;
    char err[ERR_LEN];
    int rc = 0;
    if (n < 0) {
        snprintf(msg, ERR_LEN, "b64 is not base64");
        rc = 1;
    } else if (decode_header((const char *)bytes, (size_t)n, "b64", &sh, err) < 0) {
        snprintf(msg, ERR_LEN, "%s", err);
        rc = 1;
    } else if (sh.c != in->in_c) {
        snprintf(msg, ERR_LEN, "the image has %d channel%s; the model takes %d", sh.c,
                 sh.c == 1 ? "" : "s", in->in_c);
        rc = 1;
    }
    unsigned char *px = NULL;
    size_t count = rc == 0 ? (size_t)sh.h * (size_t)sh.w * (size_t)sh.c : 0;
    if (rc == 0 && !(px = malloc(count)))
        rc = -ENOMEM;
    if (rc == 0 && decode_image((const char *)bytes, (size_t)n, "b64", &sh, px, err) < 0) {
        snprintf(msg, ERR_LEN, "%s", err);
        rc = 1;
    }
    for (size_t i = 0; rc == 0 && i < count; i++)
        rc = api_rows_push(w, (float)px[i]);
    if (rc == 0) {
        int64_t *d = w->dims[w->n];
        d[0] = sh.h;
        d[1] = sh.w;
        d[2] = sh.c;
        w->ndim[w->n] = 3;
    }
    free(px);
    free(bytes);
    return rc;
}

/* A CSV model's instance given as an object of features by name (ctx adds common ones). */
static int api_named_features(api_rows *w, const predict_info *in, const json_t *obj,
                              const json_t *ctx, char *field, size_t field_cap, char *msg)
{
    const char *key;
    const json_t *v;
    json_object_foreach ((json_t *)obj, key, v) {
        size_t i = 0;
        while (i < in->n_features && strcmp(in->features[i], key) != 0)
            i++;
        if (i == in->n_features) {
            snprintf(field + strlen(field), field_cap - strlen(field), ".%s", key);
            snprintf(msg, ERR_LEN, "is not a feature of this model (its features: %s%s%s%s)",
                     in->n_features ? in->features[0] : "", in->n_features > 1 ? ", " : "",
                     in->n_features > 1 ? in->features[1] : "", in->n_features > 2 ? ", ..." : "");
            return 1;
        }
    }
    for (size_t i = 0; i < in->n_features; i++) {
        v = json_object_get(obj, in->features[i]);
        if (!v && ctx)
            v = json_object_get(ctx, in->features[i]);
        if (!v || !json_is_number(v)) {
            snprintf(field + strlen(field), field_cap - strlen(field), ".%s", in->features[i]);
            snprintf(msg, ERR_LEN, v ? "must be a number" : "is missing: the model needs it");
            return 1;
        }
        int rc = api_rows_push(w, (float)json_number_value(v));
        if (rc < 0)
            return rc;
    }
    w->dims[w->n][0] = (int64_t)in->n_features;
    w->ndim[w->n] = 1;
    return 0;
}

/* One instance (any of the forms in the header comment) appended to w. 0, 1 with field and msg
 * saying what is wrong, or a negative code. */
static int api_instance(api_rows *w, const predict_info *in, const json_t *v, const json_t *ctx,
                        char *field, size_t field_cap, char *msg)
{
    int rc = api_rows_begin(w);
    if (rc < 0)
        return rc;
    if (json_is_object(v)) {
        const json_t *b64 = json_object_get(v, "b64");
        const json_t *inputs = json_object_get(v, "inputs");
        if (b64 && json_object_size(v) == 1)
            rc = api_b64_image(w, in, b64, msg);
        else if (inputs && json_object_size(v) == 1) {
            snprintf(field + strlen(field), field_cap - strlen(field), ".inputs");
            w->n_vals = w->start[w->n];
            return api_instance(w, in, inputs, NULL, field, field_cap, msg);
        } else if (!in->image)
            rc = api_named_features(w, in, v, ctx, field, field_cap, msg);
        else {
            snprintf(msg, ERR_LEN,
                     "an image model's instance is a list h×w×c of pixels, {\"b64\": \"<PNG or "
                     "JPEG>\"}, or {\"inputs\": one of those}");
            rc = 1;
        }
    } else if (json_is_number(v) && !in->image && in->inputs == 1) {
        rc = api_rows_push(w, (float)json_number_value(v));
        w->dims[w->n][0] = 1;
        w->ndim[w->n] = 1;
    } else if (json_is_array(v)) {
        /* the shape from the first values at each depth; api_nested checks the rest */
        int64_t *dims = w->dims[w->n];
        int nd = 0;
        const json_t *p = v;
        while (json_is_array(p)) {
            if (nd == API_PREDICT_MAX_DIMS) {
                snprintf(msg, ERR_LEN, "is nested deeper than %d lists", API_PREDICT_MAX_DIMS);
                return 1;
            }
            if (json_array_size(p) == 0) {
                snprintf(msg, ERR_LEN, "holds an empty list");
                return 1;
            }
            dims[nd++] = (int64_t)json_array_size(p);
            p = json_array_get(p, 0);
        }
        w->ndim[w->n] = nd;
        rc = api_nested(w, v, dims, nd, 0, field, field_cap, msg);
    } else {
        snprintf(msg, ERR_LEN,
                 in->image ? "must be an image: a list h×w×c of pixels or {\"b64\": \"...\"}"
                           : "must be a list of the model's %d features, or an object of them by "
                             "name",
                 in->inputs);
        rc = 1;
    }
    if (rc == 0)
        w->n++;
    return rc;
}

/* Columnar inputs given as an object of features by name, each a list of n values. */
static int api_columns(api_rows *w, const predict_info *in, const json_t *cols, char *field,
                       size_t field_cap, char *msg)
{
    const json_t *first = in->n_features ? json_object_get(cols, in->features[0]) : NULL;
    size_t n = json_array_size(first);
    if (!json_is_array(first) || n == 0) {
        snprintf(msg, ERR_LEN,
                 "must be a list of instances, or an object of the features by name, each a list "
                 "of one value per instance");
        return 1;
    }
    for (size_t row = 0; row < n; row++) {
        json_t *obj = json_object();
        const char *key;
        json_t *col;
        if (!obj)
            return -ENOMEM;
        json_object_foreach ((json_t *)cols, key, col) {
            if (!json_is_array(col) || json_array_size(col) != n) {
                json_decref(obj);
                snprintf(field + strlen(field), field_cap - strlen(field), ".%s", key);
                snprintf(msg, ERR_LEN, "must be a list of %zu values, as %s is", n,
                         in->features[0]);
                return 1;
            }
            json_object_set(obj, key, json_array_get(col, row));
        }
        int rc = api_rows_begin(w);
        if (rc == 0)
            rc = api_named_features(w, in, obj, NULL, field, field_cap, msg);
        json_decref(obj);
        if (rc != 0)
            return rc;
        w->n++;
    }
    return 0;
}

/* The body's instances into w, by kind. 0, or the handler's return (answered or a code). */
static int api_read_instances(http_req *r, const predict_info *in, json_t *body, int kind,
                              api_rows *w)
{
    char field[512], msg[ERR_LEN] = "";
    const json_t *sig = json_object_get(body, "signature_name");
    if (sig && (!json_is_string(sig) || (strcmp(json_string_value(sig), "serving_default") != 0 &&
                                         json_string_length(sig) != 0)))
        return api_bad(r, "signature_name", "this model has one signature: serving_default");
    const char *key;
    const json_t *v;
    const char *const allowed_row[] = {"signature_name", "instances", "inputs", NULL};
    const char *const allowed_ex[] = {"signature_name", "examples", "context", NULL};
    const char *const *allowed =
        kind == API_PRED_CLASSIFY || kind == API_PRED_REGRESS ? allowed_ex : allowed_row;
    json_object_foreach (body, key, v) {
        size_t i = 0;
        while (allowed[i] && strcmp(allowed[i], key) != 0)
            i++;
        if (!allowed[i])
            return api_bad(r, key, "is not a field of this request (it takes %s%s%s)", allowed[1],
                           allowed[2] ? " or " : "", allowed[2] ? allowed[2] : "");
    }
    int rc = 0;
    if (kind == API_PRED_CLASSIFY || kind == API_PRED_REGRESS) {
        const json_t *ex = json_object_get(body, "examples");
        const json_t *ctx = json_object_get(body, "context");
        if (ctx && !json_is_object(ctx))
            return api_bad(r, "context", "must be an object of features by name");
        if (!json_is_array(ex) || json_array_size(ex) == 0)
            return api_bad(r, "examples",
                           "must be a list of examples, objects of features by "
                           "name (or {\"inputs\": ...})");
        for (size_t i = 0; rc == 0 && i < json_array_size(ex); i++) {
            snprintf(field, sizeof field, "examples[%zu]", i);
            const json_t *e = json_array_get(ex, i);
            if (!json_is_object(e)) {
                snprintf(msg, sizeof msg, "must be an object of features by name");
                rc = 1;
            } else
                rc = api_instance(w, in, e, ctx, field, sizeof field, msg);
        }
    } else {
        const json_t *inst = json_object_get(body, "instances");
        const json_t *cols = json_object_get(body, "inputs");
        if (inst && cols)
            return api_bad(r, "inputs",
                           "give instances (the row format) or inputs (the "
                           "columnar one), not both");
        if (!inst && !cols)
            return api_bad(r, "instances",
                           "is missing: send {\"instances\": [...]} (or "
                           "{\"inputs\": ...})");
        if (kind == API_PRED_ROW && cols)
            kind = API_PRED_COLUMNAR;
        if (inst && (!json_is_array(inst) || json_array_size(inst) == 0))
            return api_bad(r, "instances", "must be a non-empty list, one entry per instance");
        snprintf(field, sizeof field, inst ? "instances" : "inputs");
        if (cols && json_is_object(cols) && json_object_get(cols, "inputs") &&
            json_object_size(cols) == 1) {
            cols = json_object_get(cols, "inputs");
            snprintf(field, sizeof field, "inputs.inputs");
        }
        const json_t *list = inst ? inst : cols;
        if (json_is_object(list) && !in->image)
            rc = api_columns(w, in, list, field, sizeof field, msg);
        else if (!json_is_array(list) || json_array_size(list) == 0) {
            snprintf(msg, sizeof msg, "must be a non-empty list, one entry per instance");
            rc = 1;
        } else {
            size_t base = strlen(field);
            for (size_t i = 0; rc == 0 && i < json_array_size(list); i++) {
                snprintf(field + base, sizeof field - base, "[%zu]", i);
                rc = api_instance(w, in, json_array_get(list, i), NULL, field, sizeof field, msg);
            }
        }
    }
    if (rc == -EFBIG)
        return err_set(http_errbuf(r), -EFBIG,
                       "too many values: one request takes at most %d instances and %u numbers",
                       API_PREDICT_MAX_ROWS, API_PREDICT_MAX_VALUES);
    if (rc < 0)
        return err_set(http_errbuf(r), rc, "out of memory reading the instances");
    if (rc == 1)
        return api_bad(r, field, "%s", msg);
    return 0;
}

/* ---- the fast path: {"instances": [lists of numbers]} ------------------------------------- */

/* The bytes of a request body being scanned. */
typedef struct api_scan {
    const char *p, *end;
} api_scan;

static void api_scan_ws(api_scan *s)
{
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
        s->p++;
}

static int api_scan_char(api_scan *s, char c)
{
    api_scan_ws(s);
    if (s->p < s->end && *s->p == c) {
        s->p++;
        return 1;
    }
    return 0;
}

/* One JSON number (the grammar exactly) as jansson would give it to json_number_value: an
 * integer through a 64-bit integer (only those exact in a double, so strtod gives the same),
 * anything else through strtod. 0 when it is not such a number. */
static int api_scan_number(api_scan *s, float *out)
{
    api_scan_ws(s);
    const char *q = s->p, *e = s->end;
    int real = 0;
    if (q < e && *q == '-')
        q++;
    if (q < e && *q == '0')
        q++;
    else if (q < e && *q >= '1' && *q <= '9')
        while (q < e && *q >= '0' && *q <= '9')
            q++;
    else
        return 0;
    size_t int_digits = (size_t)(q - s->p);
    if (q < e && *q == '.') {
        real = 1;
        if (++q >= e || *q < '0' || *q > '9')
            return 0;
        while (q < e && *q >= '0' && *q <= '9')
            q++;
    }
    if (q < e && (*q == 'e' || *q == 'E')) {
        real = 1;
        if (++q < e && (*q == '+' || *q == '-'))
            q++;
        if (q >= e || *q < '0' || *q > '9')
            return 0;
        while (q < e && *q >= '0' && *q <= '9')
            q++;
    }
    if (!real && int_digits > 15)
        return 0; /* jansson's integer range and rounding: the general path decides */
    char buf[64];
    if ((size_t)(q - s->p) >= sizeof buf)
        return 0;
    memcpy(buf, s->p, (size_t)(q - s->p));
    buf[q - s->p] = '\0';
    float f = (float)strtod(buf, NULL);
    if (!isfinite(f))
        return 0;
    if (!real && f == 0.0f)
        f = 0.0f; /* "-0" is jansson's integer 0, not -0.0 */
    *out = f;
    s->p = q;
    return 1;
}

/* A nested list of numbers; its shape is found on the first instance (dims, *ndim from 0) and
 * must repeat. 0 when it is anything else. */
static int api_scan_nested(api_scan *s, api_rows *w, int64_t *dims, int *ndim, int level, int first)
{
    if (!api_scan_char(s, '[')) {
        if (first && *ndim != level)
            return 0;
        if (!first && level != *ndim)
            return 0;
        float f;
        return api_scan_number(s, &f) && api_rows_push(w, f) == 0;
    }
    if (level == API_PREDICT_MAX_DIMS || (!first && level >= *ndim))
        return 0;
    if (first && level == *ndim)
        (*ndim)++;
    int64_t count = 0;
    if (api_scan_char(s, ']'))
        return 0;
    do {
        if (!api_scan_nested(s, w, dims, ndim, level + 1, first && count == 0))
            return 0;
        count++;
    } while (api_scan_char(s, ','));
    if (!api_scan_char(s, ']'))
        return 0;
    if (first) {
        dims[level] = count;
        return 1;
    }
    return count == dims[level];
}

/* The row format in its plainest form, {"instances": [...]} with every instance a nested list
 * of numbers of one shape, read straight into w: 1, or 0 to read the body the general way (any
 * other field, form, number or a syntax error, which the general way then names). jansson
 * would make a value of every number: two thirds of a one-row request's CPU. */
static int api_fast_instances(http_req *r, api_rows *w)
{
    size_t len;
    const char *body = http_body(r, &len);
    api_scan s = {body, body + len};
    static const char key[] = "\"instances\"";
    int64_t dims[API_PREDICT_MAX_DIMS];
    int ndim = 0;
    if (!http_body_is_json(r) || !api_scan_char(&s, '{'))
        return 0;
    api_scan_ws(&s);
    if ((size_t)(s.end - s.p) < sizeof key - 1 || memcmp(s.p, key, sizeof key - 1) != 0)
        return 0;
    s.p += sizeof key - 1;
    if (!api_scan_char(&s, ':') || !api_scan_char(&s, '['))
        return 0;
    do {
        if (api_rows_begin(w) < 0)
            return 0;
        if (!api_scan_nested(&s, w, dims, &ndim, 0, w->n == 0) || ndim == 0)
            return 0;
        memcpy(w->dims[w->n], dims, sizeof dims);
        w->ndim[w->n] = ndim;
        w->n++;
    } while (api_scan_char(&s, ','));
    if (!api_scan_char(&s, ']') || !api_scan_char(&s, '}'))
        return 0;
    api_scan_ws(&s);
    return s.p == s.end;
}

/* ---- the handlers --------------------------------------------------------------------------- */

static void api_pred_notify(void *arg)
{
    http_signal_raise(arg);
}

/* 4xx/5xx for predict_model_get's failures. */
static int api_model_error(http_req *r, int rc, const predict_target *t)
{
    char *err = http_errbuf(r);
    char detail[ERR_LEN];
    snprintf(detail, sizeof detail, "%s", err);
    switch (rc) {
    case -ENOENT:
        return err_set(err, -ENOENT,
                       "version %lld of model %s has no model.safetensors to serve (its job left "
                       "none)",
                       (long long)t->version, t->name);
    case -ENOTSUP:
        return http_reply_problem(r, 422, "Unprocessable content", detail, NULL, 0) < 0 ? -EIO : 0;
    case -E2BIG:
        return err_set(err, -ENOSPC, "%s", detail);
    default:
        return rc;
    }
}

/* Reads the request, prepares its rows and submits them; parks until the engine answers. */
static int api_pred_start(http_req *r, app *a, const predict_target *t, int kind)
{
    char *err = http_errbuf(r);
    if (!a->predict)
        return err_set(err, -EAGAIN, "predictions are off: serve runs with --predict-device none");
    predict_model *m = NULL;
    int rc = predict_model_get(a->predict, t->key, t->path, &m, err);
    if (rc < 0)
        return api_model_error(r, rc, t);
    const predict_info *in = predict_model_info(m);
    api_rows w = {0};
    json_t *body = NULL;
    if (kind != API_PRED_ROW || !api_fast_instances(r, &w)) {
        api_rows_free(&w);
        memset(&w, 0, sizeof w);
        rc = http_body_json(r, &body);
        if (rc < 0) {
            predict_model_put(m);
            return rc;
        }
    }
    if (kind == API_PRED_CLASSIFY && in->task == PREDICT_REGRESS) {
        json_decref(body);
        predict_model_put(m);
        return api_bad(r, "",
                       ":classify needs a classification model; %s is a regression model: "
                       "use :regress or :predict",
                       t->name);
    }
    if (kind == API_PRED_REGRESS && in->task != PREDICT_REGRESS) {
        json_decref(body);
        predict_model_put(m);
        return api_bad(r, "",
                       ":regress needs a regression model; %s classifies: use :classify "
                       "or :predict",
                       t->name);
    }
    if (body) {
        rc = api_read_instances(r, in, body, kind, &w);
        if (rc == 0 && kind == API_PRED_ROW && json_object_get(body, "inputs"))
            kind = API_PRED_COLUMNAR;
        json_decref(body);
    }
    float *rows = NULL;
    if (rc == 0 && !(rows = malloc(w.n * (size_t)in->inputs * sizeof *rows)))
        rc = err_set(err, -ENOMEM, "out of memory preparing the instances");
    for (size_t i = 0; rc == 0 && i < w.n; i++) {
        char why[ERR_LEN];
        if (predict_prepare(in, w.vals + w.start[i], 1, w.dims[i], w.ndim[i],
                            rows + i * (size_t)in->inputs, why) < 0) {
            char field[64];
            snprintf(field, sizeof field, "%s[%zu]",
                     kind == API_PRED_CLASSIFY || kind == API_PRED_REGRESS ? "examples"
                     : kind == API_PRED_COLUMNAR                           ? "inputs"
                                                                           : "instances",
                     i);
            rc = api_bad(r, field, "%s", why);
        }
    }
    api_pred *s = NULL;
    if (rc == 0 && !(s = calloc(1, sizeof *s)))
        rc = err_set(err, -ENOMEM, "out of memory");
    if (rc == 0) {
        static atomic_uint api_pred_next;
        http_signal *sig = a->predicted[atomic_fetch_add(&api_pred_next, 1) % API_PREDICT_SIGNALS];
        s->m = m;
        s->sig = sig;
        s->kind = kind;
        s->n = w.n;
        m = NULL;
        http_state_set(r, s, api_pred_free);
        rc = predict_submit(a->predict, s->m, rows, w.n, api_pred_notify, sig, &s->q, err);
        if (rc == -ECANCELED)
            rc = err_set(err, -ESHUTDOWN, "the server is stopping");
        if (rc == 0)
            rc = http_park(r, sig, API_PREDICT_PARK_MS);
    }
    free(rows);
    api_rows_free(&w);
    predict_model_put(m);
    return rc;
}

/* One output value: the shortest decimal that reads back as the same float32. */
static json_t *api_float(float f)
{
    return isfinite(f) ? json_real(json_out_float(f)) : json_null();
}

/* The answer once the engine is done. */
static int api_pred_answer(http_req *r, api_pred *s)
{
    char *err = http_errbuf(r);
    const float *out = NULL;
    int rc = predict_req_result(s->q, &out, err);
    if (rc == -ECANCELED)
        return err_set(err, -ESHUTDOWN, "the server is stopping");
    if (rc < 0)
        return rc;
    const predict_info *in = predict_model_info(s->m);
    int k = in->outputs;
    json_t *list = json_array();
    for (size_t i = 0; list && i < s->n; i++) {
        const float *row = out + i * (size_t)k;
        json_t *item;
        if (s->kind == API_PRED_REGRESS)
            item = api_float(row[0]);
        else if (s->kind == API_PRED_CLASSIFY) {
            item = json_array();
            for (size_t c = 0; item && c < in->n_classes; c++) {
                float p = in->task == PREDICT_BINARY ? (c ? row[0] : 1.0f - row[0]) : row[c];
                json_array_append_new(item, json_pack("[s, o]", in->classes[c], api_float(p)));
            }
        } else {
            item = json_array();
            for (int c = 0; item && c < k; c++)
                json_array_append_new(item, api_float(row[c]));
        }
        if (!item || json_array_append_new(list, item) < 0) {
            json_decref(list);
            list = NULL;
        }
    }
    if (!list)
        return err_set(err, -ENOMEM, "out of memory writing the answer");
    const char *key = s->kind == API_PRED_ROW        ? "predictions"
                      : s->kind == API_PRED_COLUMNAR ? "outputs"
                                                     : "results";
    return http_reply_json(r, 200, json_pack("{s:o}", key, list));
}

/* Every predict route: the first call starts, the woken ones answer or park again. */
static int api_pred_run(http_req *r, app *a, const predict_target *t, int kind)
{
    api_pred *s = http_state(r);
    if (!s)
        return api_pred_start(r, a, t, kind);
    if (predict_req_done(s->q))
        return api_pred_answer(r, s);
    if (http_parked_timeout(r))
        return err_set(http_errbuf(r), -EAGAIN,
                       "the prediction did not finish within %d s: the device is busy",
                       API_PREDICT_PARK_MS / 1000);
    return http_park(r, s->sig, API_PREDICT_PARK_MS);
}

/* The {name} (and {version}) model the caller may use, into t (not on a woken call). */
static int api_pred_model(http_req *r, app *a, int with_version, predict_target *t)
{
    if (http_state(r))
        return 0;
    const char *name = http_param(r, "name");
    long version = 0;
    if (!name || !*name || strlen(name) > DB_NAME_MAX)
        return api_reply_bad_param(r, "name", "must be 1 to 128 characters, as a job's name");
    if (with_version && api_parse_int(http_param(r, "version"), 1, 1000000000000000L, &version) < 0)
        return api_reply_bad_param(r, "version", "must be a version number: 1, 2, ...");
    db *d = api_db(r, a);
    if (!d)
        return -EIO;
    const api_caller *c = api_caller_of(r);
    db_model m;
    int rc = api_pick_model(d, name, version, api_sees_every_job(c) ? NULL : c->token_id, &m,
                            http_errbuf(r));
    return rc < 0 ? rc : api_target_fill(a, &m, t, http_errbuf(r));
}

#define API_PRED_ROUTE(fn, with_version, kind)                                                     \
    int fn(http_req *r, void *ctx)                                                                 \
    {                                                                                              \
        predict_target t;                                                                          \
        int rc = api_pred_model(r, ctx, with_version, &t);                                         \
        return rc != 0 ? rc : api_pred_run(r, ctx, &t, kind);                                      \
    }

API_PRED_ROUTE(api_predict, 0, API_PRED_ROW)
API_PRED_ROUTE(api_predict_version, 1, API_PRED_ROW)
API_PRED_ROUTE(api_classify, 0, API_PRED_CLASSIFY)
API_PRED_ROUTE(api_classify_version, 1, API_PRED_CLASSIFY)
API_PRED_ROUTE(api_regress, 0, API_PRED_REGRESS)
API_PRED_ROUTE(api_regress_version, 1, API_PRED_REGRESS)

int api_jobs_predict(http_req *r, void *ctx)
{
    app *a = ctx;
    predict_target t = {0};
    if (!http_state(r)) {
        db *d = NULL;
        db_job j;
        int rc = api_job_find(r, a, &d, &j);
        if (rc < 0)
            return rc;
        db_model m;
        rc = db_model_of_job(d, j.seq, &m, http_errbuf(r));
        int status = j.status;
        db_job_clear(&j);
        if (rc == -ENOENT && status != DB_SUCCEEDED)
            return err_set(http_errbuf(r), -EBUSY,
                           "job %s is %s: it has a model to predict with once it succeeds",
                           http_param(r, "id"), db_status_name(status));
        if (rc == -ENOENT)
            return err_set(http_errbuf(r), -ENOENT,
                           "job %s published no model (a script job that left no "
                           "model.safetensors)",
                           http_param(r, "id"));
        if (rc < 0)
            return rc;
        rc = api_target_fill(a, &m, &t, http_errbuf(r));
        if (rc < 0)
            return rc;
    }
    return api_pred_run(r, a, &t, API_PRED_ROW);
}
