/* field_errors: a bounded list of {field, message} problems found in a JSON document.
 *
 * Validators (the job document, the worker protocol's bodies, token requests) report every
 * problem they find rather than stopping at the first; the API turns the list into a
 * problem+json "errors" array. A field is a JSON path ("hyperparameters.epochs",
 * "devices[1].kind"), "" for the document as a whole. Fields and messages are cut at a UTF-8
 * character boundary, so both stay valid UTF-8. At most FIELD_ERRORS_MAX are kept; when more are
 * found the last slot says so. The list is a plain value: zero it (or set count to 0) to start. */
#ifndef TRAINYARD_UTIL_FIELD_ERRORS_H
#define TRAINYARD_UTIL_FIELD_ERRORS_H

#include <stddef.h>

#include <jansson.h>

#define FIELD_ERRORS_MAX 32

typedef struct field_error {
    char field[128];
    char message[256];
} field_error;

typedef struct field_errors {
    size_t count; /* <= FIELD_ERRORS_MAX */
    field_error items[FIELD_ERRORS_MAX];
} field_errors;

/* Records one problem; past the cap, the last slot becomes a note that more exist. */
void field_errors_add(field_errors *errs, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Records "unknown field" for every member of obj whose key is not in known (NULL-terminated),
 * at the field path.key (key alone when path is ""): the one rule for members no section of a
 * document takes, in job documents, API bodies and sweeps alike. */
void field_errors_unknown(field_errors *errs, const json_t *obj, const char *path,
                          const char *const *known);

#endif
