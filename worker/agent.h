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

#include "client/client.h"
#include "kernels/ocl.h"
#include "data/dscache.h"
#include "train/trainer.h"

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
    /* Data-parallel jobs (train/distrib.h, docs/DISTRIBUTED.md) */
    int replicas;            /* --replicas: the most ranks a job may have here (the worker's
                                slots); 1 (or 0): data-parallel jobs are not leased */
    const char *device_list; /* --device as given: ranks take its entries in turn by local
                                rank (one entry: every rank on that device) */
    int rank_threads;        /* --rank-threads: POCL_MAX_PTHREAD_COUNT of each rank; 0: unset */
    const char *mpirun;      /* --mpirun: Open MPI's launcher; NULL: "mpirun" on PATH */
    const char *replica_exe; /* the trainyard-replica program; NULL: beside this executable */
    /* A rank of a distributed script job (set by trainyard-replica; worker/rank_env.h) */
    int script_rank, script_ranks;      /* this rank and the job's ranks; 0 and 0 alone */
    const char *const *script_rank_env; /* the framework's variables, added to the script's */
    int script_netns;                   /* > 0: the holder of the namespace the ranks' sandboxes
                                           share (script/netns.h) */
    const ocl_device *device_info;      /* the worker's device (set by agent_run) */
    volatile sig_atomic_t *stop;        /* set by a signal handler: 1 finish the epoch, hand the job
                                           back and return; 2 the same without finishing the epoch */
} agent_opts;

/* Runs the loop until *stop is set or max_jobs are done. Returns 0, or a negative code when the
 * worker cannot start (no device, kernels fail to build) or cannot register because the
 * server's certificate fails verification (-EKEYREJECTED: retrying cannot help); a server
 * that cannot be reached is retried, not fatal. */
int agent_run(const agent_opts *o, char *err);

/* ---- the ranks of a data-parallel job (the trainyard-replica program) ---------------------
 * The worker that leased a job of N > 1 replicas starts `mpirun -np N trainyard-replica
 * --lease FILE ...` and waits; Slurm's ranks start under `srun --mpi=pmix` and rank 0 leases
 * the job bound to its worker itself (agent_replica_lease). Rank 0 then leads: it runs the job
 * exactly as a worker runs any job (heartbeats, logs, metrics, checkpoints, artifacts, the
 * final report), the trainer in group g. The other ranks follow: the same job and the same
 * steps, reporting nothing (the lease's text reaches them from rank 0 through g->share). */

/* Leases worker_id's job, waiting up to wait_s seconds: 1 with *lease, 0 when none came. */
int agent_replica_lease(const agent_opts *o, client *c, const char *worker_id, int wait_s,
                        json_t **lease, char *err);
/* Rank 0: runs lease's job in group g on ctx/k (k NULL: the trainer builds the job's kernels)
 * and reports it as worker_id. Returns 0 when the trainer ran to its end or stopped with the
 * other ranks, or a negative code when it failed here (the others may then wait in a collective
 * for ever: the caller ends them). */
int agent_lead(const agent_opts *o, client *c, const char *worker_id, ocl_ctx *ctx, kern *k,
               json_t *lease, const trainer_group *g);
/* A rank that failed outside rank 0's run of the job (a follower, or rank 0 before agent_lead):
 * completes worker_id's attempt at lease as lost with why (queued again while attempts are
 * left), on c or a connection of its own when c is NULL. Called before every rank is ended:
 * rank 0, stopped by that, would otherwise hand the job back as a stopping worker does, which
 * costs no attempt. */
void agent_report_lost(const agent_opts *o, client *c, const char *worker_id, const json_t *lease,
                       const char *why);
/* Ranks 1..N-1: run lease's job in group g; a negative code when it failed here. */
int agent_follow(const agent_opts *o, ocl_ctx *ctx, kern *k, const json_t *lease,
                 const trainer_group *g, char *err);

/* Ranks 1..N-1 of a distributed script job (o->script_rank > 0): the script run as
 * agent_script_run runs rank 0's, in its own folder (work_dir/<job>.rank<N>), reporting only its
 * labelled log lines through heartbeats of its own to worker_id's lease; its metrics,
 * checkpoints and output are not kept. Returns 0 when the script ended well or was stopped (the
 * job's cancel or end, which rank 0 reports), or -errno when it failed here (then the caller
 * reports the attempt lost, agent_report_lost, and ends every rank). */
int agent_script_follow(const agent_opts *o, client *c, const char *worker_id, const json_t *lease,
                        const job_spec *job, char *err);
/* The device want names: "any", "gpu", "cpu" (ocl_device_pick) or an index from `trainyard
 * devices`. */
int agent_pick_device(const char *want, ocl_device *out, char *err);
/* The first entry of a --device list ("0,1" → "0"), in a static buffer; "any" for NULL. */
const char *agent_first_device(const char *list);
/* Entry i (taken modulo their count) of a --device list, in a static buffer. */
const char *agent_device_entry(const char *list, int i);
/* The device of the rank local_rank of this machine: its entry of the --device list; an entry
 * that names a kind (gpu, cpu, any) gives the ranks this machine's devices of that kind in turn,
 * so `--device gpu` spreads four ranks over four GPUs. */
int agent_pick_rank_device(const char *list, int local_rank, ocl_device *out, char *err);

/* A device as the API describes it (Device in openapi.yaml), new reference. */
json_t *agent_device_json(const ocl_device *d);

#endif
