/* tar: a reader of tar archives held in memory, for the image datasets (data/images.c).
 *
 * Formats: POSIX ustar ("ustar\0" "00") and GNU ("ustar  \0"), with GNU long names (type 'L')
 * and pax extended headers (type 'x': the "path" record; type 'g' is skipped). Old v7 archives
 * (no magic) are refused. Sizes may be octal or GNU base-256.
 *
 * What comes out: regular files only ('0' and '\0'; contiguous '7' counts as regular). Directories
 * and volume labels are skipped. Links, devices, FIFOs and every other type are refused, and so is
 * a path that is absolute or has a ".." component: nothing read from an archive can name a place
 * outside it. Paths come out normalised: "." components and repeated slashes dropped ("./a//b" →
 * "a/b").
 *
 * The end is two zero blocks, one zero block, or the end of the data at a header boundary. A
 * header whose checksum is wrong, or a member whose data runs past the end, is an error
 * ("truncated").
 *
 * Ownership: the reader borrows the archive's bytes; an entry's data points into them and its
 * name into the reader, valid until the next tar_reader_next(). The reader allocates nothing. */
#ifndef TRAINYARD_WORKER_TAR_H
#define TRAINYARD_WORKER_TAR_H

#include <stddef.h>

#define TAR_NAME_MAX 4096 /* bytes in a path, long names included */

typedef struct tar_entry {
    const char *name; /* normalised path, NUL-terminated */
    const char *data; /* into the archive */
    size_t size;
} tar_entry;

typedef struct tar_reader {
    const char *data;
    size_t len, pos;         /* pos: the next header's offset */
    char name[TAR_NAME_MAX]; /* the current entry's normalised path */
    char longname[TAR_NAME_MAX];
    int has_longname; /* a 'L' or pax path applies to the next header */
} tar_reader;

/* 1 when data begins with a ustar or GNU header whose checksum is right. */
int tar_probe(const char *data, size_t len);

/* Starts reading the archive data[0..len). */
void tar_reader_init(tar_reader *r, const char *data, size_t len);

/* The next regular file into *e: 1, or 0 at the end of the archive, or -EINVAL with a message
 * (bad header, truncated member, link, unsafe path). *e is written only when 1 is returned. */
int tar_reader_next(tar_reader *r, tar_entry *e, char *err);

#endif
