/* retention: serve --retain-days — finished jobs older than a cutoff are removed with
 * everything they own, unless marked keep (jobs.keep: the document's "keep", or
 * PATCH /jobs/{id} {"keep": ...} later).
 *
 * A pass takes the oldest finished, unkept jobs with finished_at before the cutoff (the
 * jobs_finished index: the walk reads only what it removes) and removes each in its own
 * transaction with sched_job_delete_unkept (lifecycle.h), which reads keep again in that
 * transaction (a PATCH keep between the pass's read and the delete wins): its rows (events,
 * metrics, logs, artifacts' rows, histograms, deliveries; ON DELETE CASCADE), its model version
 * retired, then its folder <artifacts>/<id> (artifact files, a kept checkpoint, a checkpoint left
 * behind). One job per transaction keeps the write lock short, so submits and heartbeats barely
 * notice; a pass removes at most max_jobs, and serve runs one a second, so a backlog drains over
 * minutes rather than in one long stall.
 *
 * Code bundles (DATADIR_CODE) are not collected: a job names its code by address inside its
 * document, so finding the unreferenced ones means reading every document; left for later. */
#ifndef TRAINYARD_SCHEDULER_RETENTION_H
#define TRAINYARD_SCHEDULER_RETENTION_H

#include <stdint.h>

#include "db/db.h"

#define SCHED_RETAIN_BATCH 100 /* jobs removed per pass */
#define SCHED_DAY_MS       (24LL * 3600 * 1000)

/* One pass: removes up to max_jobs finished jobs with finished_at < cutoff and keep = 0, oldest
 * first; *removed counts them (also when a later one failed: then its code is returned). */
int sched_retain(db *d, const char *artifacts_dir, int64_t cutoff, int max_jobs, int64_t now,
                 int *removed, char *err);
/* Sets job id's keep flag (1 or 0); -ENOENT when there is no such job. */
int sched_job_set_keep(db *d, const char *id, int keep, char *err);

#endif
