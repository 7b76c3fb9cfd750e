/* http_error: the one table from negative errno-style codes to HTTP statuses and problem titles.
 *
 * Rows with a code map that code; rows with code 0 only name a status that the HTTP layer
 * answers by itself (405 with Allow, 415 from http_body_json, 416 from http_reply_file). The
 * first row for a status gives that status's title. Lookups are linear: the table is short and
 * only read on error paths. */
#include "http/http_error.h"

#include <errno.h>
#include <stddef.h>

typedef struct http_error_row {
    int code; /* negative errno-style code; 0: a status-only row */
    int status;
    const char *title;
} http_error_row;

static const http_error_row http_error_table[] = {
    /* the client's request is wrong */
    {-EINVAL, 400, "Invalid request"},
    {-ERANGE, 400, "Invalid request"},
    {-EILSEQ, 400, "Invalid request"},
    {-EBADMSG, 400, "Invalid request"},
    {-ENAMETOOLONG, 400, "Invalid request"},
    {-EPERM, 401, "Unauthorized"}, /* no token, or one that is not valid */
    {-EACCES, 403, "Forbidden"},   /* a valid token that may not do this */
    {-ENOENT, 404, "Not found"},
    {0, 405, "Method not allowed"},
    {-EEXIST, 409, "Conflict"},
    {-EBUSY, 409, "Conflict"},
    {-EFBIG, 413, "Payload too large"},
    {-E2BIG, 413, "Payload too large"},
    {-EMEDIUMTYPE, 415, "Unsupported media type"},
    {-EUSERS, 429, "Too many requests"}, /* a per-token limit is reached */
    {0, 416, "Range not satisfiable"},
    {-EMSGSIZE, 431, "Request header fields too large"},
    /* the server cannot do it */
    {0, 500, "Internal error"},
    {-ENOSYS, 501, "Not implemented"},
    {-EOPNOTSUPP, 501, "Not implemented"},
    {-EAGAIN, 503, "Service unavailable"},
    {-ETIMEDOUT, 503, "Service unavailable"}, /* e.g. the database stayed busy */
    {-ENOMEM, 503, "Service unavailable"},
    {-EMFILE, 503, "Service unavailable"},
    {-ENFILE, 503, "Service unavailable"},
    {-ESHUTDOWN, 503, "Service unavailable"}, /* the server is stopping */
    {-ENOSPC, 507, "Insufficient storage"},
    {-EDQUOT, 507, "Insufficient storage"},
    /* statuses only the HTTP layer answers, titled here so all titles live in one place */
    {0, 304, "Not modified"},
    {0, 411, "Length required"},
    {0, 414, "URI too long"},
};

#define HTTP_ERROR_ROWS (sizeof(http_error_table) / sizeof(http_error_table[0]))

static const http_error_row *http_error_find(int code)
{
    if (code >= 0)
        return NULL;
    for (size_t i = 0; i < HTTP_ERROR_ROWS; i++)
        if (http_error_table[i].code == code)
            return &http_error_table[i];
    return NULL;
}

int http_error_status(int code)
{
    const http_error_row *row = http_error_find(code);
    return row ? row->status : 500;
}

const char *http_error_title(int code)
{
    const http_error_row *row = http_error_find(code);
    return row ? row->title : "Internal error";
}

const char *http_error_status_title(int status)
{
    for (size_t i = 0; i < HTTP_ERROR_ROWS; i++)
        if (http_error_table[i].status == status)
            return http_error_table[i].title;
    return "Error";
}
