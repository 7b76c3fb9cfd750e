/* agent: the worker process's loop — register with the server, lease a job (long poll), run the
 * trainer on this worker's device, stream progress, upload the artifacts, report completion,
 * and lease again. The OpenCL context and compiled kernels are made once and kept for every
 * job, so no job waits for a compile.
 *
 * Two threads per job: the trainer runs on the agent's thread and never waits on the network;
 * a heartbeat thread sends queued log lines and epoch metrics at least every
 * AGENT_HEARTBEAT_MS (at once at a phase change or an epoch's end), extends the lease, and
 * brings back the server's cancel flag, which the trainer polls between steps. */
#ifndef TRAINYARD_WORKER_AGENT_H
#define TRAINYARD_WORKER_AGENT_H

#include <signal.h>

#include <jansson.h>

#include "kernels/ocl.h"
#include "worker/dscache.h"

#define AGENT_HEARTBEAT_MS 500

typedef struct agent_opts {
    const char *server;        /* base URL of the server */
    const char *token;         /* worker token, or NULL */
    const char *ca_file;       /* PEM bundle that verifies an https server; NULL: system store */
    int ca_pinned;             /* ca_file is the server's own certificate (client_set_ca) */
    const char *dataset_ca;    /* PEM bundle for https datasets (fetch.h), or NULL */
    const char *name;          /* shown in GET /workers; default "<host>-<pid>" */
    const char *device;        /* "any", "gpu", "cpu", or a device index from `trainyard devices` */
    const char *work_dir;      /* job folders go here; default $TMPDIR or /tmp */
    const char *dataset_root;  /* where file:// dataset URLs may point, or NULL */
    const char *dataset_allow; /* comma-separated --dataset-allow patterns, or NULL */
    long dataset_stall_s;      /* abort a dataset download stalled this long; 0: default */
    uint64_t max_dataset_bytes; /* refuse datasets larger than this; 0: the fetch default */
    dscache *dataset_cache;     /* fetched datasets kept between jobs and attempts, or NULL */
    const fetch_s3 *s3;         /* endpoint and credentials for s3:// URLs; NULL: refused */
    int max_jobs;               /* stop after this many jobs; 0 = run until stopped */
    double checkpoint_seconds;  /* least time between checkpoints (trainer_opts); 0 every epoch */
    /* Script jobs (worker/script_job.c; docs/OPERATIONS.md, "Script jobs") */
    int allow_scripts;               /* --allow-scripts: lease script jobs (off by default) */
    const char *python;              /* --python: the interpreter of .py scripts; NULL: python3 */
    int allow_pip;                   /* --allow-pip: a requirements.txt goes into a cached venv */
    int script_network;              /* --script-network: the sandbox keeps the network */
    uint64_t script_memory;          /* --script-memory: RLIMIT_DATA of a script; 0: none */
    const char *script_ro_bind;      /* --script-ro-bind: more read-only paths in the sandbox */
    int no_sandbox;                  /* --no-sandbox: scripts run without bubblewrap */
    const char *script_cache;        /* --script-cache: code bundles and venvs; NULL: default */
    double script_grace_s;           /* SIGTERM to SIGKILL on a cancel; 0: script_run's default */
    double script_checkpoint_poll_s; /* how often checkpoint/ is looked at; 0: default */
    const ocl_device *device_info;   /* the worker's device (set by agent_run) */
    volatile sig_atomic_t *stop;     /* set by a signal handler: 1 finish the epoch, hand the job
                                        back and return; 2 the same without finishing the epoch */
} agent_opts;

/* Runs the loop until *stop is set or max_jobs are done. Returns 0, or a negative code when the
 * worker cannot start (no device, kernels fail to build) or cannot register because the
 * server's certificate fails verification (-EKEYREJECTED: retrying cannot help); a server
 * that cannot be reached is retried, not fatal. */
int agent_run(const agent_opts *o, char *err);

/* A device as the API describes it (Device in openapi.yaml), new reference. */
json_t *agent_device_json(const ocl_device *d);

#endif
