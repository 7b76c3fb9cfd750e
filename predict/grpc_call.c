/* predict/grpc_call: the two methods of predict/grpc.c — a GetModelMetadataRequest or a
 * PredictRequest decoded, checked and resolved for the caller's token, and answered; a Predict
 * submitted to the engine and answered when the engine hands it back (grpc.c says how).
 *
 * Checks, in order: the message decodes; model_spec (name, signature, version); the token and
 * the model's visibility (the resolve callback); the request's fields (metadata_field;
 * output_filter, the one input tensor, its dtype and shape); the engine's model and
 * predict_prepare. Each refusal's message names the field. */
#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/slice.h>
#include <grpc/support/alloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "predict/grpc_priv.h"
#include "predict/tfs_msg.h"
#include "util/err.h"

/* The bearer token of the call's `authorization` metadata into tok; NULL when there is none. */
static const char *call_token(const gcall *c, char *tok, size_t cap)
{
    for (size_t i = 0; i < c->md.count; i++) {
        const grpc_metadata *md = &c->md.metadata[i];
        if (grpc_slice_str_cmp(md->key, "authorization") != 0)
            continue;
        size_t len = GRPC_SLICE_LENGTH(md->value);
        const char *v = (const char *)GRPC_SLICE_START_PTR(md->value);
        if (len < 7 || strncasecmp(v, "Bearer ", 7) != 0)
            return NULL;
        v += 7;
        len -= 7;
        while (len > 0 && (*v == ' ' || *v == '\t')) {
            v++;
            len--;
        }
        while (len > 0 && (v[len - 1] == ' ' || v[len - 1] == '\t'))
            len--;
        if (len == 0 || len >= cap || memchr(v, '\0', len))
            return NULL;
        memcpy(tok, v, len);
        tok[len] = '\0';
        return tok;
    }
    return NULL;
}

/* Checks model_spec and resolves it for the caller: 0 and c->t, or a status with err. */
static grpc_status_code call_resolve(gcall *c, const Tensorflow__Serving__ModelSpec *spec,
                                     char *err)
{
    predict_grpc *g = c->g;
    if (!spec || !spec->name || !spec->name[0]) {
        err_set(err, -EINVAL, "model_spec.name is required");
        return GRPC_STATUS_INVALID_ARGUMENT;
    }
    snprintf(c->model, sizeof c->model, "%s", spec->name);
    if (spec->signature_name && spec->signature_name[0] &&
        strcmp(spec->signature_name, TFS_SIGNATURE) != 0) {
        err_set(err, -EINVAL, "model_spec.signature_name \"%.100s\" is not served; use \"%s\"",
                spec->signature_name, TFS_SIGNATURE);
        return GRPC_STATUS_INVALID_ARGUMENT;
    }
    int64_t version = 0;
    if (spec->version_choice_case ==
        TENSORFLOW__SERVING__MODEL_SPEC__VERSION_CHOICE_VERSION_LABEL) {
        err_set(err, -EINVAL, "model_spec.version_label is not supported; give model_spec.version");
        return GRPC_STATUS_INVALID_ARGUMENT;
    }
    if (spec->version_choice_case == TENSORFLOW__SERVING__MODEL_SPEC__VERSION_CHOICE_VERSION &&
        spec->version) {
        version = spec->version->value;
        if (version < 1) {
            err_set(err, -EINVAL, "model_spec.version is %lld; versions start at 1",
                    (long long)version);
            return GRPC_STATUS_INVALID_ARGUMENT;
        }
    }
    char tokbuf[PREDICT_GRPC_TOKEN_MAX];
    const char *token = call_token(c, tokbuf, sizeof tokbuf);
    predict_target t;
    memset(&t, 0, sizeof t);
    err[0] = '\0';
    int rc = g->o.resolve(g->o.user, token, spec->name, version, &t, err);
    if (rc == -EPERM && !err[0])
        err_set(err, rc, "a token is needed: send `authorization: Bearer <token>` metadata");
    if (rc == -EPERM)
        return GRPC_STATUS_UNAUTHENTICATED;
    if (rc == -EACCES)
        return GRPC_STATUS_PERMISSION_DENIED;
    if (rc == -ENOENT)
        return GRPC_STATUS_NOT_FOUND;
    if (rc < 0 && !err[0])
        err_set(err, rc, "the model could not be resolved (%s)", strerror(-rc));
    if (rc < 0)
        return GRPC_STATUS_INTERNAL;
    c->t = t;
    return GRPC_STATUS_OK;
}

