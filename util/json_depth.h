/* json_depth: how deeply a JSON text nests, found without parsing it — checked before jansson's
 * recursive parser sees a body, so that nesting cannot exhaust its stack. Shared by the HTTP
 * layer (every JSON body) and the job document (a job file read by `trainyard train`). */
#ifndef TRAINYARD_UTIL_JSON_DEPTH_H
#define TRAINYARD_UTIL_JSON_DEPTH_H

#include <stddef.h>

/* The deepest nesting of arrays and objects in text[0..len), counting [ and { outside strings
 * (escaped quotes included); stops counting once past limit, so the answer is at most
 * limit + 1. */
size_t json_text_depth(const char *text, size_t len, size_t limit);

#endif
