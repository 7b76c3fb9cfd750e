/* cmd_train: `trainyard train JOB.json --out DIR` runs a whole job in this process, with no
 * server: the same trainer a worker runs, printing one line per epoch. It is the baseline the
 * platform's overhead is measured against, and the quickest way to debug a job document. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "kernels/kernels.h"
#include "proto/tfevents.h"
#include "util/dynbuf.h"
#include "util/err.h"
#include "data/dscache.h"
#include "data/fetch.h"
#include "train/kbuild.h"
#include "job/job.h"
#include "train/trainer.h"

/* The default least time between two checkpoints (see trainer.h for the trade-off). */
#define TRAIN_CHECKPOINT_SECONDS 10.0

static const char usage_text[] =
    "usage: trainyard train JOB.json --out DIR [options]\n"
    "\n"
    "Runs a training job in this process (no server) and writes model.safetensors,\n"
    "metrics.csv, job.json, train.log, checkpoint.safetensors and a TensorBoard event file\n"
    "(events.out.tfevents.<start time>.trainyard: every metric per epoch, and with\n"
    "\"tensorboard\": {\"histograms\": true} each weight tensor's histogram) to DIR.\n"
    "JOB.json may be - for standard input.\n"
    "\n"
    "options:\n"
    "  --out DIR            where the artifacts go (required; created if missing)\n"
    "  --dataset-root DIR   where file:// dataset URLs may point (default: the current\n"
    "                       directory)\n"
    "  --dataset-allow PATTERNS\n"
    "                       hosts datasets may come from: a name (data.example.com), a\n"
    "                       wildcard (*.example.com), an address (10.1.2.3, ::1) or a CIDR\n"
    "                       block (10.0.0.0/8); comma-separated, repeatable (default: any\n"
    "                       host). Unlike serve and worker, train runs on your own machine\n"
    "                       and allows private and loopback addresses\n"
    "  --dataset-ca FILE    PEM bundle that verifies an https dataset host instead of the\n"
    "                       system store (for a private CA)\n"
    "  --max-dataset-bytes N\n"
    "                       refuse a dataset larger than N bytes (K, M, G suffixes; default\n"
    "                       2G)\n" CLI_DSCACHE_HELP CLI_S3_HELP
    "  --resume FILE        continue from a checkpoint.safetensors that this same job\n"
    "                       wrote (after a crash or kill); the result is identical to an\n"
    "                       uninterrupted run, and metrics.csv holds every epoch once\n"
    "  --init-model FILE    start from the weights of this model.safetensors (another\n"
    "                       job's, of the same architecture) instead of the seed's; the\n"
    "                       server does this for a job with \"init_from\"\n"
    "  --checkpoint-seconds S\n"
    "                       write the checkpoint after an epoch only when S seconds have\n"
    "                       passed since the last one (default 10; 0: every epoch; -1:\n"
    "                       never); the last epoch always gets one\n"
    "  --val-outputs FILE.npy\n"
    "                       after training, write the model's outputs on the validation\n"
    "                       rows, in order, as a float32 .npy of [rows, outputs]\n"
    "                       (probabilities for classification: softmax or sigmoid applied);\n"
    "                       needs validation rows (validation_split, or a test set)\n"
    "  --quiet              print only errors\n"
    "\n"
    "The device follows the job's resources.device (gpu, cpu, any); TRAINYARD_DEVICE=<index>\n"
    "forces one from `trainyard devices`. Exit status: 0 trained, 1 failed, 2 bad usage or an\n"
    "invalid job document.\n";

static char *read_all(const char *path, size_t *len, char *err)
{
    FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    if (!f) {
        err_set(err, -errno, "cannot open %s: %s", path, strerror(errno));
        return NULL;
    }
    dynbuf doc;
    dynbuf_init(&doc, 1 << 20); /* a job document is small; the API caps bodies at 1 MiB too */
    char chunk[1 << 14];
    int rc = 0;
    for (;;) {
        size_t got = fread(chunk, 1, sizeof chunk, f);
        if (got == 0)
            break;
        rc = dynbuf_add(&doc, chunk, got);
        if (rc < 0)
            break;
    }
    if (rc == 0 && ferror(f))
        rc = err_set(err, -EIO, "cannot read %s", path);
    if (f != stdin)
        fclose(f);
    if (rc == -EFBIG)
        err_set(err, rc, "%s is larger than 1 MiB: not a job document", path);
    else if (rc == -ENOMEM)
        err_set(err, rc, "out of memory reading %s", path);
    char *text = rc == 0 ? dynbuf_take(&doc, len) : NULL;
    if (rc == 0 && !text)
        err_set(err, -ENOMEM, "out of memory reading %s", path);
    dynbuf_free(&doc);
    return text;
}

