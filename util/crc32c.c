/* crc32c: slice-by-8 CRC-32C (see crc32c.h). Table 0 is the classic byte-at-a-time table;
 * table k gives the CRC contribution of a byte followed by k zero bytes, so eight bytes are
 * folded with eight lookups and no dependency between them. */
#include "util/crc32c.h"

#include <pthread.h>

#define CRC32C_POLY 0x82F63B78u /* 0x1EDC6F41 bit-reversed */

static uint32_t crc32c_table[8][256];
static pthread_once_t crc32c_once = PTHREAD_ONCE_INIT;

static void crc32c_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int b = 0; b < 8; b++)
            c = (c >> 1) ^ (CRC32C_POLY & (0u - (c & 1u)));
        crc32c_table[0][i] = c;
    }
    for (int k = 1; k < 8; k++)
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = crc32c_table[k - 1][i];
            crc32c_table[k][i] = (c >> 8) ^ crc32c_table[0][c & 0xFFu];
        }
}

uint32_t crc32c(uint32_t crc, const void *data, size_t len)
{
    pthread_once(&crc32c_once, crc32c_init);
    const uint8_t *p = data;
    uint32_t c = ~crc;
    /* Bytes one at a time, then eight at a time: the words are assembled little-endian by
     * hand, so this is the same on any host and needs no aligned loads. */
    for (; len >= 8; p += 8, len -= 8) {
        uint32_t lo = c ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                           (uint32_t)p[3] << 24);
        c = crc32c_table[7][lo & 0xFFu] ^ crc32c_table[6][(lo >> 8) & 0xFFu] ^
            crc32c_table[5][(lo >> 16) & 0xFFu] ^ crc32c_table[4][lo >> 24] ^
            crc32c_table[3][p[4]] ^ crc32c_table[2][p[5]] ^ crc32c_table[1][p[6]] ^
            crc32c_table[0][p[7]];
    }
    for (; len > 0; p++, len--)
        c = (c >> 8) ^ crc32c_table[0][(c ^ *p) & 0xFFu];
    return ~c;
}

uint32_t crc32c_masked(const void *data, size_t len)
{
    uint32_t c = crc32c(0, data, len);
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}
