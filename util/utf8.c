/* utf8: UTF-8 validation per RFC 3629 (no overlongs, no surrogates, nothing past U+10FFFF). */
#include "util/utf8.h"

#include <string.h>

/* Length of the valid UTF-8 sequence at p (n bytes available), 0 if none starts there. */
size_t utf8_seq_len(const unsigned char *p, size_t n)
{
    unsigned char c = p[0];
    size_t len;
    unsigned char lo = 0x80, hi = 0xBF;

    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        len = 2;
    else if (c >= 0xE0 && c <= 0xEF)
        len = 3;
    else if (c >= 0xF0 && c <= 0xF4)
        len = 4;
    else
        return 0;
    if (c == 0xE0)
        lo = 0xA0;
    else if (c == 0xED)
        hi = 0x9F; /* no surrogates */
    else if (c == 0xF0)
        lo = 0x90;
    else if (c == 0xF4)
        hi = 0x8F; /* nothing past U+10FFFF */
    if (n < len || p[1] < lo || p[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if (p[i] < 0x80 || p[i] > 0xBF)
            return 0;
    return len;
}

/* Copies src into dst (cap bytes with the NUL) as valid UTF-8: invalid bytes and control
 * characters other than tab and newline become '?'; a sequence that does not fit is dropped. */
void utf8_clean(char *dst, size_t cap, const char *src)
{
    const unsigned char *p = (const unsigned char *)src;
    size_t n = strlen(src), o = 0;

    while (n > 0) {
        size_t len = utf8_seq_len(p, n);
        size_t take = len ? len : 1;
        if (o + (len ? len : 1) >= cap)
            break;
        if (len == 0 || (len == 1 && ((*p < 0x20 && *p != '\t' && *p != '\n') || *p == 0x7F)))
            dst[o++] = '?';
        else
            for (size_t i = 0; i < len; i++)
                dst[o++] = (char)p[i];
        p += take;
        n -= take;
    }
    dst[o] = '\0';
}

void utf8_trim_end(char *s)
{
    size_t n = strlen(s);
    size_t lead = n;
    while (lead > 0 && ((unsigned char)s[lead - 1] & 0xC0) == 0x80)
        lead--;
    if (lead == 0)
        return;
    unsigned char c = (unsigned char)s[lead - 1];
    size_t want = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    if (n - (lead - 1) < want)
        s[lead - 1] = '\0';
}

size_t utf8_chars(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}
