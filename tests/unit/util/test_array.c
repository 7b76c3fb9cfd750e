/* Unit tests of util/array: growth by doubling across many steps with the elements kept, the
 * first allocation, the max cap (reached exactly, never passed: -EFBIG with the array unchanged,
 * a cap smaller than ARRAY_FIRST), sizes whose byte count would wrap size_t (refused, nothing
 * allocated), and exact resizes (shrink, grow, 0 frees). test_array_alloc.c fails the allocations.
 */
#include "util/array.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check.h"

/* Sizes beyond memory must come back as NULL from realloc, under ASan too. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "allocator_may_return_null=1";
}

typedef struct item {
    double v;
    int k;
} item;

static void test_grow(void)
{
    item *a = NULL;
    size_t cap = 0, n = 0;
    CHECK_INT(ARRAY_GROW(a, cap, 0, ARRAY_NO_MAX), 0); /* nothing needed: nothing allocated */
    CHECK(a == NULL && cap == 0);
    CHECK_INT(ARRAY_GROW(a, cap, 1, ARRAY_NO_MAX), 0);
    CHECK_INT(cap, ARRAY_FIRST);
    for (int i = 0; i < 100000; i++) {
        CHECK_INT(ARRAY_GROW(a, cap, n + 1, ARRAY_NO_MAX), 0);
        a[n++] = (item){.v = i * 0.5, .k = i};
    }
    CHECK(cap >= n && cap < 2 * n); /* doubled, not more */
    int ok = 1;
    for (size_t i = 0; i < n; i++)
        ok &= a[i].k == (int)i && a[i].v == (double)i * 0.5;
    CHECK(ok);
    size_t before = cap;
    CHECK_INT(ARRAY_GROW(a, cap, 10, ARRAY_NO_MAX), 0); /* room already: unchanged */
    CHECK_INT(cap, before);
    CHECK_INT(ARRAY_GROW(a, cap, 5 * cap + 3, ARRAY_NO_MAX), 0); /* a jump past doubling */
    CHECK(cap >= 5 * before + 3);
    free(a);
}

static void test_max(void)
{
    int *a = NULL;
    size_t cap = 0;
    CHECK_INT(ARRAY_GROW(a, cap, 3, 5), 0);
    CHECK_INT(cap, 5); /* a cap below ARRAY_FIRST holds the first allocation */
    CHECK_INT(ARRAY_GROW(a, cap, 6, 5), -EFBIG);
    CHECK_INT(cap, 5);
    free(a);

    a = NULL;
    cap = 0;
    for (size_t need = 1; need <= 100; need++)
        CHECK_INT(ARRAY_GROW(a, cap, need, 100), 0);
    CHECK_INT(cap, 100); /* 16, 32, 64, then held to 100 rather than 128 */
    a[99] = 7;
    int *kept = a;
    CHECK_INT(ARRAY_GROW(a, cap, 101, 100), -EFBIG);
    CHECK(a == kept && cap == 100 && a[99] == 7);
    free(a);
}

static void test_overflow(void)
{
    item *a = NULL;
    size_t cap = 0;
    /* need × sizeof(item) would wrap: refused before any multiplication or allocation */
    CHECK_INT(ARRAY_GROW(a, cap, SIZE_MAX / sizeof *a + 1, ARRAY_NO_MAX), -EFBIG);
    CHECK_INT(ARRAY_GROW(a, cap, SIZE_MAX, ARRAY_NO_MAX), -EFBIG);
    CHECK_INT(ARRAY_RESIZE(a, cap, SIZE_MAX / 2), -EFBIG);
    CHECK(a == NULL && cap == 0);
    /* representable but far beyond memory: realloc says no, the array stays empty */
    CHECK_INT(ARRAY_GROW(a, cap, SIZE_MAX / sizeof *a / 2, ARRAY_NO_MAX), -ENOMEM);
    CHECK(a == NULL && cap == 0);
    /* bytes: doubling stops below SIZE_MAX instead of wrapping to 0, and asks for need */
    char *c = NULL;
    size_t ccap = 0;
    CHECK_INT(ARRAY_GROW(c, ccap, SIZE_MAX - 1, ARRAY_NO_MAX), -ENOMEM);
    CHECK(c == NULL && ccap == 0);
}

static void test_resize(void)
{
    float *f = NULL;
    size_t cap = 0;
    CHECK_INT(ARRAY_RESIZE(f, cap, 1000), 0);
    CHECK_INT(cap, 1000);
    for (int i = 0; i < 1000; i++)
        f[i] = (float)i;
    CHECK_INT(ARRAY_RESIZE(f, cap, 10), 0); /* shrink to fit keeps the first elements */
    CHECK_INT(cap, 10);
    CHECK(f[9] == 9.0f);
    CHECK_INT(ARRAY_RESIZE(f, cap, 0), 0); /* 0 frees */
    CHECK(f == NULL && cap == 0);
}

int main(void)
{
    test_grow();
    test_max();
    test_overflow();
    test_resize();
    return check_exit();
}
