/* url: the userinfo ("user:password@") of a URL, found, removed from what is shown, or put
 * back.
 *
 * A URL's authority runs from after "scheme://" to the first '/', '?' or '#'; its userinfo is
 * what comes before the first '@' in it, as libcurl's parser reads it (a URL that libcurl
 * accepts has no other '@' there). The text is taken as it was written, percent-encoding
 * included; nothing is decoded. Query strings are left alone: a presigned URL's signature is
 * not userinfo, and these functions do not hide it. */
#ifndef TRAINYARD_UTIL_URL_H
#define TRAINYARD_UTIL_URL_H

#include <stddef.h>

#define URL_REDACTED "***" /* what stands for the userinfo in a redacted URL */

/* 1 when url has userinfo, with its offset and length (without the '@') in *at and *len; 0
 * when it has none, an empty one ("scheme://@host") or is not scheme://... */
int url_userinfo_span(const char *url, size_t *at, size_t *len);
/* A malloc'd copy of url with its userinfo replaced by userinfo ("" or NULL: removed with its
 * '@'), or inserted when url has none; NULL when out of memory or url is not scheme://... */
char *url_userinfo_set(const char *url, const char *userinfo);
/* A malloc'd copy of url as it may be shown: its userinfo, if any, replaced by URL_REDACTED;
 * NULL when out of memory. */
char *url_redact(const char *url);
/* A malloc'd copy of url's userinfo, NULL when it has none or out of memory. */
char *url_userinfo_dup(const char *url);

#endif
