/* bundle_priv: what the files of script/'s bundle code share; not part of its API.
 *
 *   bundle.c         the streaming walk (gzip → util/tar.c's reader) and every check:
 *                    bundle_check, and the walk bundle_unpack repeats with its writers
 *   bundle_unpack.c  the writers: folders, files and symlinks under dir, opened O_NOFOLLOW
 *   bundle_pack.c    the deterministic writer of a folder as .tar.gz
 *
 * A walker reads one archive: the callbacks (cb) see each member once its header has passed
 * the member rules, with its data pushed in pieces; ctx is theirs. */
#ifndef TRAINYARD_SCRIPT_BUNDLE_PRIV_H
#define TRAINYARD_SCRIPT_BUNDLE_PRIV_H

#include <stddef.h>
#include <stdint.h>

#include "script/bundle.h"
#include "util/tar.h"

#define BLOCK         TAR_BLOCK
#define PATH_CAP      TAR_PATH_MAX /* bytes in a member's path or a symlink target */
#define CHUNK         (64 * 1024)  /* inflate/deflate buffer */
#define DEF_MAX_FILES 10000u
#define DEF_MAX_BYTES (1024ull << 20)

enum { M_FILE, M_DIR, M_LINK };

typedef struct member {
    char *path, *target; /* target: symlinks only */
    int type;
} member;

typedef struct walker walker;
typedef struct walk_cb {
    int (*begin)(walker *w, const char *path, int type, unsigned mode, const char *target,
                 char *err);
    int (*data)(walker *w, const unsigned char *p, size_t n, char *err);
    int (*end)(walker *w, char *err);
} walk_cb;

struct walker {
    uint64_t max_files, max_bytes;
    const walk_cb *cb; /* NULL: check only */
    void *ctx;
    tar_stream tar;      /* util/tar.c's reader: the format */
    int ended;           /* the tar end block was read */
    int in_file;         /* the stream's data pieces are the current file's */
    uint64_t remaining;  /* of the current file's data */
    uint64_t fed;        /* tar bytes seen */
    char path[PATH_CAP]; /* the current member's normalised path */
    member *m;
    size_t n, cap, book;
    uint64_t members, files, bytes;
};

/* Starts a walk with lim's caps (0 or NULL: the defaults) and no callbacks. */
void bundle_walker_init(walker *w, const bundle_limits *lim);
/* Inflates gz and pushes it through the tar walker, then the end-of-archive rules: 0, or
 * -EINVAL / -EFBIG / -ENOMEM (or a callback's code) with err set. */
int bundle_walk(walker *w, const void *gz, size_t len, char *err);
/* Releases what the walk kept (the member list). */
void bundle_walker_free(walker *w);

#endif
