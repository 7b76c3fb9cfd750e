/* serve: `trainyard serve` as a module — the API, the scheduler and SQLite in one process, plus
 * one local worker process per OpenCL device, supervised and restarted when one dies. The CLI
 * (cli/cmd_serve.c) parses and checks the flags into a serve_opts and calls serve_run, which
 * owns everything after that: the data-directory lock, tokens, TLS, the HTTP server, the sweep
 * loop, the local workers and the shutdown (serve.c says how each works).
 *
 * Layer: cli -> serve -> api -> scheduler -> db; nothing below reaches up to it.
 *
 * Ownership: serve_opts borrows its strings, except cert_pem and key_pem, which serve_run takes:
 * it wipes and frees them (serve_pem_free) once the HTTP server holds its own copies, on every
 * path. */
#ifndef TRAINYARD_SERVE_SERVE_H
#define TRAINYARD_SERVE_SERVE_H

#include <stdint.h>

#include "scheduler/supervisor.h"

/* The most local workers `serve --workers` may start. */
#define SERVE_MAX_WORKERS SUPERVISOR_MAX_WORKERS

typedef struct serve_opts {
    const char *bind;                /* address to listen on ("127.0.0.1") */
    int port;                        /* 0 picks a free one */
    const char *data_dir;            /* made when missing */
    long workers;                    /* local workers; -1: one per device, 0: none */
    const char *tls_cert;            /* the certificate's file, for messages; NULL: plain HTTP */
    const char *tls_key;             /* the key's file, for messages */
    char *cert_pem, *key_pem;        /* their PEM text (taken, see above); NULL: plain HTTP */
    const char *dataset_root;        /* --dataset-root, or NULL */
    const char *dataset_allow;       /* the joined --dataset-allow list, or NULL */
    const char *dataset_ca;          /* --dataset-ca, or NULL */
    const char *max_dataset_bytes;   /* --max-dataset-bytes as given, or NULL */
    const char *dataset_cache;       /* --dataset-cache as given (for local workers), or NULL */
    const char *dataset_cache_bytes; /* --dataset-cache-bytes as given, or NULL */
    const char *const *worker_args;  /* more words for each local worker's command line (the
                                        script flags), NULL-terminated, or NULL */
    int slurm_scripts;               /* --allow-scripts: the Slurm executor takes script
                                        jobs too */
    const char *const *slurm_script_args; /* the script flags alone, for the Slurm ranks:
                                              NULL-terminated, or NULL */
    long lease_seconds, checkpoint_seconds, dataset_stall_seconds, shutdown_seconds;
    uint64_t max_artifact_bytes;
    uint64_t max_code_bytes;    /* POST /code bodies; 0: the default, 64 MiB */
    long max_queued;            /* per token; 0: no limit */
    long retry_backoff_seconds; /* a lost attempt's back-off base; < 0: the default (5 s) */
    long threads;               /* HTTP threads */
    long max_per_client;        /* connections per client address; 0: no limit */
    const char *predict_device; /* the inference engine's device (predict_opts.device); NULL:
                                   predictions off */
    uint64_t predict_memory;    /* the engine's cap on loaded models' device bytes */
    long predict_max_batch, predict_window_us;
    long grpc_port; /* the gRPC PredictionService's port; -1: none, 0: a free one */
    int executor;   /* enum serve_executor: who runs queued jobs besides workers that lease */
    const char *slurm_partition; /* --slurm-partition, or NULL */
    const char *advertise_url;   /* the URL Slurm's ranks connect to; NULL: serve's own */
    const char *replica_exe;     /* trainyard-replica; NULL: beside the trainyard executable */
    long retain_days;            /* finished jobs older than this many days are removed; 0: never */
    long notify_backoff_ms;      /* webhooks: the first retry's delay (0: the default) */
    long notify_attempts;        /* webhooks: attempts before giving up (0: the default) */
} serve_opts;

/* local: jobs wait for workers (local ones, remote ones) to lease them; slurm: each queued
 * built-in job is also submitted to Slurm (scheduler/slurm.h), and serve starts no local
 * workers unless --workers says how many. */
enum serve_executor { SERVE_EXECUTOR_LOCAL, SERVE_EXECUTOR_SLURM };

/* Runs the service until SIGTERM/SIGINT and a bounded shutdown; returns the process exit status
 * (0 after a clean stop, 1 when it could not start, after saying why on stderr). Once per
 * process: it installs signal handlers and keeps the service's state in statics. */
int serve_run(const serve_opts *o);

/* Wipes and frees a PEM text (it may be a private key); accepts NULL. */
void serve_pem_free(char *pem);

#endif
