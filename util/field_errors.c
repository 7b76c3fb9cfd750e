/* field_errors: the bounded {field, message} list validators fill (see field_errors.h).
 *
 * Invariant: errs->count <= FIELD_ERRORS_MAX, and every field and message is NUL-terminated
 * valid UTF-8 provided the text given was (snprintf may cut inside a character; the cut is
 * moved back to the character's start). */
#include "util/field_errors.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "util/utf8.h"

void field_errors_add(field_errors *errs, const char *field, const char *fmt, ...)
{
    if (errs->count >= FIELD_ERRORS_MAX) {
        field_error *last = &errs->items[FIELD_ERRORS_MAX - 1];
        last->field[0] = '\0';
        snprintf(last->message, sizeof last->message,
                 "more than %d problems; fix these and send again to see the rest",
                 FIELD_ERRORS_MAX - 1);
        return;
    }
    field_error *e = &errs->items[errs->count++];
    snprintf(e->field, sizeof e->field, "%s", field);
    utf8_trim_end(e->field);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    utf8_trim_end(e->message);
}

void field_errors_unknown(field_errors *errs, const json_t *obj, const char *path,
                          const char *const *known)
{
    const char *key;
    json_t *val;
    /* Iteration does not modify the object; jansson's iterator API just is not const. */
    json_object_foreach ((json_t *)obj, key, val) {
        size_t i = 0;
        while (known[i] && strcmp(known[i], key) != 0)
            i++;
        if (known[i])
            continue;
        char field[sizeof errs->items[0].field];
        snprintf(field, sizeof field, "%s%s%s", path, path[0] ? "." : "", key);
        field_errors_add(errs, field, "unknown field");
    }
}
