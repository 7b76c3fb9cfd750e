/* Unit tests of util/hmac: the HMAC-SHA-256 vectors of RFC 4231 section 4 (test case 5, a
 * truncated output, is left out: we never truncate), and the two-part form agreeing with the
 * one-part form at every split. */
#include "util/hmac.h"

#include "tests/unit/check.h"
#include "util/sha256.h"

static void check_mac(const void *key, size_t klen, const void *msg, size_t mlen, const char *want)
{
    uint8_t mac[32];
    char hex[65];
    hmac_sha256(key, klen, msg, mlen, mac);
    sha256_hex(mac, hex);
    CHECK_STR(hex, want);
}

int main(void)
{
    uint8_t key[131];

    /* 1: 20 bytes of 0x0b, "Hi There" */
    memset(key, 0x0b, 20);
    check_mac(key, 20, "Hi There", 8,
              "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
    /* 2: a key shorter than the output */
    check_mac("Jefe", 4, "what do ya want for nothing?", 28,
              "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    /* 3: 20 bytes of 0xaa, 50 bytes of 0xdd */
    uint8_t msg[152];
    memset(key, 0xaa, 20);
    memset(msg, 0xdd, 50);
    check_mac(key, 20, msg, 50, "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");
    /* 4: key 0x01..0x19, 50 bytes of 0xcd */
    for (int i = 0; i < 25; i++)
        key[i] = (uint8_t)(i + 1);
    memset(msg, 0xcd, 50);
    check_mac(key, 25, msg, 50, "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b");
    /* 6: a 131-byte key (hashed first) */
    memset(key, 0xaa, 131);
    const char *m6 = "Test Using Larger Than Block-Size Key - Hash Key First";
    check_mac(key, 131, m6, strlen(m6),
              "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
    /* 7: a long key and a long message */
    const char *m7 = "This is a test using a larger than block-size key and a larger than "
                     "block-size data. The key needs to be hashed before being used by the "
                     "HMAC algorithm.";
    check_mac(key, 131, m7, strlen(m7),
              "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");

    /* The two-part form over every split of m7 equals the one-part form. */
    uint8_t one[32], two[32];
    size_t n = strlen(m7);
    hmac_sha256(key, 131, m7, n, one);
    for (size_t cut = 0; cut <= n; cut++) {
        hmac_sha256_2(key, 131, m7, cut, m7 + cut, n - cut, two);
        CHECK(memcmp(one, two, 32) == 0);
    }
    return check_exit();
}
