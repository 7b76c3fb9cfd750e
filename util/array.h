/* array: growing typed arrays (floats, structs, indices), the counterpart of dynbuf for bytes.
 *
 * An array is a pointer to its first element and a capacity in elements, both kept by the
 * caller; the count of elements in use is the caller's too. array_grow() makes room for need
 * elements, doubling from ARRAY_FIRST, and never past max elements (the cap every array that
 * grows from outside input must have; ARRAY_NO_MAX for one bounded elsewhere, e.g. by a capped
 * request body). array_resize() sets the capacity exactly (a shrink to fit, a staging area).
 * Neither ever wraps a size: the byte count is checked against SIZE_MAX before it is formed.
 *
 * Ownership: the caller owns the array (free() it). A failed call leaves the pointer and the
 * capacity as they were, so the elements already held stay valid and are the caller's to free.
 * The pointer is read and written through memcpy, not a cast void **, so any T * may be passed
 * (object pointers share one representation on the platforms trainyard builds for). */
#ifndef TRAINYARD_UTIL_ARRAY_H
#define TRAINYARD_UTIL_ARRAY_H

#include <stddef.h>
#include <stdint.h>

#define ARRAY_FIRST  16       /* elements of the first allocation, when need and max allow */
#define ARRAY_NO_MAX SIZE_MAX /* no cap of the array's own: only size_t's limit */

/* Room for need elements of elem bytes in *pp (a T **) of *cap: 0; -EFBIG past max or SIZE_MAX
 * bytes; -ENOMEM. */
int array_grow(void *pp, size_t *cap, size_t need, size_t elem, size_t max);
/* Exactly n elements (fewer shrinks, 0 frees to NULL): 0; -EFBIG past SIZE_MAX bytes; -ENOMEM. */
int array_resize(void *pp, size_t *cap, size_t n, size_t elem);

/* array_grow() on an lvalue pointer p and an lvalue size_t capacity cap (another type of cap
 * does not compile). */
#define ARRAY_GROW(p, cap, need, max) array_grow(&(p), &(cap), (need), sizeof *(p), (max))
/* array_resize() on an lvalue pointer p and an lvalue size_t capacity cap. */
#define ARRAY_RESIZE(p, cap, n) array_resize(&(p), &(cap), (n), sizeof *(p))

#endif
