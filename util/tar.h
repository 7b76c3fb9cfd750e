/* tar: the one reader of tar archives, a streaming state machine fed bytes. data/tar.c walks an
 * archive held in memory with it (the image datasets), script/bundle.c the inflated stream of a
 * code bundle; each keeps its own policy (member types, path rules, caps) on top.
 *
 * The reader knows the format and nothing else. Each rule, and why it is the one kept:
 *   - Headers: POSIX ustar (magic "ustar\0") and GNU ("ustar "): "ustar" followed by NUL or a
 *     space. Old v7 headers (no magic) are refused. The prefix field is read only in POSIX
 *     headers (GNU keeps times there).
 *   - Checksum: the header's bytes summed with the checksum field read as spaces, either as
 *     unsigned bytes (POSIX) or signed ones (old Sun tars); GNU tar accepts both, so does this.
 *   - Numbers (checksum, mode, size): octal, leading spaces skipped, ended by a NUL, a space or
 *     the field's end; a field that starts with NUL reads 0, an all-space field is refused (as
 *     GNU tar refuses it). GNU base-256 (first byte 0x80) is read; negative values (0xff) and
 *     values past 2^63 - 1 (an off_t) are refused.
 *   - Extension members, consumed here and applied to the next member only: pax 'x' records
 *     "LEN key=value\n" (LEN decimal, the whole record; the key non-empty; the record inside
 *     the member; a record that breaks any of this refuses the archive) of which path,
 *     linkpath and size are kept, an empty value cancelling its record; GNU 'L' (long name)
 *     and 'K' (long link target), read up to their first NUL. pax global 'g' headers are
 *     skipped: nothing in them is applied. Paths and targets hold at most TAR_PATH_MAX - 1
 *     bytes; a pax path or linkpath holding a NUL is refused. Nothing is buffered but those
 *     two strings, so an extension member's size needs no cap.
 *   - Data: a member's data follows its header, padded to 512 bytes, except for hard links,
 *     symlinks, devices, directories and FIFOs ('1'..'6'), which have none whatever their size
 *     field says (POSIX; GNU tar and Python's tarfile read them so too).
 *   - End: the first all-zero block ends the archive (as GNU tar and Python's tarfile read it);
 *     what follows is not read. Input that ends at a header boundary ends it too; input that
 *     ends anywhere else (a header, data, padding, an extension) is a truncated archive.
 *
 * Use: tar_stream_init, then tar_stream_next on the input, again on what it did not take, until
 * TAR_END or the input ends (then tar_stream_end says whether it ended cleanly). The reader
 * allocates nothing; a member's path and link live in the stream until the next header. */
#ifndef TRAINYARD_UTIL_TAR_H
#define TRAINYARD_UTIL_TAR_H

#include <stddef.h>
#include <stdint.h>

#define TAR_BLOCK    512
#define TAR_PATH_MAX 4096 /* bytes in a path or a link target, its NUL included */

enum { TAR_MORE, TAR_MEMBER, TAR_DATA, TAR_END }; /* tar_stream_next's events */

typedef struct tar_member {
    char type;     /* the typeflag as written ('\0' and '7' are regular files too) */
    uint64_t mode; /* the mode field */
    uint64_t size; /* bytes of data that follow (a pax size applied; 0 for types '1'..'6') */
    uint64_t at;   /* the offset of its header in the stream */
    char path[TAR_PATH_MAX]; /* as written: pax path, GNU long name, or prefix "/" name */
    char link[TAR_PATH_MAX]; /* as written: pax linkpath, GNU long link, or linkname */
} tar_member;

typedef struct tar_stream {
    int state;
    unsigned char hdr[TAR_BLOCK];
    size_t fill;               /* bytes of hdr read */
    uint64_t at;               /* bytes taken so far */
    uint64_t left, pad;        /* of the current data or extension member, then its padding */
    uint64_t ext_at, ext_size; /* the extension member being read: header offset, size */
    char ext_type;             /* 'x', 'L', 'K' or 'g' */
    int has_path, has_link, has_size, ext_nul;
    uint64_t pax_size;
    /* a pax record in reading: its declared length, bytes seen, where its value goes */
    uint64_t rec_len, rec_seen;
    int rec_phase, rec_val;
    char key[16];
    size_t key_len, val_len;
    char num[24];
    tar_member m; /* the current member; its path and link collect the extension values */
} tar_stream;

/* Starts a stream at offset 0. */
void tar_stream_init(tar_stream *t);
/* Reads from p[0..n) up to the next event, *used the bytes taken (the rest is for the next
 * call), and returns it: TAR_MEMBER (t->m holds a member's header, extensions applied),
 * TAR_DATA (*data, *len: the next piece of that member's data, pointing into p), TAR_MORE (all
 * of p taken) or TAR_END (the end block; later calls take nothing and return it again); or
 * -EINVAL with a message naming the offset (checksum, magic, a number, a pax record, a path too
 * long). *data and *len are written for TAR_DATA only. */
int tar_stream_next(tar_stream *t, const void *p, size_t n, size_t *used, const void **data,
                    size_t *len, char *err);
/* Once the input has ended: 0 when the stream stopped at TAR_END or at a header boundary, else
 * -EINVAL with a message saying where the archive is cut. */
int tar_stream_end(const tar_stream *t, char *err);
/* 1 when block (512 bytes) is a ustar or GNU header with a right checksum, else 0. */
int tar_is_header(const void *block);
/* The unsigned checksum of a header block: its bytes with the checksum field read as spaces. */
unsigned tar_checksum(const void *block);

#endif
