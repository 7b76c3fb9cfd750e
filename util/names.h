/* names: the one rule for an artifact's name, shared by the server (which refuses others) and
 * the worker (which leaves a script's output file of another name out, saying so, rather than
 * failing its upload). */
#ifndef TRAINYARD_UTIL_NAMES_H
#define TRAINYARD_UTIL_NAMES_H

#define NAME_ARTIFACT_MAX 128

/* 1 when name is 1 to NAME_ARTIFACT_MAX letters, digits, '.', '_' or '-', not starting with
 * '.' (so no path, and no dot file such as the server's own .checkpoint). */
int name_artifact_ok(const char *name);

#endif
