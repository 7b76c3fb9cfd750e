/* distrib: the MPI side of a data-parallel job (trainer_group over Open MPI), used only by the
 * `trainyard-replica` program that mpirun or srun starts once per rank.
 *
 * distrib_init() calls MPI_Init and fills a trainer_group over MPI_COMM_WORLD: `sum` is one
 * MPI_Allreduce (MPI_SUM, MPI_FLOAT, in place), `share` MPI_Bcast from rank 0 in pieces of at
 * most 1 GiB (MPI counts are ints). local_rank is the rank among the ranks on this machine
 * (MPI_Comm_split_type SHARED), which picks the device from the worker's --device list.
 *
 * distrib_abort() ends every rank (MPI_Abort): a rank that fails while the others wait in a
 * collective would otherwise leave them waiting. */
#ifndef TRAINYARD_WORKER_DISTRIB_H
#define TRAINYARD_WORKER_DISTRIB_H

#include "train/trainer.h"

typedef struct distrib {
    trainer_group group;
    int local_rank, local_size;
    int unmet; /* a meeting (group.meet) ended before every rank came: end with distrib_abort,
                  not MPI_Finalize, which would wait for them */
} distrib;

int distrib_init(int *argc, char ***argv, distrib *out, char *err);
/* Every rank's each bytes at mine, in rank order, into all (size × each bytes) on every rank
 * (MPI_Allgather): what a distributed script job's ranks tell each other (their machines and
 * ports). */
int distrib_gather(distrib *d, const void *mine, void *all, size_t each, char *err);
/* MPI_Finalize. */
void distrib_end(distrib *d);
/* MPI_Abort(code): does not return. */
void distrib_abort(distrib *d, int code) __attribute__((noreturn));

#endif
