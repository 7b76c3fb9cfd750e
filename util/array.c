/* array: growing typed arrays (see array.h).
 *
 * Invariants: a capacity never exceeds max nor SIZE_MAX / elem, so cap * elem never wraps; the
 * pointer and the capacity change together, and only when realloc() succeeded. */
#include "util/array.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Reallocates *pp to n elements (n * elem checked by the caller) and writes it back. */
static int array_realloc(void *pp, size_t *cap, size_t n, size_t elem)
{
    void *p, *np;

    memcpy(&p, pp, sizeof p);
    np = realloc(p, n * elem);
    if (!np)
        return -ENOMEM;
    memcpy(pp, &np, sizeof np);
    *cap = n;
    return 0;
}

int array_grow(void *pp, size_t *cap, size_t need, size_t elem, size_t max)
{
    size_t limit = elem ? SIZE_MAX / elem : SIZE_MAX, n;

    if (max < limit)
        limit = max;
    if (need > limit)
        return -EFBIG;
    if (need <= *cap)
        return 0;
    n = *cap ? *cap : ARRAY_FIRST;
    while (n < need && n <= limit / 2)
        n *= 2;
    if (n < need || n > limit)
        n = n < need ? need : limit;
    return array_realloc(pp, cap, n, elem);
}

int array_resize(void *pp, size_t *cap, size_t n, size_t elem)
{
    if (elem && n > SIZE_MAX / elem)
        return -EFBIG;
    if (n == 0 || elem == 0) {
        void *p, *null = NULL;

        memcpy(&p, pp, sizeof p);
        free(p);
        memcpy(pp, &null, sizeof null);
        *cap = n;
        return 0;
    }
    return array_realloc(pp, cap, n, elem);
}
