/* rank_env: a distributed script job's framework variables (see rank_env.h). */
#include "worker/rank_env.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "util/json_out.h"

static char *entry(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static char *entry(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0)
        s = NULL;
    va_end(ap);
    return s;
}

/* TF_CONFIG's JSON text (malloc'd), or NULL. */
static char *tf_config(const rank_env_in *in)
{
    json_t *workers = json_array();
    for (int r = 0; workers && r < in->size; r++) {
        char *addr = entry("%s:%d", in->hosts[r], in->ports[r]);
        if (!addr || json_array_append_new(workers, json_string(addr)) < 0) {
            free(addr);
            json_decref(workers);
            return NULL;
        }
        free(addr);
    }
    json_t *doc = json_pack("{s:{s:o}, s:{s:s, s:i}}", "cluster", "worker", workers, "task", "type",
                            "worker", "index", in->rank);
    char *text = doc ? json_out_dumps(doc, JSON_COMPACT) : NULL;
    json_decref(doc);
    return text;
}

int rank_env_make(const rank_env_in *in, char ***out)
{
    if (in->size < 1 || in->rank < 0 || in->rank >= in->size || in->local_rank < 0 ||
        in->local_rank >= in->local_size)
        return -EINVAL;
    char **env = calloc(RANK_ENV_COUNT + 1, sizeof *env);
    char *tf = tf_config(in);
    if (!env || !tf) {
        free(env);
        free(tf);
        return -ENOMEM;
    }
    int n = 0;
    env[n++] = entry("TRAINYARD_RANK=%d", in->rank);
    env[n++] = entry("TRAINYARD_WORLD_SIZE=%d", in->size);
    env[n++] = entry("RANK=%d", in->rank);
    env[n++] = entry("WORLD_SIZE=%d", in->size);
    env[n++] = entry("LOCAL_RANK=%d", in->local_rank);
    env[n++] = entry("LOCAL_WORLD_SIZE=%d", in->local_size);
    env[n++] = entry("MASTER_ADDR=%s", in->master_addr);
    env[n++] = entry("MASTER_PORT=%d", in->master_port);
    env[n++] = entry("TF_CONFIG=%s", tf);
    free(tf);
    for (int i = 0; i < n; i++) {
        if (!env[i]) {
            rank_env_free(env);
            return -ENOMEM;
        }
    }
    *out = env;
    return 0;
}

void rank_env_free(char **env)
{
    for (size_t i = 0; env && i < RANK_ENV_COUNT; i++)
        free(env[i]);
    free(env);
}
