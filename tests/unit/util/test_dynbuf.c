/* Unit tests of util/dynbuf: appends of bytes, strings and printf text, growth across many
 * doublings, the cap (an append that would pass it fails with -EFBIG and changes nothing, an
 * append that reaches it exactly succeeds, a tiny cap), reset, take (the bytes change hands,
 * the buffer starts over; an empty buffer gives ""), cut to a shorter length, and free of a
 * zeroed buffer. */
#include "util/dynbuf.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check.h"

static void test_append(void)
{
    dynbuf b;
    dynbuf_init(&b, 1 << 20);
    CHECK_STR(dynbuf_str(&b), "");
    CHECK_INT(dynbuf_len(&b), 0);
    CHECK_INT(dynbuf_add(&b, "ab", 2), 0);
    CHECK_INT(dynbuf_adds(&b, "cd"), 0);
    CHECK_INT(dynbuf_addf(&b, "-%d-%s", 42, "x"), 0);
    CHECK_INT(dynbuf_add(&b, NULL, 0), 0);
    CHECK_STR(dynbuf_str(&b), "abcd-42-x");
    CHECK_INT(dynbuf_len(&b), 9);
    /* bytes with a NUL inside count by length */
    CHECK_INT(dynbuf_add(&b, "\0z", 2), 0);
    CHECK_INT(dynbuf_len(&b), 11);
    CHECK(memcmp(dynbuf_str(&b), "abcd-42-x\0z", 12) == 0);
    dynbuf_free(&b);
    CHECK_STR(dynbuf_str(&b), "");
}

static void test_growth(void)
{
    dynbuf b;
    char chunk[1000];
    dynbuf_init(&b, SIZE_MAX);
    for (size_t i = 0; i < sizeof chunk; i++)
        chunk[i] = (char)('a' + i % 26);
    for (int i = 0; i < 300; i++)
        CHECK_INT(dynbuf_add(&b, chunk, sizeof chunk), 0);
    CHECK_INT(dynbuf_len(&b), 300000);
    CHECK(b.cap > b.len && b.p[b.len] == '\0');
    CHECK(memcmp(b.p + 299000, chunk, sizeof chunk) == 0);
    dynbuf_free(&b);
}

static void test_cap(void)
{
    dynbuf b;
    dynbuf_init(&b, 10);
    CHECK_INT(dynbuf_adds(&b, "0123456"), 0);
    CHECK_INT(dynbuf_adds(&b, "7890"), -EFBIG); /* 11 > 10: nothing added */
    CHECK_STR(dynbuf_str(&b), "0123456");
    CHECK_INT(dynbuf_addf(&b, "%s", "abcd"), -EFBIG);
    CHECK_STR(dynbuf_str(&b), "0123456");
    CHECK_INT(dynbuf_adds(&b, "789"), 0); /* exactly the cap */
    CHECK_STR(dynbuf_str(&b), "0123456789");
    CHECK(b.cap <= 11);
    CHECK_INT(dynbuf_add(&b, "x", 1), -EFBIG);
    CHECK_INT(dynbuf_add(&b, "x", SIZE_MAX), -EFBIG); /* no wrap-around */
    dynbuf_cut(&b, 4);
    CHECK_STR(dynbuf_str(&b), "0123");
    CHECK_INT(dynbuf_len(&b), 4);
    dynbuf_cut(&b, 9); /* past the length: nothing changes */
    CHECK_STR(dynbuf_str(&b), "0123");
    CHECK_INT(dynbuf_adds(&b, "456789"), 0); /* the room is back */
    CHECK_STR(dynbuf_str(&b), "0123456789");
    dynbuf_reset(&b);
    CHECK_STR(dynbuf_str(&b), "");
    CHECK_INT(dynbuf_adds(&b, "0123456789"), 0); /* the memory is kept, the cap too */
    CHECK_INT(dynbuf_adds(&b, "!"), -EFBIG);
    dynbuf_free(&b);

    dynbuf_init(&b, 0); /* holds nothing, but is valid text */
    CHECK_INT(dynbuf_add(&b, "", 0), 0);
    CHECK_STR(dynbuf_str(&b), "");
    CHECK_INT(dynbuf_add(&b, "a", 1), -EFBIG);
    dynbuf_free(&b);
}

static void test_take(void)
{
    dynbuf b;
    size_t len = 99;
    dynbuf_init(&b, 100);
    char *p = dynbuf_take(&b, &len); /* never written: "" */
    CHECK(p != NULL);
    CHECK_STR(p, "");
    CHECK_INT(len, 0);
    free(p);
    CHECK_INT(dynbuf_addf(&b, "job %s", "abc"), 0);
    p = dynbuf_take(&b, &len);
    CHECK_STR(p, "job abc");
    CHECK_INT(len, 7);
    free(p);
    CHECK_STR(dynbuf_str(&b), ""); /* empty again, reusable with the same cap */
    CHECK_INT(dynbuf_adds(&b, "again"), 0);
    CHECK_STR(dynbuf_str(&b), "again");
    dynbuf_free(&b);
    dynbuf_free(NULL);
    dynbuf zero = {0};
    dynbuf_free(&zero);
}

int main(void)
{
    test_append();
    test_growth();
    test_cap();
    test_take();
    return check_exit();
}
