/* alloc_fail: the counting allocator behind tests/unit/alloc_fail.h. The __wrap_ functions
 * replace our references to malloc, calloc, realloc, strdup and strndup at link time
 * (-Wl,--wrap=...); jansson and SQLite reach the same counter through their allocator hooks.
 * free() is not wrapped: every pointer handed out here comes from the real allocator. */
#include "tests/unit/alloc_fail.h"

#include <errno.h>
#include <jansson.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);
char *__wrap_strdup(const char *s);
char *__wrap_strndup(const char *s, size_t n);

static long alloc_fail_at;   /* the armed allocation's number; 0 when disarmed */
static long alloc_fail_seen; /* counted allocations since alloc_fail_after() */
static int alloc_fail_fired; /* the armed one was failed */

/* Counts one allocation; 1 when it is the one to fail. */
static int alloc_fail_tick(void)
{
    long k = __atomic_add_fetch(&alloc_fail_seen, 1, __ATOMIC_RELAXED);
    if (k != __atomic_load_n(&alloc_fail_at, __ATOMIC_RELAXED))
        return 0;
    __atomic_store_n(&alloc_fail_fired, 1, __ATOMIC_RELAXED);
    errno = ENOMEM;
    return 1;
}

void *__wrap_malloc(size_t n)
{
    return alloc_fail_tick() ? NULL : __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t size)
{
    return alloc_fail_tick() ? NULL : __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t n)
{
    return alloc_fail_tick() ? NULL : __real_realloc(p, n);
}

char *__wrap_strndup(const char *s, size_t n)
{
    size_t len = strnlen(s, n);
    char *d = __wrap_malloc(len + 1);
    if (d) {
        memcpy(d, s, len);
        d[len] = '\0';
    }
    return d;
}

char *__wrap_strdup(const char *s)
{
    return __wrap_strndup(s, strlen(s));
}

/* ---- SQLite: its default allocator, with the counter in front of malloc and realloc ------- */

static sqlite3_mem_methods alloc_fail_sqlite_real;

static void *alloc_fail_sqlite_malloc(int n)
{
    return alloc_fail_tick() ? NULL : alloc_fail_sqlite_real.xMalloc(n);
}

static void *alloc_fail_sqlite_realloc(void *p, int n)
{
    return alloc_fail_tick() ? NULL : alloc_fail_sqlite_real.xRealloc(p, n);
}

static void *alloc_fail_uncounted(size_t n)
{
    return __real_malloc(n);
}

void alloc_fail_jansson(int counted)
{
    json_set_alloc_funcs(counted ? __wrap_malloc : alloc_fail_uncounted, free);
}

int alloc_fail_init(void)
{
    alloc_fail_jansson(1);
    sqlite3_shutdown();
    if (sqlite3_config(SQLITE_CONFIG_GETMALLOC, &alloc_fail_sqlite_real) != SQLITE_OK)
        return -1;
    sqlite3_mem_methods m = alloc_fail_sqlite_real;
    m.xMalloc = alloc_fail_sqlite_malloc;
    m.xRealloc = alloc_fail_sqlite_realloc;
    if (sqlite3_config(SQLITE_CONFIG_MALLOC, &m) != SQLITE_OK)
        return -1;
    return sqlite3_initialize() == SQLITE_OK ? 0 : -1;
}

void alloc_fail_after(long n)
{
    __atomic_store_n(&alloc_fail_fired, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&alloc_fail_seen, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&alloc_fail_at, n, __ATOMIC_RELAXED);
}

int alloc_fail_off(void)
{
    __atomic_store_n(&alloc_fail_at, 0, __ATOMIC_RELAXED);
    return __atomic_load_n(&alloc_fail_fired, __ATOMIC_RELAXED);
}

long alloc_fail_next(long n)
{
    static int every = -1;
    if (every < 0) {
        const char *v = getenv("ALLOC_FAIL_EVERY");
        every = v && strcmp(v, "1") == 0;
    }
    return every || n < ALLOC_FAIL_DENSE ? n + 1 : n + ALLOC_FAIL_STRIDE;
}
