/* fetch_priv: what fetch.c and fetch_s3.c share and nothing else sees. */
#ifndef TRAINYARD_WORKER_FETCH_PRIV_H
#define TRAINYARD_WORKER_FETCH_PRIV_H

#include <curl/curl.h>
#include <stddef.h>

#include "data/fetch.h"

/* The SHA-256 of an empty body: the x-amz-content-sha256 of a GET (fetch_s3.c says why). */
#define FETCH_S3_EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

/* s3->region, or the default one. */
const char *fetch_s3_region(const fetch_s3 *s3);
/* The error of an S3 answer with status (>= 300) and its body: the S3 code and message from the
 * XML into err, with a hint. Returns -ENOENT for 404, -EACCES for 403, else -EIO. */
int fetch_s3_error(long status, const char *body, size_t len, const char *shown, char *err);

/* Appends the S3 request headers to *list: x-amz-content-sha256, and x-amz-security-token when
 * s3 has a session token (-EINVAL when it cannot be a header value). */
int fetch_s3_headers(const fetch_s3 *s3, struct curl_slist **list, char *err);

#endif