/* What the hooks of one run share: the printing switch and the event file. */
typedef struct train_run {
    int quiet;
    const char *out;
    tfevents *events; /* opened at the first epoch this run trains */
    char events_path[PATH_MAX];
    char err[ERR_LEN]; /* why the event file could not be made */
} train_run;

static void print_line(void *user, const char *line)
{
    if (!((train_run *)user)->quiet)
        printf("%s\n", line);
    fflush(stdout);
}

static double wall_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Each epoch's metrics (and histograms) into the event file, as the server writes a job's. A
 * resumed run starts a file of its own; TensorBoard reads every file in the folder. */
static int write_epoch(void *user, const trainer_epoch *e)
{
    train_run *r = user;
    double now = wall_seconds();
    if (!r->events && !r->err[0]) {
        int n = snprintf(r->events_path, sizeof r->events_path,
                         "%s/events.out.tfevents.%lld.trainyard", r->out, (long long)now);
        if (n < 0 || (size_t)n >= sizeof r->events_path)
            err_set(r->err, -ENAMETOOLONG, "%s: the path is too long", r->out);
        else if (tfevents_open(r->events_path, now, &r->events, r->err) < 0)
            r->events = NULL;
    }
    if (!r->events)
        return 0;
    static const char *const names[] = {"loss",         "val_loss", "accuracy",
                                        "val_accuracy", "seconds",  "samples_per_second"};
    const double values[] = {e->loss,         e->val_loss, e->accuracy,
                             e->val_accuracy, e->seconds,  e->samples_per_second};
    const char *tags[6];
    double vals[6];
    size_t n = 0;
    for (size_t k = 0; k < 6; k++)
        if (!isnan(values[k])) {
            tags[n] = names[k];
            vals[n++] = values[k];
        }
    tfevents_scalars(r->events, now, e->epoch, tags, vals, n);
    size_t i;
    json_t *h;
    json_array_foreach (e->histograms, i, h) {
        const char *tensor = json_string_value(json_object_get(h, "tensor"));
        if (tensor)
            (void)tfevents_histogram_json(r->events, now, e->epoch, tensor, h);
    }
    return 0;
}

/* Closes the event file; its error, if any, goes to stderr (the model is what counts). */
static void close_events(train_run *r)
{
    if (r->events && tfevents_close(r->events, r->err) < 0)
        unlink(r->events_path);
    r->events = NULL;
    if (r->err[0])
        fprintf(stderr, "trainyard train: no TensorBoard event file: %s\n", r->err);
}

