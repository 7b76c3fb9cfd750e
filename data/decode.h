/* decode: PNG and JPEG files held in memory to 8-bit pixels (h × w × c, row-major, channels
 * interleaved), with Debian's libpng and libjpeg-turbo. The format is told by the first bytes,
 * not the name.
 *
 * What comes out (images.h says the same to users): PNG grey (c = 1) and colour (c = 3) of any
 * bit depth, interlaced or not; palette images expand to RGB; an alpha channel is dropped
 * (grey + alpha → grey, RGBA → RGB; transparency is not composited onto anything); 16-bit
 * samples are scaled to 8 bits (rounded). JPEG greyscale (c = 1) and colour (c = 3); CMYK and
 * YCCK are refused. A JPEG that ends early is an error (libjpeg alone would pad it with grey).
 * Width and height are at most IMAGES_MAX_DIM (images.h), checked before any pixel is decoded.
 *
 * Errors name the file (the name argument) and say what the library said. The libraries'
 * own allocations are theirs: no allocation of ours happens here. */
#ifndef TRAINYARD_WORKER_DECODE_H
#define TRAINYARD_WORKER_DECODE_H

#include <stddef.h>

typedef struct decode_shape {
    int h, w, c;
} decode_shape;

/* Reads the header of a PNG or JPEG file into *shape (what decode_image() will produce).
 * -EINVAL not PNG or JPEG, corrupt, refused or too large. */
int decode_header(const char *data, size_t len, const char *name, decode_shape *shape, char *err);

/* Decodes the file into out, which holds shape->h × w × c bytes; the file must have that shape
 * (as decode_header() said). -EINVAL with a message naming the file. */
int decode_image(const char *data, size_t len, const char *name, const decode_shape *shape,
                 unsigned char *out, char *err);

#endif
