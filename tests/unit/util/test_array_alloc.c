/* Unit tests of util/array with failing allocations (tests/unit/alloc_fail.h): each allocation
 * of a growth to a capped size, and of an exact resize, fails once; every failure must be
 * -ENOMEM with the array and its capacity as they were, the elements intact, the growth able to
 * go on, and nothing leaked (ASan's leak check at exit). */
#include "util/array.h"

#include <errno.h>
#include <stdlib.h>

#include "tests/unit/alloc_fail.h"
#include "tests/unit/check.h"

/* Every allocation of a growth sequence fails once: -ENOMEM, the array as it was. */
static void test_grow_fail(void)
{
    long points = 0;
    ALLOC_FAIL_LOOP(&points, {
        int *a = NULL;
        size_t cap = 0, n = 0;
        int failed = 0;
        for (int i = 0; i < 1000; i++) {
            int *was = a;
            size_t was_cap = cap;
            int rc = ARRAY_GROW(a, cap, n + 1, 600);
            if (n == 600) {
                CHECK_INT(rc, -EFBIG);
                break;
            }
            if (rc == -ENOMEM) {
                CHECK(a == was && cap == was_cap);
                failed++;
                continue; /* the caller may try again */
            }
            CHECK_INT(rc, 0);
            a[n] = (int)n;
            n++;
        }
        int ok = n == 600;
        for (size_t i = 0; i < n; i++)
            ok &= a[i] == (int)i;
        CHECK(ok);
        CHECK(failed <= 1);
        float *f = NULL;
        size_t fcap = 0;
        int rc = ARRAY_RESIZE(f, fcap, 64);
        CHECK(rc == 0 || (rc == -ENOMEM && f == NULL && fcap == 0));
        free(f);
        free(a);
    });
    CHECK(points >= 7); /* 16, 32, 64, 128, 256, 512, 600, and the resize */
}

int main(void)
{
    if (alloc_fail_init() < 0)
        return 1;
    test_grow_fail();
    return check_exit();
}
