/* fetch: downloads a dataset with libcurl into memory.
 *
 * Schemes: http and https always; file:// only for paths under opts->file_root (after resolving
 * symlinks and ".."), refused when file_root is NULL. Redirects are followed only to http/https,
 * at most 5. A connect timeout, a total timeout and a low-speed abort bound the time; max_bytes
 * bounds both the download and the gunzipped size. When sha256 is given, the downloaded bytes
 * (before decompression) must match. Gzip is recognised by its magic bytes, not the name.
 *
 * Ownership: *out is malloc'd (NUL-terminated for convenience, not counted in *len). */
#ifndef TRAINYARD_WORKER_FETCH_H
#define TRAINYARD_WORKER_FETCH_H

#include <stddef.h>
#include <stdint.h>

typedef struct fetch_opts {
    const char *file_root;    /* directory file:// URLs must stay under, or NULL */
    uint64_t max_bytes;       /* 0: default 2 GiB */
    long connect_timeout_s;   /* 0: default 10 */
    long total_timeout_s;     /* 0: default 600 */
    long low_speed_timeout_s; /* abort below 1 KiB/s for this long; 0: default 30 */
    const char *sha256;       /* expected hex digest of the downloaded bytes, or NULL */
} fetch_opts;

typedef struct fetch_stats {
    uint64_t downloaded;   /* bytes on the wire */
    uint64_t decompressed; /* bytes after gunzip (== downloaded when not compressed) */
    int was_gzip;
    double seconds;
    char sha256[65]; /* hex digest of the downloaded bytes (always computed) */
} fetch_stats;

/* Fetches url into *out / *len. -EINVAL bad URL or scheme, -EACCES file outside the root,
 * file:// without a root, or a redirect to another scheme, -ENOENT no such file under the root,
 * -EFBIG over max_bytes, -ETIMEDOUT, -EIO transfer or HTTP error (the status is in err),
 * -EBADMSG checksum mismatch or corrupt gzip, -ENOMEM. opts and stats may be NULL (defaults;
 * no file://). Messages show the URL without credentials, query or fragment. */
int fetch_url(const char *url, const fetch_opts *opts, char **out, size_t *len, fetch_stats *stats,
              char *err);

/* Initialises libcurl once per process; call before threads start. */
int fetch_global_init(char *err);

#endif
