/* utf8: checking and cleaning text that must become a JSON string (jansson refuses invalid
 * UTF-8): log lines, error messages quoting a dataset's bytes, problem details. */
#ifndef TRAINYARD_UTIL_UTF8_H
#define TRAINYARD_UTIL_UTF8_H

#include <stddef.h>

/* Length of the valid UTF-8 sequence at p (n bytes available), 0 if none starts there. */
size_t utf8_seq_len(const unsigned char *p, size_t n);
/* Copies src into dst (cap bytes with the NUL) as valid UTF-8: invalid bytes and control
 * characters other than tab and newline become '?'; a sequence that does not fit is dropped. */
void utf8_clean(char *dst, size_t cap, const char *src);
/* Cuts s (NUL-terminated) so that it does not end inside a UTF-8 sequence (after snprintf
 * truncated it, say). */
void utf8_trim_end(char *s);
/* Number of UTF-8 characters in s (bytes that do not continue a character). */
size_t utf8_chars(const char *s);

#endif
