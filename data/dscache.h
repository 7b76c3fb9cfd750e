/* dscache: an on-disk cache of fetched dataset bytes, shared by the workers and `trainyard
 * train` runs of one machine, so that a second job on the same dataset, and a resumed attempt
 * of the same job, fetch nothing.
 *
 * Keys (a SHA-256, so no URL, credential or signed query is written to disk in clear; the whole
 * URL goes in, credentials included, so that a job never reads bytes that another job's
 * credentials fetched):
 *   - the URL and the job's dataset.sha256 when it gives one: a hit makes no request at all;
 *   - otherwise the URL alone, with the validator the server gave (its ETag, else its
 *     Last-Modified when the answer's Date is at least a second later, as RFC 9110 asks of a
 *     strong one): a hit sends a conditional GET, and a 304 reads the cached bytes, a 200
 *     replaces the entry. An answer with no usable validator is not cached (the note says so).
 * s3:// URLs are cached like http(s) ones, keyed by the s3:// URL itself with the endpoint,
 * region and access key id it was fetched with (never the secret).
 * file:// datasets are not cached: they are local reads already, and a copy would only double
 * the disk they take (the note says so).
 *
 * Storage: one folder, per entry <key>.data (the bytes as fetch_url handed them back: gunzipped)
 * and <key>.json (key, sizes, the stored bytes' sha256, the downloaded bytes' sha256 and size,
 * the validator, created and last use). Reads check the size and the sha256 of the bytes; a
 * corrupt or half entry is a miss and is replaced. Writes go to a temporary name and are renamed
 * into place; renames, removals, the last-use touch and eviction run under an flock on <dir>/lock,
 * so concurrent workers (processes or threads) share the folder safely. The folder holds at most
 * max_bytes of data: before an entry goes in, the least recently used ones go out; an entry
 * larger than the whole cap is not cached. Nothing but this module writes the folder.
 *
 * Ownership: dscache_open's cache is freed by dscache_free (accepts NULL); a dscache may be used
 * by one thread at a time (each worker process has its own). */
#ifndef TRAINYARD_WORKER_DSCACHE_H
#define TRAINYARD_WORKER_DSCACHE_H

#include <stddef.h>
#include <stdint.h>

#include "data/fetch.h"

#define DSCACHE_DEFAULT_BYTES (10ull << 30) /* the cap when none is given: 10 GiB */
#define DSCACHE_NOTE_LEN      640           /* an ERR_LEN message and a sentence around it */

typedef struct dscache dscache;

/* What <key>.json says of an entry. */
typedef struct dscache_entry {
    uint64_t size;               /* bytes stored */
    char sha256[65];             /* hex digest of the stored bytes */
    uint64_t downloaded;         /* bytes that came over the wire for them */
    char wire_sha256[65];        /* their digest: what dataset.sha256 and checkpoints pin */
    int was_gzip;                /* the download was gzip */
    char etag[FETCH_HEADER_MAX]; /* the validator ("" when keyed by sha256) */
    char last_modified[FETCH_HEADER_MAX]; /* used when there is no ETag */
    int64_t created_us, last_use_us;      /* microseconds since the epoch */
} dscache_entry;

/* How dscache_fetch got the bytes. */
enum dscache_how {
    DSCACHE_FETCHED = 0,     /* downloaded (and stored when cacheable) */
    DSCACHE_HIT = 1,         /* from the cache, no request (keyed by sha256) */
    DSCACHE_REVALIDATED = 2, /* from the cache after a 304 to a conditional request */
};

typedef struct dscache_result {
    int how;                     /* enum dscache_how */
    char note[DSCACHE_NOTE_LEN]; /* why the bytes were not cached or the entry not used ("" when
                                    all went as it should), for the job's log */
} dscache_result;

/* The default folder into dir[cap]: $TRAINYARD_DATASET_CACHE, else
 * $XDG_CACHE_HOME/trainyard/datasets, else $HOME/.cache/trainyard/datasets. -ENOENT when none of
 * them is set, -ENAMETOOLONG. */
int dscache_default_dir(char *dir, size_t cap);

/* Opens the cache in dir (made, with its parents, when missing) holding at most max_bytes
 * (0: DSCACHE_DEFAULT_BYTES). */
int dscache_open(const char *dir, uint64_t max_bytes, dscache **out, char *err);
/* Frees c; accepts NULL. */
void dscache_free(dscache *c);
/* The folder and the cap c was opened with. */
const char *dscache_dir(const dscache *c);
uint64_t dscache_cap(const dscache *c);

/* The key of url with the job's sha256 (NULL when none; case does not matter) into key[65]. */
void dscache_key(const char *url, const char *sha256, char key[65]);
/* Reads an entry's metadata only. -ENOENT none, -EBADMSG unreadable. */
int dscache_peek(dscache *c, const char *key, dscache_entry *e, char *err);
/* Reads an entry: its bytes (malloc'd, NUL-terminated, not counted in *len; the caller frees)
 * after checking their size and sha256, and marks it used now. -ENOENT none; -EBADMSG corrupt
 * or half written (the entry is removed). */
int dscache_get(dscache *c, const char *key, char **data, size_t *len, dscache_entry *e, char *err);
/* Stores data under key with e's download facts and validator (size, sha256 and times are
 * filled here), evicting the least recently used entries to stay under the cap. -EFBIG when len
 * alone is over the cap (nothing is written); -errno when the folder cannot be written. */
int dscache_put(dscache *c, const char *key, const char *data, size_t len, const dscache_entry *e,
                char *err);
/* Removes an entry if it is there. */
int dscache_remove(dscache *c, const char *key, char *err);

/* fetch_url through the cache (see the top): same arguments, codes and ownership, plus res.
 * c NULL: fetch_url itself. On a hit the stats describe the original download (its size,
 * gzip, sha256), seconds this call's time. Trouble with the cache itself never fails the
 * fetch: it is said in res->note and the dataset is downloaded. Never returns
 * FETCH_NOT_MODIFIED. */
int dscache_fetch(dscache *c, const char *url, const fetch_opts *o, char **out, size_t *len,
                  fetch_stats *st, dscache_result *res, char *err);

#endif
