/* cli_size: byte counts on the command line, as plain digits or with a binary suffix. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli/cli.h"

int cli_bytes(const char *cmd, const char *flag, const char *v, uint64_t *out)
{
    char *end = NULL;
    errno = 0;
    unsigned long long n = v[0] >= '0' && v[0] <= '9' ? strtoull(v, &end, 10) : 0;
    unsigned shift = 0;
    if (end && *end) {
        static const char units[] = "KMGT";
        for (unsigned i = 0; units[i] && !shift; i++)
            if (*end == units[i] || *end == units[i] + 32)
                shift = 10 * (i + 1);
        end += shift != 0;
    }
    if (!end || end == v || *end || errno == ERANGE || n == 0 ||
        (shift && n > (UINT64_MAX >> shift))) {
        fprintf(stderr,
                "trainyard %s: %s takes a byte count above 0 (digits, or with K, M, G or T for "
                "KiB, MiB, GiB, TiB), not '%s'\n",
                cmd, flag, v);
        return -EINVAL;
    }
    *out = (uint64_t)n << shift;
    return 0;
}
