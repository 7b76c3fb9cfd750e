/* grpc-load: a closed-loop load generator for TensorFlow Serving's PredictionService/Predict on
 * gRPC's C core, for bench/predict.sh (there is no gRPC load tool here, and a Python client would
 * measure Python).
 *
 * One thread drives one completion queue. CLIENTS calls are kept in flight, spread round-robin
 * over CHANNELS channels (each its own HTTP/2 connection: the channels do not share subchannels);
 * when a call completes, the same slot starts the next one at once. Every call is one batch of
 * six ops (metadata with the bearer token, the request, close, and the three receives), so a
 * slot has exactly one tag outstanding. The request is packed once and every call sends a
 * reference to the same bytes.
 *
 * Calls started during the first WARMUP seconds are not counted; after WARMUP + SECONDS no call
 * starts and those in flight are drained. Prints one JSON line:
 *   {"clients": C, "channels": K, "seconds": s, "calls": n, "calls_per_s": x, "rows_per_s": r,
 *    "p50_ms": a, "p99_ms": b, "errors": e, "first_error": "...", "outputs": v}
 * where "outputs" is the number of output values in the first answer (a check that the answers
 * are predictions, not errors), and the exit status is 1 when any call failed.
 *
 * usage: grpc-load HOST:PORT MODEL SHAPE [CLIENTS [SECONDS [CHANNELS [WARMUP]]]]
 *   SHAPE: the input tensor's dims, comma-separated, e.g. 1,784 or 1,32,32,3 (first: rows);
 *   the token comes from $TRAINYARD_TOKEN. Values are a fixed pseudo-random 0..255 pattern. */
#include <errno.h>
#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "predict/tf_serving.pb-c.h"

#define LOAD_MAX_DIMS    8
#define LOAD_MAX_CLIENTS 4096
#define LOAD_MAX_SAMPLES (16u << 20) /* latencies kept; past it, calls are counted only */
#define LOAD_MAX_VALUES  (16u << 20) /* values of the request tensor */
#define METHOD_PREDICT   "/tensorflow.serving.PredictionService/Predict"

/* One call slot: the call in flight and what its ops write into. */
typedef struct load_slot {
    grpc_call *call;
    grpc_byte_buffer *send;
    grpc_byte_buffer *recv;
    grpc_metadata_array md_initial;
    grpc_metadata_array md_trailing;
    grpc_status_code status;
    grpc_slice details;
    double t0; /* seconds, monotonic */
    int counted;
} load_slot;

typedef struct load_run {
    grpc_channel **channels;
    int n_channels;
    grpc_completion_queue *cq;
    grpc_slice request;
    grpc_slice method;
    grpc_metadata token_md;
    double *lat_ms;
    size_t n_lat, cap_lat;
    size_t calls, errors;
    size_t rows; /* per call */
    char first_error[256];
    long outputs; /* values in the first answer; -1 until one is decoded */
} load_run;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double percentile(const double *sorted, size_t n, double p)
{
    if (n == 0)
        return 0;
    size_t i = (size_t)(p * (double)(n - 1) + 0.5);
    return sorted[i < n ? i : n - 1];
}

/* The packed PredictRequest for MODEL with a float tensor of the given dims into *out. */
static int load_request_pack(const char *model, const int64_t *dims, int ndim, grpc_slice *out)
{
    size_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= (size_t)dims[i];
    if (n == 0 || n > LOAD_MAX_VALUES)
        return -EINVAL;
    int rc = -ENOMEM;
    float *vals = malloc(n * sizeof *vals);
    Tensorflow__TensorShapeProto__Dim dim[LOAD_MAX_DIMS];
    Tensorflow__TensorShapeProto__Dim *dimp[LOAD_MAX_DIMS];
    if (!vals)
        goto out;
    uint32_t s = 12345;
    for (size_t i = 0; i < n; i++) {
        s = s * 1103515245u + 12345u;
        vals[i] = (float)((s >> 16) % 256);
    }
    Tensorflow__TensorShapeProto shape = TENSORFLOW__TENSOR_SHAPE_PROTO__INIT;
    for (int i = 0; i < ndim; i++) {
        tensorflow__tensor_shape_proto__dim__init(&dim[i]);
        dim[i].size = dims[i];
        dimp[i] = &dim[i];
    }
    shape.n_dim = (size_t)ndim;
    shape.dim = dimp;
    Tensorflow__TensorProto tensor = TENSORFLOW__TENSOR_PROTO__INIT;
    tensor.dtype = TENSORFLOW__DATA_TYPE__DT_FLOAT;
    tensor.tensor_shape = &shape;
    tensor.n_float_val = n;
    tensor.float_val = vals;
    Tensorflow__Serving__PredictRequest__InputsEntry entry =
        TENSORFLOW__SERVING__PREDICT_REQUEST__INPUTS_ENTRY__INIT;
    entry.key = "inputs";
    entry.value = &tensor;
    Tensorflow__Serving__PredictRequest__InputsEntry *entries[1] = {&entry};
    Tensorflow__Serving__ModelSpec spec = TENSORFLOW__SERVING__MODEL_SPEC__INIT;
    spec.name = (char *)model;
    spec.signature_name = "serving_default";
    Tensorflow__Serving__PredictRequest req = TENSORFLOW__SERVING__PREDICT_REQUEST__INIT;
    req.model_spec = &spec;
    req.n_inputs = 1;
    req.inputs = entries;
    size_t len = tensorflow__serving__predict_request__get_packed_size(&req);
    grpc_slice slice = grpc_slice_malloc(len);
    tensorflow__serving__predict_request__pack(&req, GRPC_SLICE_START_PTR(slice));
    *out = slice;
    rc = 0;
out:
    free(vals);
    return rc;
}

