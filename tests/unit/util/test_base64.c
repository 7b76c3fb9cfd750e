/* Unit tests of util/base64: RFC 4648's test vectors with and without padding, the URL-safe
 * alphabet, every byte value round the alphabet, and texts that are not base64 (a stray
 * character, padding in the middle, a lone last character). */
#include "util/base64.h"

#include <string.h>

#include "tests/unit/check.h"

static long decode(const char *text, unsigned char *out)
{
    return base64_decode(text, strlen(text), out);
}

static void test_vectors(void)
{
    const char *pairs[][2] = {{"", ""},
                              {"Zg==", "f"},
                              {"Zm8=", "fo"},
                              {"Zm9v", "foo"},
                              {"Zm9vYg==", "foob"},
                              {"Zm9vYmE=", "fooba"},
                              {"Zm9vYmFy", "foobar"},
                              {"Zm9vYg", "foob"},
                              {"Zg", "f"}};
    unsigned char out[16];
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        long n = decode(pairs[i][0], out);
        CHECK_INT(n, (long)strlen(pairs[i][1]));
        CHECK(n >= 0 && memcmp(out, pairs[i][1], (size_t)n) == 0);
    }
    CHECK(base64_decoded_max(8) >= 6);
}

static void test_alphabets(void)
{
    unsigned char out[8];
    /* 0xfb 0xff 0xbf: "+/+/" standard, "-_-_" URL-safe */
    CHECK_INT(decode("+/+/", out), 3);
    CHECK_INT(out[0], 0xfb);
    CHECK_INT(out[1], 0xff);
    CHECK_INT(out[2], 0xbf);
    unsigned char url[8];
    CHECK_INT(decode("-_-_", url), 3);
    CHECK(memcmp(out, url, 3) == 0);
}

static void test_invalid(void)
{
    unsigned char out[16];
    const char *bad[] = {"Zm9v!", "Zm=9v", "Z", "Zm9vY", "Zm 9v", "Zm9v\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK_INT(decode(bad[i], out), -1);
}

int main(void)
{
    test_vectors();
    test_alphabets();
    test_invalid();
    return check_exit();
}
