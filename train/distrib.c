/* distrib: trainer_group over Open MPI (see distrib.h). */
#include "train/distrib.h"

#include <errno.h>
#include <limits.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util/err.h"

/* MPI counts are ints: a broadcast goes in pieces of at most this many bytes. */
#define DISTRIB_PIECE (1u << 30)

static int mpi_fail(int code, const char *what, char *err)
{
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(code, text, &len) != MPI_SUCCESS)
        snprintf(text, sizeof text, "error %d", code);
    return err_set(err, -EIO, "%s: %s", what, text);
}

static int distrib_sum(void *user, float *v, size_t n, char *err)
{
    (void)user;
    while (n > 0) {
        int count = n > INT_MAX ? INT_MAX : (int)n;
        int rc = MPI_Allreduce(MPI_IN_PLACE, v, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS)
            return mpi_fail(rc, "MPI_Allreduce", err);
        v += count;
        n -= (size_t)count;
    }
    return 0;
}

static int distrib_share(void *user, void *buf, size_t n, char *err)
{
    (void)user;
    unsigned char *at = buf;
    while (n > 0) {
        size_t piece = n > DISTRIB_PIECE ? DISTRIB_PIECE : n;
        int rc = MPI_Bcast(at, (int)piece, MPI_BYTE, 0, MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS)
            return mpi_fail(rc, "MPI_Bcast", err);
        at += piece;
        n -= piece;
    }
    return 0;
}

static int distrib_meet(void *user, double timeout_s, volatile sig_atomic_t *stop, char *err)
{
    distrib *d = user;
    if (d->unmet) /* an earlier meeting is still open: the group is past meeting again */
        return err_set(err, -ETIMEDOUT, "the ranks did not all arrive at the last meeting");
    MPI_Request req;
    int rc = MPI_Ibarrier(MPI_COMM_WORLD, &req);
    if (rc != MPI_SUCCESS)
        return mpi_fail(rc, "MPI_Ibarrier", err);
    struct timespec t0, now, nap = {0, 10 * 1000 * 1000};
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        int done = 0;
        rc = MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS)
            return mpi_fail(rc, "MPI_Test", err);
        if (done)
            return 0;
        clock_gettime(CLOCK_MONOTONIC, &now);
        double waited = (double)(now.tv_sec - t0.tv_sec) + (now.tv_nsec - t0.tv_nsec) / 1e9;
        if ((stop && *stop) || waited >= timeout_s) {
            d->unmet = 1; /* the request stays open: distrib_end must not wait for it */
            return stop && *stop ? err_set(err, -EINTR, "stopped while waiting for the ranks")
                                 : err_set(err, -ETIMEDOUT,
                                           "the other ranks did not end within %.0f s", timeout_s);
        }
        nanosleep(&nap, NULL);
    }
}

int distrib_init(int *argc, char ***argv, distrib *out, char *err)
{
    memset(out, 0, sizeof *out);
    int rc = MPI_Init(argc, argv);
    if (rc != MPI_SUCCESS)
        return err_set(err, -EIO, "MPI_Init failed (error %d): was this started by mpirun or srun?",
                       rc);
    /* Errors come back as codes, and each is reported as the job's failure. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &out->group.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &out->group.size);
    out->group.sum = distrib_sum;
    out->group.share = distrib_share;
    out->group.meet = distrib_meet;
    out->group.user = out;
    MPI_Comm local;
    rc = MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, out->group.rank, MPI_INFO_NULL,
                             &local);
    if (rc != MPI_SUCCESS)
        return mpi_fail(rc, "MPI_Comm_split_type", err);
    MPI_Comm_rank(local, &out->local_rank);
    MPI_Comm_size(local, &out->local_size);
    MPI_Comm_free(&local);
    return 0;
}

int distrib_gather(distrib *d, const void *mine, void *all, size_t each, char *err)
{
    (void)d;
    if (each > INT_MAX)
        return err_set(err, -E2BIG, "MPI_Allgather: %zu bytes a rank is too many", each);
    int rc = MPI_Allgather(mine, (int)each, MPI_BYTE, all, (int)each, MPI_BYTE, MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? 0 : mpi_fail(rc, "MPI_Allgather", err);
}

void distrib_end(distrib *d)
{
    (void)d;
    MPI_Finalize();
}

void distrib_abort(distrib *d, int code)
{
    (void)d;
    MPI_Abort(MPI_COMM_WORLD, code);
    _exit(code); /* MPI_Abort does not return; this keeps the compiler sure of it */
}