/* The model of c->t from the engine into c->m. */
static grpc_status_code call_model(gcall *c, char *err)
{
    int rc = predict_model_get(c->g->o.engine, c->t.key, c->t.path, &c->m, err);
    if (rc == -ENOENT)
        return GRPC_STATUS_NOT_FOUND;
    if (rc == -ENOTSUP)
        return GRPC_STATUS_FAILED_PRECONDITION;
    if (rc == -E2BIG)
        return GRPC_STATUS_RESOURCE_EXHAUSTED;
    if (rc == -ECANCELED)
        return GRPC_STATUS_UNAVAILABLE;
    if (rc < 0)
        return GRPC_STATUS_INTERNAL;
    return GRPC_STATUS_OK;
}

static void call_metadata(gcall *c, const uint8_t *msg, size_t len)
{
    char err[ERR_LEN] = "";
    Tensorflow__Serving__GetModelMetadataRequest *req =
        tensorflow__serving__get_model_metadata_request__unpack(NULL, len, msg);
    if (!req) {
        predict_grpc_call_reply(c, GRPC_STATUS_INVALID_ARGUMENT,
                                "the request is not a GetModelMetadataRequest message", NULL, 0);
        return;
    }
    grpc_status_code code = GRPC_STATUS_OK;
    if (req->n_metadata_field == 0) {
        err_set(err, -EINVAL, "metadata_field is empty; ask for \"signature_def\"");
        code = GRPC_STATUS_INVALID_ARGUMENT;
    }
    for (size_t i = 0; code == GRPC_STATUS_OK && i < req->n_metadata_field; i++) {
        if (strcmp(req->metadata_field[i], "signature_def") != 0) {
            err_set(err, -EINVAL,
                    "metadata_field \"%.100s\" is not supported; ask for "
                    "\"signature_def\"",
                    req->metadata_field[i]);
            code = GRPC_STATUS_INVALID_ARGUMENT;
        }
    }
    if (code == GRPC_STATUS_OK)
        code = call_resolve(c, req->model_spec, err);
    tensorflow__serving__get_model_metadata_request__free_unpacked(req, NULL);
    if (code == GRPC_STATUS_OK)
        code = call_model(c, err);
    if (code != GRPC_STATUS_OK) {
        predict_grpc_call_reply(c, code, err, NULL, 0);
        return;
    }
    uint8_t *buf;
    size_t n;
    if (tfs_metadata_response(c->t.name, c->t.version, predict_model_info(c->m), &buf, &n) < 0) {
        predict_grpc_call_reply(c, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory for the response",
                                NULL, 0);
        return;
    }
    predict_grpc_call_reply(c, GRPC_STATUS_OK, NULL, buf, n);
}

/* Runs on the engine thread: hands the finished request back to ours (grpc.c's top comment). */
static void call_notify(void *arg)
{
    gcall *c = arg;
    pthread_mutex_lock(&c->mu);
    grpc_call_start_batch(c->call, NULL, 0, c, NULL);
    pthread_mutex_unlock(&c->mu);
}

/* The input tensor of a PredictRequest: the only one, under any name. */
static const Tensorflow__Serving__PredictRequest__InputsEntry *
predict_input(const Tensorflow__Serving__PredictRequest *req, char *err)
{
    if (req->n_inputs == 1)
        return req->inputs[0];
    if (req->n_inputs == 0)
        err_set(err, -EINVAL, "inputs is empty; give one tensor, \"%s\"", TFS_INPUT);
    else
        err_set(err, -EINVAL, "inputs holds %zu tensors; the model takes one, \"%s\"",
                req->n_inputs, TFS_INPUT);
    return NULL;
}

