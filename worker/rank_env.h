/* rank_env: the environment each rank of a distributed script job gets, so that the script's
 * framework finds its peers as it would under its own launcher (docs/DISTRIBUTED.md, "Script
 * jobs").
 *
 *   TRAINYARD_RANK, TRAINYARD_WORLD_SIZE      this rank and the job's count of ranks
 *   RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT
 *                                             as `torchrun` sets them (init_method "env://")
 *   TF_CONFIG                                 {"cluster": {"worker": [every rank's host:port]},
 *                                              "task": {"type": "worker", "index": rank}}, what
 *                                             TFConfigClusterResolver reads
 *
 * Pure: the addresses are worked out by trainyard-replica (cli/replica_main.c), which knows the
 * ranks' machines and whether their sandboxes share one network namespace. */
#ifndef TRAINYARD_WORKER_RANK_ENV_H
#define TRAINYARD_WORKER_RANK_ENV_H

#define RANK_ENV_COUNT 9     /* the variables above */
#define RANK_HOST_MAX  256   /* bytes of a host name or address, NUL included */
#define RANK_PORT_BASE 29500 /* in a namespace of the ranks' own: MASTER_PORT, then TF's ports */

typedef struct rank_env_in {
    int rank, size;             /* 0 <= rank < size */
    int local_rank, local_size; /* among the ranks on this machine */
    const char *master_addr;    /* rank 0's address, as the others reach it */
    int master_port;
    const char *const *hosts; /* size addresses: each rank's, as the others reach it */
    const int *ports;         /* size ports: each rank's TensorFlow worker */
} rank_env_in;

/* The RANK_ENV_COUNT NAME=VALUE strings into *out (a NULL-terminated malloc'd array of malloc'd
 * strings; rank_env_free): 0, -EINVAL for a rank outside the group, or -ENOMEM. */
int rank_env_make(const rank_env_in *in, char ***out);
void rank_env_free(char **env);

#endif
