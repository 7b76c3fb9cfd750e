/* base64: decoding RFC 4648 base64 (the standard alphabet; the URL-safe one's '-' and '_' are
 * taken too), as TensorFlow Serving's REST API sends binary values: {"b64": "..."}.
 *
 * Padding '=' is optional at the end and refused elsewhere; whitespace and any other byte make
 * the text invalid. */
#ifndef TRAINYARD_UTIL_BASE64_H
#define TRAINYARD_UTIL_BASE64_H

#include <stddef.h>

/* Bytes that decoding len characters can give at most. */
size_t base64_decoded_max(size_t len);
/* Decodes text[0..len) into out (base64_decoded_max(len) bytes); returns the byte count, or -1
 * when the text is not base64. */
long base64_decode(const char *text, size_t len, unsigned char *out);

#endif
