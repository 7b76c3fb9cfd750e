/* pymodule: the trainyard Python module (python/trainyard/__init__.py), embedded at build time
 * by api/embed_text.py. A script job's folder gets it as lib/trainyard/__init__.py, so that
 * `import trainyard` works in every script without installing anything on the worker. */
#ifndef TRAINYARD_WORKER_PYMODULE_H
#define TRAINYARD_WORKER_PYMODULE_H

#include <stddef.h>

extern const char pymodule_init_py[];
extern const size_t pymodule_init_py_len;

#endif
