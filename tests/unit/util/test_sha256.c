/* Unit tests of util/sha256: the FIPS 180-4 example vectors (through sha256_buf_hex, the whole
 * of init, update, final and hex), and streaming in odd pieces. */
#include "util/sha256.h"

#include "tests/unit/check.h"

int main(void)
{
    char hex[65];
    sha256_buf_hex("", 0, hex);
    CHECK_STR(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    sha256_buf_hex("abc", 3, hex);
    CHECK_STR(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    sha256_buf_hex(two, strlen(two), hex);
    CHECK_STR(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");

    /* One million 'a's fed in pieces of 1..127 bytes crosses every block boundary case. */
    static char buf[1000000];
    memset(buf, 'a', sizeof buf);
    sha256_ctx c;
    uint8_t d[32];
    sha256_init(&c);
    size_t done = 0, step = 1;
    while (done < sizeof buf) {
        size_t n = step < sizeof buf - done ? step : sizeof buf - done;
        sha256_update(&c, buf + done, n);
        done += n;
        step = step % 127 + 1;
    }
    sha256_final(&c, d);
    sha256_hex(d, hex);
    CHECK_STR(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    return check_exit();
}