/* The number of output values in an answer; -1 when it does not decode. */
static long load_answer_values(grpc_byte_buffer *bb)
{
    grpc_byte_buffer_reader r;
    if (!grpc_byte_buffer_reader_init(&r, bb))
        return -1;
    grpc_slice all = grpc_byte_buffer_reader_readall(&r);
    grpc_byte_buffer_reader_destroy(&r);
    Tensorflow__Serving__PredictResponse *resp = tensorflow__serving__predict_response__unpack(
        NULL, GRPC_SLICE_LENGTH(all), GRPC_SLICE_START_PTR(all));
    grpc_slice_unref(all);
    if (!resp)
        return -1;
    long n = -1;
    if (resp->n_outputs == 1 && resp->outputs[0]->value) {
        const Tensorflow__TensorProto *t = resp->outputs[0]->value;
        n = t->n_float_val ? (long)t->n_float_val : (long)(t->tensor_content.len / sizeof(float));
    }
    tensorflow__serving__predict_response__free_unpacked(resp, NULL);
    return n;
}

static int load_slot_start(load_run *r, load_slot *s, grpc_channel *ch, int counted)
{
    memset(s, 0, sizeof *s);
    s->call = grpc_channel_create_call(ch, NULL, GRPC_PROPAGATE_DEFAULTS, r->cq, r->method, NULL,
                                       gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    if (!s->call)
        return -ENOMEM;
    s->send = grpc_raw_byte_buffer_create(&r->request, 1);
    grpc_metadata_array_init(&s->md_initial);
    grpc_metadata_array_init(&s->md_trailing);
    grpc_op ops[6];
    memset(ops, 0, sizeof ops);
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[0].data.send_initial_metadata.count = 1;
    ops[0].data.send_initial_metadata.metadata = &r->token_md;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = s->send;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = &s->md_initial;
    ops[4].op = GRPC_OP_RECV_MESSAGE;
    ops[4].data.recv_message.recv_message = &s->recv;
    ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[5].data.recv_status_on_client.trailing_metadata = &s->md_trailing;
    ops[5].data.recv_status_on_client.status = &s->status;
    ops[5].data.recv_status_on_client.status_details = &s->details;
    s->counted = counted;
    s->t0 = now_s();
    if (grpc_call_start_batch(s->call, ops, 6, s, NULL) != GRPC_CALL_OK)
        return -EIO;
    return 0;
}

/* Records a completed call and frees what it held. */
static void load_slot_finish(load_run *r, load_slot *s, int ok)
{
    double ms = (now_s() - s->t0) * 1e3;
    int good = ok && s->status == GRPC_STATUS_OK && s->recv;
    if (good && r->outputs < 0)
        r->outputs = load_answer_values(s->recv);
    if (s->counted) {
        r->calls++;
        if (!good) {
            r->errors++;
            if (!r->first_error[0]) {
                char *d = grpc_slice_to_c_string(s->details);
                snprintf(r->first_error, sizeof r->first_error, "status %d: %s", (int)s->status, d);
                gpr_free(d);
            }
        } else if (r->n_lat < r->cap_lat) {
            r->lat_ms[r->n_lat++] = ms;
        }
    }
    grpc_metadata_array_destroy(&s->md_initial);
    grpc_metadata_array_destroy(&s->md_trailing);
    grpc_slice_unref(s->details);
    if (s->recv)
        grpc_byte_buffer_destroy(s->recv);
    grpc_byte_buffer_destroy(s->send);
    grpc_call_unref(s->call);
    s->call = NULL;
}

static void json_string(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            printf("\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            printf("\\u%04x", (unsigned char)*s);
        else
            putchar(*s);
    }
    putchar('"');
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: grpc-load HOST:PORT MODEL SHAPE [CLIENTS [SECONDS [CHANNELS "
                        "[WARMUP]]]]\n  the bearer token comes from $TRAINYARD_TOKEN\n");
        return 2;
    }
    const char *target = argv[1], *model = argv[2];
    int clients = argc > 4 ? atoi(argv[4]) : 1;
    double seconds = argc > 5 ? atof(argv[5]) : 5;
    int n_channels = argc > 6 ? atoi(argv[6]) : 1;
    double warmup = argc > 7 ? atof(argv[7]) : 1;
    const char *token = getenv("TRAINYARD_TOKEN");
    if (clients < 1 || clients > LOAD_MAX_CLIENTS || n_channels < 1 || n_channels > clients ||
        seconds <= 0 || warmup < 0) {
        fprintf(stderr, "grpc-load: CLIENTS 1..%d, CHANNELS 1..CLIENTS, SECONDS > 0\n",
                LOAD_MAX_CLIENTS);
        return 2;
    }
    int64_t dims[LOAD_MAX_DIMS] = {0};
    int ndim = 0;
    for (char *p = argv[3]; *p && ndim < LOAD_MAX_DIMS;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 1) {
            fprintf(stderr, "grpc-load: SHAPE is dims like 1,784; got %s\n", argv[3]);
            return 2;
        }
        dims[ndim++] = v;
        p = *end == ',' ? end + 1 : end;
    }

    grpc_init();
    load_run r;
    memset(&r, 0, sizeof r);
    r.outputs = -1;
    r.rows = (size_t)dims[0];
    if (load_request_pack(model, dims, ndim, &r.request) < 0) {
        fprintf(stderr, "grpc-load: cannot build the request for shape %s\n", argv[3]);
        return 2;
    }
    char bearer[4200];
    snprintf(bearer, sizeof bearer, "Bearer %s", token ? token : "");
    r.token_md.key = grpc_slice_from_static_string("authorization");
    r.token_md.value = grpc_slice_from_copied_string(bearer);
    r.method = grpc_slice_from_static_string(METHOD_PREDICT);
    r.cq = grpc_completion_queue_create_for_next(NULL);
    r.cap_lat = LOAD_MAX_SAMPLES;
    r.lat_ms = malloc(r.cap_lat * sizeof *r.lat_ms);
    r.channels = calloc((size_t)n_channels, sizeof *r.channels);
    load_slot *slots = calloc((size_t)clients, sizeof *slots);
    if (!r.lat_ms || !r.channels || !slots) {
        fprintf(stderr, "grpc-load: out of memory\n");
        return 2;
    }
    /* A local subchannel pool per channel: otherwise channels to one target share a connection. */
    grpc_arg arg = {
        .type = GRPC_ARG_INTEGER, .key = GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, .value.integer = 1};
    grpc_channel_args args = {.num_args = 1, .args = &arg};
    grpc_channel_credentials *creds = grpc_insecure_credentials_create();
    for (int i = 0; i < n_channels; i++)
        r.channels[i] = grpc_channel_create(target, creds, &args);
    grpc_channel_credentials_release(creds);

    double t_start = now_s(), t_count = t_start + warmup, t_end = t_count + seconds;
    int in_flight = 0, failed_start = 0;
    for (int i = 0; i < clients; i++) {
        if (load_slot_start(&r, &slots[i], r.channels[i % n_channels], warmup == 0) < 0) {
            failed_start = 1;
            break;
        }
        in_flight++;
    }
    while (in_flight > 0) {
        grpc_event ev = grpc_completion_queue_next(
            r.cq,
            gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_seconds(30, GPR_TIMESPAN)),
            NULL);
        if (ev.type != GRPC_OP_COMPLETE) {
            fprintf(stderr, "grpc-load: no completion in 30 s (%d calls in flight)\n", in_flight);
            return 1;
        }
        load_slot *s = ev.tag;
        size_t i = (size_t)(s - slots);
        load_slot_finish(&r, s, ev.success);
        in_flight--;
        double t = now_s();
        if (t < t_end && !failed_start) {
            if (load_slot_start(&r, s, r.channels[i % (size_t)n_channels], t >= t_count) < 0)
                failed_start = 1;
            else
                in_flight++;
        }
    }
    double elapsed = now_s() - t_count;
    if (elapsed > seconds)
        elapsed = seconds; /* the drain after t_end completes calls started before it */

    qsort(r.lat_ms, r.n_lat, sizeof *r.lat_ms, cmp_double);
    printf("{\"clients\": %d, \"channels\": %d, \"seconds\": %.2f, \"calls\": %zu, "
           "\"calls_per_s\": %.1f, \"rows_per_s\": %.1f, \"p50_ms\": %.3f, \"p99_ms\": %.3f, "
           "\"errors\": %zu, \"first_error\": ",
           clients, n_channels, elapsed, r.calls, (double)r.calls / elapsed,
           (double)(r.calls * r.rows) / elapsed, percentile(r.lat_ms, r.n_lat, 0.50),
           percentile(r.lat_ms, r.n_lat, 0.99), r.errors);
    json_string(r.first_error);
    printf(", \"outputs\": %ld}\n", r.outputs);

    for (int i = 0; i < n_channels; i++)
        grpc_channel_destroy(r.channels[i]);
    grpc_completion_queue_shutdown(r.cq);
    while (grpc_completion_queue_next(r.cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
           GRPC_QUEUE_SHUTDOWN)
        ;
    grpc_completion_queue_destroy(r.cq);
    grpc_slice_unref(r.request);
    grpc_slice_unref(r.token_md.value);
    free(slots);
    free(r.channels);
    free(r.lat_ms);
    grpc_shutdown();
    return r.errors || failed_start || r.outputs < 0 ? 1 : 0;
}
