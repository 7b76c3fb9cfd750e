/* venv: the Python virtual environments of script jobs whose code has a requirements.txt
 * (the worker's --allow-pip), built once and cached by the file's hash and the interpreter. */
#ifndef TRAINYARD_SCRIPT_VENV_H
#define TRAINYARD_SCRIPT_VENV_H

#include <stddef.h>

/* The interpreter of a venv for requirements (a requirements.txt path), made once per
 * (sha256 of the file, the interpreter's real path) under cache_dir/<key>/ with
 * `python -m venv --system-site-packages` and `python -m pip install -r`, inside bubblewrap
 * with the network on and only that folder writable (plus the code folder read-only, for
 * local paths in the file); flock so concurrent workers build it once; a failed build leaves
 * nothing. out_python[cap] gets <venv>/bin/python. on_log gets pip's output. */
int script_venv(const char *python, const char *requirements, const char *code_dir,
                const char *cache_dir, int sandbox, void (*on_log)(void *, const char *),
                void *user, char *out_python, size_t cap, char *err);
/* $TRAINYARD_VENV_CACHE, else $XDG_CACHE_HOME/trainyard/venvs, else ~/.cache/trainyard/venvs */
int script_venv_default_dir(char *dir, size_t cap);

#endif
