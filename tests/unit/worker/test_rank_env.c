/* Tests of worker/rank_env.c: the variables each rank's script gets, read back as the
 * frameworks read them (TF_CONFIG parsed as JSON, torchrun's as numbers). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "tests/unit/check.h"
#include "worker/rank_env.h"

/* The value of NAME in env, or NULL. */
static const char *value(char **env, const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; env && env[i]; i++)
        if (!strncmp(env[i], name, n) && env[i][n] == '=')
            return env[i] + n + 1;
    return NULL;
}

static void test_three_ranks(void)
{
    const char *hosts[] = {"node-a", "node-a", "node-b"};
    const int ports[] = {20001, 20002, 31000};
    rank_env_in in = {.rank = 2,
                      .size = 3,
                      .local_rank = 0,
                      .local_size = 1,
                      .master_addr = "node-a",
                      .master_port = 29400,
                      .hosts = hosts,
                      .ports = ports};
    char **env = NULL;
    CHECK_INT(rank_env_make(&in, &env), 0);
    if (!env)
        return;
    size_t n = 0;
    while (env[n])
        n++;
    CHECK_INT(n, RANK_ENV_COUNT);
    CHECK_STR(value(env, "TRAINYARD_RANK"), "2");
    CHECK_STR(value(env, "TRAINYARD_WORLD_SIZE"), "3");
    CHECK_STR(value(env, "RANK"), "2");
    CHECK_STR(value(env, "WORLD_SIZE"), "3");
    CHECK_STR(value(env, "LOCAL_RANK"), "0");
    CHECK_STR(value(env, "LOCAL_WORLD_SIZE"), "1");
    CHECK_STR(value(env, "MASTER_ADDR"), "node-a");
    CHECK_STR(value(env, "MASTER_PORT"), "29400");
    json_error_t je;
    json_t *tf = json_loads(value(env, "TF_CONFIG") ? value(env, "TF_CONFIG") : "", 0, &je);
    CHECK(tf != NULL);
    json_t *workers = json_object_get(json_object_get(tf, "cluster"), "worker");
    CHECK_INT(json_array_size(workers), 3);
    CHECK_STR(json_string_value(json_array_get(workers, 0)), "node-a:20001");
    CHECK_STR(json_string_value(json_array_get(workers, 1)), "node-a:20002");
    CHECK_STR(json_string_value(json_array_get(workers, 2)), "node-b:31000");
    json_t *task = json_object_get(tf, "task");
    CHECK_STR(json_string_value(json_object_get(task, "type")), "worker");
    CHECK_INT(json_integer_value(json_object_get(task, "index")), 2);
    CHECK_INT(json_object_size(tf), 2); /* cluster and task, nothing else for the resolver */
    json_decref(tf);
    rank_env_free(env);
}

static void test_refusals(void)
{
    const char *hosts[] = {"127.0.0.1"};
    const int ports[] = {29501};
    rank_env_in in = {.rank = 1,
                      .size = 1,
                      .local_rank = 0,
                      .local_size = 1,
                      .master_addr = "127.0.0.1",
                      .master_port = 29500,
                      .hosts = hosts,
                      .ports = ports};
    char **env = NULL;
    CHECK_INT(rank_env_make(&in, &env), -EINVAL); /* rank outside the group */
    in.rank = 0;
    in.local_rank = 1;
    CHECK_INT(rank_env_make(&in, &env), -EINVAL); /* local rank outside this machine's */
    CHECK(env == NULL);
    in.local_rank = 0;
    CHECK_INT(rank_env_make(&in, &env), 0); /* a group of one is a group */
    CHECK_STR(value(env, "TF_CONFIG"),
              "{\"cluster\":{\"worker\":[\"127.0.0.1:29501\"]},\"task\":{\"type\":\"worker\","
              "\"index\":0}}");
    rank_env_free(env);
    rank_env_free(NULL);
}

int main(void)
{
    test_three_ranks();
    test_refusals();
    return check_exit();
}
