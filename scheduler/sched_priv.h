/* sched_priv: what the scheduler's own files share and nothing else sees. */
#ifndef TRAINYARD_SCHEDULER_SCHED_PRIV_H
#define TRAINYARD_SCHEDULER_SCHED_PRIV_H

#include "db/jobs.h"

/* 0 when j is running and leased to worker_id; -EBUSY (409) with the reason otherwise. */
int sched_holder_check(const db_job *j, const char *worker_id, char *err);

#endif