int cmd_train(int argc, char **argv)
{
    const char *job_path = NULL, *out = NULL, *root = NULL, *resume = NULL, *init_model = NULL,
               *dataset_ca = NULL, *val_outputs = NULL;
    const char *cache_dir = NULL, *s3_endpoint = NULL, *s3_region = NULL;
    double every = TRAIN_CHECKPOINT_SECONDS;
    uint64_t max_dataset = 0, cache_bytes = 0;
    static char allow[CLI_ALLOW_LEN];
    static train_run run; /* large (paths): not on the stack */
    int quiet = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(usage_text, stdout);
            return 0;
        } else if (!strcmp(a, "--quiet")) {
            quiet = 1;
        } else if ((!strcmp(a, "--out") || !strcmp(a, "--dataset-root")) && i + 1 < argc) {
            *(a[2] == 'o' ? &out : &root) = argv[++i];
        } else if (!strcmp(a, "--dataset-allow") && i + 1 < argc) {
            if (cli_allow_add(allow, sizeof allow, argv[++i], "train") < 0)
                return 2;
        } else if (!strcmp(a, "--resume") && i + 1 < argc) {
            resume = argv[++i];
        } else if (!strcmp(a, "--init-model") && i + 1 < argc) {
            init_model = argv[++i];
        } else if (!strcmp(a, "--val-outputs") && i + 1 < argc) {
            val_outputs = argv[++i];
        } else if (!strcmp(a, "--dataset-ca") && i + 1 < argc) {
            dataset_ca = argv[++i];
            if (cli_pem_check("train", a, dataset_ca) < 0)
                return 2;
        } else if (!strcmp(a, "--max-dataset-bytes") && i + 1 < argc) {
            if (cli_bytes("train", a, argv[++i], &max_dataset) < 0)
                return 2;
        } else if (!strcmp(a, "--dataset-cache") && i + 1 < argc) {
            cache_dir = argv[++i];
        } else if (!strcmp(a, "--s3-endpoint") && i + 1 < argc) {
            s3_endpoint = argv[++i];
        } else if (!strcmp(a, "--s3-region") && i + 1 < argc) {
            s3_region = argv[++i];
        } else if (!strcmp(a, "--dataset-cache-bytes") && i + 1 < argc) {
            if (cli_bytes("train", a, argv[++i], &cache_bytes) < 0)
                return 2;
        } else if (!strcmp(a, "--checkpoint-seconds") && i + 1 < argc) {
            char *end = NULL;
            every = strtod(argv[++i], &end);
            if (end == argv[i] || *end || !isfinite(every)) {
                fprintf(stderr, "trainyard train: --checkpoint-seconds wants a number, not '%s'\n",
                        argv[i]);
                return 2;
            }
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "trainyard train: unknown option '%s' (try --help)\n", a);
            return 2;
        } else if (!job_path) {
            job_path = a;
        } else {
            fprintf(stderr, "trainyard train: one job document at a time ('%s')\n", a);
            return 2;
        }
    }
    fetch_s3 s3;
    if (cli_s3_opts("train", s3_endpoint, s3_region, &s3) < 0)
        return 2;
    if (!job_path || !out) {
        fputs(usage_text, stderr);
        return 2;
    }

    char err[ERR_LEN] = "", cwd[PATH_MAX];
    if (!root)
        root = getcwd(cwd, sizeof cwd);
    size_t len = 0;
    char *text = read_all(job_path, &len, err);
    if (!text) {
        fprintf(stderr, "trainyard train: %s\n", err);
        return 2;
    }
    field_errors errs = {0};
    job_spec *job = NULL;
    dscache *cache = NULL;
    int rc = job_parse(text, len, &job, &errs);
    free(text);
    if (rc == 0 && cli_dscache_open("train", cache_dir, cache_bytes, &cache) < 0) {
        job_free(job);
        return 2;
    }
    if (rc < 0) {
        fprintf(stderr, "trainyard train: %s is not a valid job:\n", job_path);
        for (size_t i = 0; i < errs.count; i++)
            fprintf(stderr, "  %s: %s\n", *errs.items[i].field ? errs.items[i].field : "(document)",
                    errs.items[i].message);
        return 2;
    }
    if (job_is_script(job)) {
        fprintf(stderr,
                "trainyard train: %s is a script job: it runs on a worker (`trainyard serve "
                "--allow-scripts`, or `trainyard worker --allow-scripts`); to try the script "
                "here, run it directly (it falls back to ./output and ./checkpoint, with "
                "TRAINYARD_DATASET naming the dataset file)\n",
                job_path);
        job_free(job);
        dscache_free(cache);
        return 2;
    }

    static const char *const device_names[] = {"any", "gpu", "cpu"};
    ocl_device dev;
    ocl_ctx *c = NULL;
    int status = 1;
    rc = fetch_global_init(err);
    if (rc == 0)
        rc = ocl_device_pick(device_names[job->device], &dev, err);
    if (rc == 0)
        rc = ocl_ctx_new(&dev, NULL, &c, err);
    if (rc < 0) {
        fprintf(stderr, "trainyard train: %s\n", err);
        goto out;
    }
    trainer_opts opts = {.out_dir = out,
                         .dataset_root = root,
                         .dataset_allow = allow[0] ? allow : NULL,
                         .dataset_ca = dataset_ca,
                         .max_dataset_bytes = max_dataset,
                         .allow_private = 1, /* the user's own machine */
                         .resume_from = resume,
                         .init_model = init_model,
                         .checkpoint_seconds = every,
                         .dataset_cache = cache,
                         .s3 = &s3,
                         .val_outputs = val_outputs};
    run = (train_run){.quiet = quiet, .out = out};
    trainer_hooks hooks = {.user = &run, .on_log = print_line, .on_epoch = write_epoch};
    trainer_result res;
    rc = trainer_run(job, c, NULL, &opts, &hooks, &res, err); /* builds the kernels (kbuild) */
    close_events(&run);
    if (rc < 0) {
        fprintf(stderr, "trainyard train: %s\n", err);
        goto out;
    }
    if (!quiet)
        printf("artifacts in %s: model.safetensors metrics.csv job.json train.log "
               "checkpoint.safetensors%s%s\n",
               out, run.events_path[0] && !run.err[0] ? " " : "",
               run.events_path[0] && !run.err[0] ? strrchr(run.events_path, '/') + 1 : "");
    status = 0;
out:
    if (c)
        kbuild_save_detached(c, trainer_kern_families(job)); /* else ocl_ctx_free saves */
    ocl_ctx_free(c);
    job_free(job);
    dscache_free(cache);
    return status;
}
