/* tar: the image datasets' walk of a tar archive held in memory (data/images.c, npz.c,
 * images_folder.c), on util/tar.c's reader, which owns the format (ustar, GNU, pax; see
 * util/tar.h for its rules). This file holds the datasets' policy only.
 *
 * What comes out: regular files only ('0' and '\0'; contiguous '7' counts as regular).
 * Directories and volume labels are skipped. Links, devices, FIFOs and every other type are
 * refused, and so is a path that is absolute or has a ".." component: nothing read from an
 * archive can name a place outside it. Paths come out normalised: "." components and repeated
 * slashes dropped ("./a//b" → "a/b").
 *
 * Ownership: the reader borrows the archive's bytes; an entry's data points into them and its
 * name into the reader, valid until the next tar_reader_next(). The reader allocates nothing. */
#ifndef TRAINYARD_DATA_TAR_H
#define TRAINYARD_DATA_TAR_H

#include <stddef.h>

#include "util/tar.h"

typedef struct tar_entry {
    const char *name; /* normalised path, NUL-terminated */
    const char *data; /* into the archive */
    size_t size;
} tar_entry;

typedef struct tar_reader {
    const char *data;
    size_t len, pos; /* pos: the bytes the stream has taken */
    tar_stream t;
    char name[TAR_PATH_MAX]; /* the current entry's normalised path */
} tar_reader;

/* 1 when data begins with a ustar or GNU header whose checksum is right. */
int tar_probe(const char *data, size_t len);

/* Starts reading the archive data[0..len). */
void tar_reader_init(tar_reader *r, const char *data, size_t len);

/* The next regular file into *e: 1, or 0 at the end of the archive, or -EINVAL with a message
 * (bad header, truncated member, link, unsafe path). *e is written only when 1 is returned. */
int tar_reader_next(tar_reader *r, tar_entry *e, char *err);

#endif
