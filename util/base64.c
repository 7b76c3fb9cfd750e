/* base64: see base64.h. */
#include "util/base64.h"

static int base64_value(unsigned char ch)
{
    if (ch >= 'A' && ch <= 'Z')
        return ch - 'A';
    if (ch >= 'a' && ch <= 'z')
        return ch - 'a' + 26;
    if (ch >= '0' && ch <= '9')
        return ch - '0' + 52;
    if (ch == '+' || ch == '-')
        return 62;
    if (ch == '/' || ch == '_')
        return 63;
    return -1;
}

size_t base64_decoded_max(size_t len)
{
    return len / 4 * 3 + 3;
}

long base64_decode(const char *text, size_t len, unsigned char *out)
{
    while (len && text[len - 1] == '=' && len % 4 != 1)
        len--;
    if (len % 4 == 1)
        return -1;
    unsigned acc = 0;
    int bits = 0;
    long n = 0;
    for (size_t i = 0; i < len; i++) {
        int v = base64_value((unsigned char)text[i]);
        if (v < 0)
            return -1;
        acc = (acc << 6) | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[n++] = (unsigned char)(acc >> bits);
            acc &= (1u << bits) - 1;
        }
    }
    return n;
}
