/* fetch: downloads a dataset with libcurl into memory.
 *
 * Schemes: http and https always; file:// only for paths under opts->file_root (after resolving
 * symlinks and ".."), refused when file_root is NULL. Redirects are followed only to http/https,
 * at most 5. A connect timeout, a total timeout and a low-speed abort bound the time; max_bytes
 * bounds both the download and the gunzipped size.
 *
 * Hosts (see allow.h for the pattern forms): when opts->allow lists patterns, the host of the
 * URL and of every redirect target must match one. Unless opts->allow_private, a connection to a
 * private, loopback, link-local, unspecified, multicast or CGNAT address is refused unless that
 * address or the URL's host matches a pattern; the check runs on each resolved address as its
 * socket is opened, so neither DNS answers nor redirects get around it. file:// is governed by
 * file_root alone. When sha256 is given, the downloaded bytes
 * (before decompression) must match. Gzip is recognised by its magic bytes, not the name.
 *
 * Conditional requests (for dscache.h): with if_none_match or if_modified_since set, an http(s)
 * answer 304 makes fetch_url return FETCH_NOT_MODIFIED (a positive code, never an error) with
 * *out and *len untouched. The answer's ETag, Last-Modified and Date headers are handed back in
 * the stats whether or not a conditional header was sent (those of the final answer after
 * redirects; a value that is too long or not printable ASCII is left out).
 *
 * S3: s3://bucket/key is fetched as a path-style GET of <endpoint>/<bucket>/<key> signed with
 * AWS Signature Version 4 (libcurl's CURLOPT_AWS_SIGV4), with the credentials of opts->s3 (the
 * worker's, never the job's: an s3:// URL has no userinfo). The key is percent-decoded as
 * written in the URL and encoded again as S3 canonicalises it. The endpoint's host is trusted:
 * the operator named it, so neither --dataset-allow nor the private-address rule applies to it;
 * redirects are not followed (a signed request goes to that host only). An error answer's S3
 * code (NoSuchKey, AccessDenied, SignatureDoesNotMatch...) is named in the message; the secret
 * key never is. ETag validators and conditional requests work as for http(s).
 *
 * Ownership: *out is malloc'd (NUL-terminated for convenience, not counted in *len). */
#ifndef TRAINYARD_WORKER_FETCH_H
#define TRAINYARD_WORKER_FETCH_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#define FETCH_DEFAULT_MAX_BYTES (2ull << 30) /* max_bytes when 0 */
#define FETCH_NOT_MODIFIED      1            /* fetch_url: 304 to a conditional request */
#define FETCH_HEADER_MAX        256          /* room for a validator header's value and NUL */

/* Where s3:// URLs are fetched and with which credentials; the strings are borrowed. */
typedef struct fetch_s3 {
    const char *endpoint; /* e.g. http://127.0.0.1:9000; NULL: https://s3.<region>.amazonaws.com */
    const char *region;   /* NULL: us-east-1 */
    const char *access_key, *secret_key, *session_token; /* session_token may be NULL */
} fetch_s3;

typedef struct fetch_opts {
    const char *file_root;    /* directory file:// URLs must stay under, or NULL */
    uint64_t max_bytes;       /* 0: FETCH_DEFAULT_MAX_BYTES (2 GiB) */
    long connect_timeout_s;   /* 0: default 10 */
    long total_timeout_s;     /* 0: default 600 */
    long low_speed_timeout_s; /* abort below 1 KiB/s for this long; 0: default 30 */
    const char *sha256;       /* expected hex digest of the downloaded bytes, or NULL */
    const char *allow;        /* comma-separated --dataset-allow patterns, or NULL for none */
    int allow_private;        /* 1: connect to private addresses without an allow pattern */
    const char *ca_file;      /* PEM CA bundle verifying https hosts instead of the system
                                 store (every hop of a redirect), or NULL */
    /* When *stop becomes nonzero the download ends with -EINTR; NULL: never. */
    volatile sig_atomic_t *stop;
    const char *if_none_match;     /* sent as If-None-Match (an earlier ETag), or NULL */
    const char *if_modified_since; /* sent as If-Modified-Since (an earlier Last-Modified), or
                                      NULL; both must be printable ASCII (-EINVAL otherwise) */
    int keep_gzip;                 /* 1: gzip bytes are handed back as they came (a code bundle);
                                      stats' was_gzip still says what they were */
    const fetch_s3 *s3; /* endpoint and credentials for s3:// URLs; NULL: s3:// is refused */
} fetch_opts;

typedef struct fetch_stats {
    uint64_t downloaded;   /* bytes on the wire */
    uint64_t decompressed; /* bytes after gunzip (== downloaded when not compressed) */
    int was_gzip;
    double seconds;
    char sha256[65]; /* hex digest of the downloaded bytes (always computed) */
    /* Headers of the final http(s) answer, "" when absent (and for file://). */
    char etag[FETCH_HEADER_MAX];
    char last_modified[FETCH_HEADER_MAX];
    char date[FETCH_HEADER_MAX];
} fetch_stats;

/* Fetches url into *out / *len and returns 0, or FETCH_NOT_MODIFIED (see the top). -EINVAL bad URL
 * or scheme or allow pattern, -EKEYREJECTED an https host's certificate that fails verification (or
 * an unusable ca_file), -EACCES file outside the root, file:// without a root, a redirect to
 * another scheme, a host not in the allow list or a private address not allowed, s3:// without
 * opts->s3 or credentials, an S3 403 (AccessDenied, SignatureDoesNotMatch...), -ENOENT no such
 * file under the root or an S3 404 (NoSuchKey, NoSuchBucket), -EFBIG over max_bytes, -ETIMEDOUT,
 * -EIO transfer or HTTP error (the status is in err), -EBADMSG checksum mismatch or corrupt gzip,
 * -ENOMEM, -EINTR stopped by opts->stop (http(s) and s3 only: a file:// read is quick). On
 * FETCH_NOT_MODIFIED the stats hold the 304's headers, downloaded 0 and the sha256 of nothing.
 * opts and stats may be NULL (defaults; no file://, no s3://). Messages show the URL without
 * credentials, query or fragment. */
int fetch_url(const char *url, const fetch_opts *opts, char **out, size_t *len, fetch_stats *stats,
              char *err);

/* Fills *s3 from the environment: the endpoint from AWS_ENDPOINT_URL_S3, else AWS_ENDPOINT_URL;
 * the region from AWS_REGION, else AWS_DEFAULT_REGION; AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY
 * and AWS_SESSION_TOKEN. endpoint_flag and region_flag (--s3-endpoint, --s3-region), when not
 * NULL, override the environment. Empty values count as unset. The strings point into the
 * environment or the flags. */
void fetch_s3_from_env(fetch_s3 *s3, const char *endpoint_flag, const char *region_flag);

/* The http(s) URL that s3url (s3://bucket/key) is fetched from with s3's endpoint and region,
 * malloc'd into *http_url. -EINVAL with a sentence when s3url or the endpoint or region is not
 * usable, -ENOMEM. */
int fetch_s3_url(const char *s3url, const fetch_s3 *s3, char **http_url, char *err);

/* Initialises libcurl once per process; call before threads start. */
int fetch_global_init(char *err);

#endif
