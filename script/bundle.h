/* bundle: users' code folders as .tar.gz bundles (POST /code, code_url, checkpoints of script
 * jobs): a check that writes nothing, an unpack, and a deterministic pack.
 *
 * The format is util/tar.c's streaming reader (the one data/tar.c walks in memory too): a
 * bundle is checked as it is inflated (memory bounded by the caps' bookkeeping, never by the
 * unpacked size), and this module's rules decide which members pass. Formats read: POSIX
 * ustar, pax (path, linkpath, size records), GNU (long names 'L', long link targets 'K',
 * base-256 sizes); concatenated gzip members are one stream.
 *
 * Safety rules (bundle_check, and so bundle_unpack): every member is a regular file, a
 * directory or a symlink; its path is relative with no ".." component; a symlink's target is
 * relative and, resolved from the link's folder, stays inside the tree without a ".." that
 * steps back out of another symlink; no member lies beneath a symlink; no path appears twice.
 * Hard links, devices, FIFOs and any other type are refused. */
#ifndef TRAINYARD_SCRIPT_BUNDLE_H
#define TRAINYARD_SCRIPT_BUNDLE_H

#include <stddef.h>
#include <stdint.h>

typedef struct bundle_limits {
    uint64_t max_files;          /* 0: 10,000 */
    uint64_t max_unpacked_bytes; /* 0: 1 GiB */
} bundle_limits;
typedef struct bundle_info {
    uint64_t files, unpacked_bytes;
} bundle_info;
/* Checks a .tar.gz held in memory without writing anything: gzip (streamed: memory bounded,
 * not the unpacked size), then ustar/GNU/pax; members are regular files, directories, or
 * symlinks whose relative target stays inside the tree; an absolute path, a ".." component, a
 * hard link, a device or FIFO, a symlink out, or caps passed are refused with a sentence naming
 * the member: -EINVAL (bad member or not a tar.gz), -EFBIG (caps), -ENOMEM. */
int bundle_check(const void *gz, size_t len, const bundle_limits *lim, bundle_info *info,
                 char *err);
/* The same checks, then unpacks into dir (made; it must not exist or be empty). Files get 0755
 * when the member's owner-exec bit is set, else 0644; directories 0755. On failure the partial
 * tree is removed. */
int bundle_unpack(const void *gz, size_t len, const char *dir, const bundle_limits *lim,
                  bundle_info *info, char *err);
/* Packs the folder dir into a deterministic .tar.gz at out_path (written to a temporary name
 * beside it, then renamed): entries sorted by path, mtime 0, uid/gid 0, modes 0755/0644 by the
 * owner-exec bit, directories and symlinks kept as such; other file types skipped. The same
 * folder contents always give the same bytes (so the same code address). */
int bundle_pack(const char *dir, const char *out_path, const bundle_limits *lim, bundle_info *info,
                char *err);

#endif
