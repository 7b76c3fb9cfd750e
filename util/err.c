/* err: one helper for writing a failure's sentence into a caller's buffer. */
#include "util/err.h"

#include <stdarg.h>
#include <stdio.h>

int err_set(char *err, int code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, ERR_LEN, fmt, ap);
        va_end(ap);
    }
    return code;
}