/* Decodes, checks and prepares the request's rows, and submits them: ST_WAIT, or a status. */
static grpc_status_code predict_start(gcall *c, const Tensorflow__Serving__PredictRequest *req,
                                      char *err)
{
    for (size_t i = 0; i < req->n_output_filter; i++) {
        if (strcmp(req->output_filter[i], TFS_OUTPUT) != 0) {
            err_set(err, -EINVAL, "output_filter names \"%.100s\"; the only output is \"%s\"",
                    req->output_filter[i], TFS_OUTPUT);
            return GRPC_STATUS_INVALID_ARGUMENT;
        }
    }
    grpc_status_code code = call_resolve(c, req->model_spec, err);
    if (code != GRPC_STATUS_OK)
        return code;
    const Tensorflow__Serving__PredictRequest__InputsEntry *in = predict_input(req, err);
    if (!in)
        return GRPC_STATUS_INVALID_ARGUMENT;
    code = call_model(c, err);
    if (code != GRPC_STATUS_OK)
        return code;
    const predict_info *info = predict_model_info(c->m);

    float *vals = NULL, *rows = NULL;
    int64_t dims[TFS_MAX_DIMS];
    int ndim = 0;
    int rc =
        tfs_tensor_floats(in->value, in->key, PREDICT_GRPC_MAX_VALUES, &vals, dims, &ndim, err);
    if (rc < 0) {
        code = rc == -ENOMEM ? GRPC_STATUS_RESOURCE_EXHAUSTED : GRPC_STATUS_INVALID_ARGUMENT;
        goto out;
    }
    size_t n = (size_t)dims[0];
    size_t per_row = (size_t)info->inputs * sizeof(float);
    if (per_row == 0 || n > PREDICT_GRPC_MAX_ROWS / per_row) {
        err_set(err, -EINVAL,
                "inputs[\"%s\"] has %zu instances; this model takes at most %zu "
                "in one request",
                in->key, n, per_row ? PREDICT_GRPC_MAX_ROWS / per_row : 0);
        code = GRPC_STATUS_INVALID_ARGUMENT;
        goto out;
    }
    rows = malloc(n * per_row);
    if (!rows) {
        err_set(err, -ENOMEM, "out of memory for %zu rows", n);
        code = GRPC_STATUS_RESOURCE_EXHAUSTED;
        goto out;
    }
    char perr[ERR_LEN] = "";
    rc = predict_prepare(info, vals, n, dims + 1, ndim - 1, rows, perr);
    if (rc < 0) {
        err_set(err, rc, "inputs[\"%s\"]: %s", in->key, perr);
        code = GRPC_STATUS_INVALID_ARGUMENT;
        goto out;
    }
    c->rows = n;
    c->state = ST_WAIT; /* before submit: notify may run before it returns */
    rc = predict_submit(c->g->o.engine, c->m, rows, n, call_notify, c, &c->req, err);
    if (rc < 0) {
        c->state = ST_READ;
        code = rc == -ECANCELED ? GRPC_STATUS_UNAVAILABLE : GRPC_STATUS_RESOURCE_EXHAUSTED;
    }
out:
    free(vals);
    free(rows);
    return code;
}

static void call_predict(gcall *c, const uint8_t *msg, size_t len)
{
    char err[ERR_LEN] = "";
    Tensorflow__Serving__PredictRequest *req =
        tensorflow__serving__predict_request__unpack(NULL, len, msg);
    if (!req) {
        predict_grpc_call_reply(c, GRPC_STATUS_INVALID_ARGUMENT,
                                "the request is not a PredictRequest message", NULL, 0);
        return;
    }
    grpc_status_code code = predict_start(c, req, err);
    tensorflow__serving__predict_request__free_unpacked(req, NULL);
    if (code != GRPC_STATUS_OK)
        predict_grpc_call_reply(c, code, err, NULL, 0);
}

/* The engine finished c's request (ST_WAIT's tag): the answer, or why not. */
void predict_grpc_call_done(gcall *c)
{
    char err[ERR_LEN] = "";
    const float *out;
    int rc = predict_req_result(c->req, &out, err);
    if (rc < 0) {
        predict_grpc_call_reply(
            c, rc == -ENOMEM ? GRPC_STATUS_RESOURCE_EXHAUSTED : GRPC_STATUS_UNAVAILABLE, err, NULL,
            0);
        return;
    }
    uint8_t *buf;
    size_t n;
    int k = predict_model_info(c->m)->outputs;
    if (tfs_predict_response(c->t.name, c->t.version, out, c->rows, k, &buf, &n) < 0) {
        predict_grpc_call_reply(c, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory for the response",
                                NULL, 0);
        return;
    }
    predict_grpc_call_reply(c, GRPC_STATUS_OK, NULL, buf, n);
}

/* The request message arrived (ST_READ's tag): dispatch on the method (known since ST_NEW). */
void predict_grpc_call_read(gcall *c)
{
    if (!c->method) {
        char *m = grpc_slice_to_c_string(c->details.method);
        char detail[300];
        snprintf(detail, sizeof detail, "the method %.200s is not served", m ? m : "?");
        gpr_free(m);
        predict_grpc_call_reply(c, GRPC_STATUS_UNIMPLEMENTED, detail, NULL, 0);
        return;
    }
    if (!c->recv) {
        predict_grpc_call_reply(c, GRPC_STATUS_INVALID_ARGUMENT,
                                "the call carried no request message", NULL, 0);
        return;
    }
    grpc_byte_buffer_reader r;
    if (!grpc_byte_buffer_reader_init(&r, c->recv)) {
        predict_grpc_call_reply(c, GRPC_STATUS_INVALID_ARGUMENT,
                                "the request message could not be read", NULL, 0);
        return;
    }
    grpc_slice s = grpc_byte_buffer_reader_readall(&r);
    grpc_byte_buffer_reader_destroy(&r);
    grpc_byte_buffer_destroy(c->recv);
    c->recv = NULL;
    if (strcmp(c->method, "Predict") == 0)
        call_predict(c, GRPC_SLICE_START_PTR(s), GRPC_SLICE_LENGTH(s));
    else
        call_metadata(c, GRPC_SLICE_START_PTR(s), GRPC_SLICE_LENGTH(s));
    grpc_slice_unref(s);
}
