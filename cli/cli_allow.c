/* cli_allow: the --dataset-allow flag that serve, worker and train share. The flag may be given
 * more than once and each value may hold several comma-separated patterns; they are checked as
 * they are read (a bad CIDR is bad usage, not a failed job later) and joined with commas into
 * one list, which is how fetch and the worker's argv carry it. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "util/err.h"
#include "util/allow.h"

int cli_allow_add(char *list, size_t cap, const char *value, const char *cmd)
{
    char err[ERR_LEN] = "";
    allow_list l = {0};
    int rc = allow_list_parse(value, &l, err);
    allow_list_free(&l);
    if (rc < 0) {
        fprintf(stderr, "trainyard %s: %s\n", cmd, err);
        return rc;
    }
    size_t used = strlen(list), n = strlen(value);
    if (used + 1 + n + 1 > cap) {
        fprintf(stderr, "trainyard %s: --dataset-allow lists more than %zu bytes of patterns\n",
                cmd, cap - 1);
        return -E2BIG;
    }
    if (used > 0)
        list[used++] = ',';
    memcpy(list + used, value, n + 1);
    return 0;
}
