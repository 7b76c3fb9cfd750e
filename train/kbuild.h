/* kbuild: a job's kernels built on two cores when the kernel cache is cold (`trainyard train`).
 *
 * PoCL compiles one thing at a time per process: a family's program at clBuildProgram, and a
 * work-group function per kernel and local size at its first launch. A cold job spends seconds
 * on both before its first batch. kbuild splits the families the job needs between this process
 * and a helper process (`trainyard __kernel-build`, started with posix_spawn), each of which
 * builds its share and then runs a "dry step" — a throwaway model of the job's own shapes
 * trained one batch and evaluated on zeros, launching only the kernels of its own families — so
 * that every work-group function the first batch needs is compiled before it, half on each
 * core. The helper's work reaches this process through PoCL's own kernel cache (the programs
 * and work-group functions it compiled, keyed by PoCL on source, options, device and local
 * size): building the helper's families here afterwards compiles nothing.
 *
 * Used only where that channel exists: a PoCL platform with its kernel cache on, and families
 * missing from trainyard's own cache (a warm cache builds in-process as before, in ~0.01 s).
 * Anything that fails on the helper's side (it cannot start, dies, or its dry step fails) costs
 * this process the compiles it would have done anyway, never the job.
 *
 *   kbuild_start   → spawn the helper; build this process's families (on a thread: the caller
 *                    may load its data meanwhile, touching no OpenCL object of c)
 *   kbuild_dry     → send the shapes to the helper; dry step of this process's families
 *   kbuild_finish  → wait for the helper; the job's kern with every family
 *
 * Ownership: kbuild_free() stops and reaps a helper still running and frees the partial kern;
 * it accepts NULL. The kern kbuild_finish() returns is the caller's (kern_free). */
#ifndef TRAINYARD_WORKER_KBUILD_H
#define TRAINYARD_WORKER_KBUILD_H

#include "job/job.h"
#include "kernels/kernels.h"

typedef struct kbuild kbuild;

/* What the dry step needs beyond the job: the model's sizes and the batches' making. */
typedef struct kbuild_shape {
    int inputs, outputs, loss; /* as model_new takes them */
    int capacity;              /* rows of the model's buffers */
    int batch;                 /* rows of a training batch */
    int val_rows;              /* rows of one evaluation (0: none) */
    int image;                 /* 1: batches come from kern_image_batch with image_geom */
    kern_image image_geom;     /* the trainer's geometry (n_src is ignored) */
} kbuild_shape;

/* Starts building the kernels of `families` for job on c: spawns the helper when it pays (see
 * above), builds this process's share. *out is always set on success; with nothing to split it
 * simply holds the kern of every family (kbuild_finish returns it). */
int kbuild_start(ocl_ctx *c, const job_spec *job, unsigned families, kbuild **out, char *err);
/* Sends the shapes to the helper and runs this process's dry step (nothing when not split);
 * fails only when this process's build failed: a dry step that fails costs compiles later. */
int kbuild_dry(kbuild *b, const kbuild_shape *s, char *err);
/* Waits for the helper and builds the rest: *out gets the kern of every family (the caller's). */
int kbuild_finish(kbuild *b, kern **out, char *err);
/* Stops a helper still running, reaps it, frees what b holds; accepts NULL. */
void kbuild_free(kbuild *b);
/* Writes c's compiled, unsaved programs (of the families in the mask) to trainyard's kernel
 * cache from a detached process, so that this one can exit: taking a binary from PoCL compiles a
 * generic work-group function of every kernel in it (seconds for the image families), which the
 * job never needed. Used where kbuild splits (PoCL, its cache on): that process then builds
 * from PoCL's cache and writes the files, which carry every work-group function this run
 * compiled. It holds an exclusive flock on CACHE_DIR/.save.lock until it is done (one saver at a
 * time; the others leave it the work). Elsewhere, or when it cannot start, c saves itself when
 * freed, as before. Clears c's unsaved marks when the saver took them. */
void kbuild_save_detached(ocl_ctx *c, unsigned families);
/* The helper's side: `trainyard __kernel-build PARENT_PID DEVICE_INDEX FAMILIES CACHE_DIR`,
 * reading one JSON line of job and shapes on stdin. Exit status 0 when its dry step ran. */
int kbuild_helper_main(int argc, char **argv);
/* The saver's side: `trainyard __kernel-save DEVICE_INDEX FAMILIES CACHE_DIR`, its lock on fd 3. */
int kbuild_saver_main(int argc, char **argv);

#endif
