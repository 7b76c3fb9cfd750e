/* cli_dscache: the --dataset-cache DIR and --dataset-cache-bytes N flags that worker and train
 * share (and serve passes on to its local workers). Without --dataset-cache the cache is in the
 * default folder (dscache.h); "none" or "" turns it off. A folder named on the command line that
 * cannot be used is bad usage; the default one that cannot be made only turns the cache off,
 * with a warning, since the run does not need it. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "util/err.h"
#include "data/dscache.h"

int cli_dscache_open(const char *cmd, const char *dir, uint64_t max_bytes, dscache **out)
{
    char def[4096], err[ERR_LEN] = "";
    *out = NULL;
    if (dir && (!*dir || !strcmp(dir, "none")))
        return 0;
    if (!dir) {
        if (dscache_default_dir(def, sizeof def) < 0) {
            fprintf(stderr,
                    "trainyard %s: no dataset cache: neither TRAINYARD_DATASET_CACHE, "
                    "XDG_CACHE_HOME nor HOME is set (give --dataset-cache DIR)\n",
                    cmd);
            return 0;
        }
        if (dscache_open(def, max_bytes, out, err) < 0)
            fprintf(stderr, "trainyard %s: no dataset cache: %s (give --dataset-cache DIR)\n", cmd,
                    err);
        return 0;
    }
    if (dscache_open(dir, max_bytes, out, err) < 0) {
        fprintf(stderr, "trainyard %s: --dataset-cache: %s\n", cmd, err);
        return -EINVAL;
    }
    return 0;
}
