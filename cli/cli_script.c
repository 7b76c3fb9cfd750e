/* cli_script: the flags that let a worker run users' own training scripts, shared by
 * `trainyard worker` (which uses them) and `trainyard serve` (which passes them on to its local
 * workers word for word). docs/OPERATIONS.md, "Script jobs", says what each one opens up. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "worker/agent.h"

int cli_script_flag(const char *cmd, int argc, char **argv, int *i, agent_opts *o,
                    const char **words, size_t *nwords, size_t cap)
{
    static const char *const switches[] = {"--allow-scripts", "--allow-pip", "--script-network",
                                           "--no-sandbox"};
    static const char *const valued[] = {"--python", "--script-memory", "--script-ro-bind",
                                         "--script-cache", "--script-grace-seconds"};
    const char *a = argv[*i];
    int sw = -1, val = -1;
    for (int k = 0; k < 4; k++)
        if (!strcmp(a, switches[k]))
            sw = k;
    for (int k = 0; k < 5; k++)
        if (!strcmp(a, valued[k]))
            val = k;
    if (sw < 0 && val < 0)
        return 0;
    const char *v = NULL;
    if (val >= 0) {
        if (*i + 1 >= argc) {
            fprintf(stderr, "trainyard %s: '%s' needs a value (try --help)\n", cmd, a);
            return -EINVAL;
        }
        v = argv[++*i];
    }
    switch (sw) {
    case 0:
        o->allow_scripts = 1;
        break;
    case 1:
        o->allow_pip = 1;
        break;
    case 2:
        o->script_network = 1;
        break;
    case 3:
        o->no_sandbox = 1;
        break;
    default:
        break;
    }
    if (val == 0) {
        o->python = v;
    } else if (val == 1) {
        if (cli_bytes(cmd, a, v, &o->script_memory) < 0)
            return -EINVAL;
    } else if (val == 2) {
        o->script_ro_bind = v;
    } else if (val == 3) {
        o->script_cache = v;
    } else if (val == 4) {
        char *end = NULL;
        double s = strtod(v, &end);
        if (end == v || *end || !(s > 0 && s <= 3600)) {
            fprintf(stderr, "trainyard %s: %s takes seconds above 0, up to 3600, not '%s'\n", cmd,
                    a, v);
            return -EINVAL;
        }
        o->script_grace_s = s;
    }
    if (words) {
        if (*nwords + 2 >= cap) {
            fprintf(stderr, "trainyard %s: too many script options\n", cmd);
            return -E2BIG;
        }
        words[(*nwords)++] = a;
        if (v)
            words[(*nwords)++] = v;
        words[*nwords] = NULL;
    }
    return 1;
}
