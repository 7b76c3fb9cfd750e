/* http_error: the one table from negative errno-style codes to HTTP statuses and problem titles.
 *
 * Handlers fail with the codes every module returns (util/err.h); this table is the only place
 * that decides what a client sees for each. The rules it keeps:
 *   - bad input maps to a 4xx: -EINVAL, -ERANGE, -EILSEQ, -EBADMSG, -ENAMETOOLONG → 400;
 *   - resource exhaustion that passes maps to 503 (retry), a full disk to 507;
 *   - any code not in the table is a 500 "Internal error": a bug or an I/O failure, never a
 *     client's fault. A handler that meets bad input must return one of the 4xx codes.
 * The table also names the statuses the HTTP layer answers by itself (405, 415, 416, 503, ...)
 * so that every problem title comes from here. */
#ifndef TRAINYARD_HTTP_HTTP_ERROR_H
#define TRAINYARD_HTTP_HTTP_ERROR_H

/* The HTTP status for a negative code; 500 for a code not in the table (or a non-negative one). */
int http_error_status(int code);
/* The problem title for a negative code: "Not found", ...; "Internal error" for unknown codes. */
const char *http_error_title(int code);
/* The problem title for an HTTP status (4xx/5xx), "Error" for one the table does not name. */
const char *http_error_status_title(int status);

#endif
