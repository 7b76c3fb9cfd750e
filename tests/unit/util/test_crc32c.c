/* Unit tests of util/crc32c: published CRC-32C check values (RFC 3720's iSCSI vectors and the
 * "123456789" check), continuation across pieces of every length (which crosses the slice-by-8
 * and byte-at-a-time paths), and TFRecord's mask on a value worked out by hand. */
#include "util/crc32c.h"

#include <string.h>

#include "tests/unit/check.h"

int main(void)
{
    CHECK(crc32c(0, "", 0) == 0);
    CHECK(crc32c(0, "123456789", 9) == 0xE3069283u);
    CHECK(crc32c(0, "a", 1) == 0xC1D04330u);

    /* RFC 3720 B.4: 32 bytes of zeros, of 0xFF, ascending and descending. */
    unsigned char buf[32];
    memset(buf, 0, sizeof buf);
    CHECK(crc32c(0, buf, sizeof buf) == 0x8A9136AAu);
    memset(buf, 0xFF, sizeof buf);
    CHECK(crc32c(0, buf, sizeof buf) == 0x62A8AB43u);
    for (int i = 0; i < 32; i++)
        buf[i] = (unsigned char)i;
    CHECK(crc32c(0, buf, sizeof buf) == 0x46DD794Eu);
    for (int i = 0; i < 32; i++)
        buf[i] = (unsigned char)(31 - i);
    CHECK(crc32c(0, buf, sizeof buf) == 0x113FDB5Cu);

    /* Continuation: any split of a message gives the CRC of the whole. */
    static unsigned char big[1000];
    for (size_t i = 0; i < sizeof big; i++)
        big[i] = (unsigned char)(i * 131u + 7u);
    uint32_t whole = crc32c(0, big, sizeof big);
    for (size_t cut = 0; cut <= 40; cut++)
        CHECK(crc32c(crc32c(0, big, cut), big + cut, sizeof big - cut) == whole);
    /* Misaligned starts take the same path as aligned ones. */
    CHECK(crc32c(0, big + 3, 17) == crc32c(crc32c(0, big + 3, 9), big + 12, 8));

    /* The mask: CRC 0xE3069283 rotated right by 15 is 0x2507C60D; plus 0xa282ead8. */
    CHECK(crc32c_masked("123456789", 9) == (uint32_t)(0x2507C60Du + 0xa282ead8u));
    return check_exit();
}
