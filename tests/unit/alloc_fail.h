/* alloc_fail: failing allocations on purpose, for the unit tests (STYLE rule 13), in the spirit
 * of SQLite's fault simulation and curl's torture tests.
 *
 * How. A test executable that lists alloc_fail.c is linked with
 * -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=strdup,--wrap=strndup (tests/unit/
 * meson.build), so every call our code (the test and the static libraries linked into it) makes
 * to those goes to __wrap_malloc() and friends here, which count it and then call the real one
 * (under ASan, __real_malloc is ASan's malloc: the wrap renames our references only, and
 * ASan's interposition at the libc symbol is untouched). libc's own allocations are not counted.
 * alloc_fail_init() also routes jansson (json_set_alloc_funcs) and SQLite
 * (SQLITE_CONFIG_MALLOC, before sqlite3_initialize) through the same counter, so their
 * out-of-memory paths run too and must surface as our clean errors.
 *
 * Counting. alloc_fail_after(n) arms the counter: the n-th counted allocation from then on
 * returns NULL (errno ENOMEM), and only that one (as curl's torture; the code goes on with the
 * next allocations working, which is harder than failing all). alloc_fail_off() disarms it and
 * says whether the failure was injected. ALLOC_FAIL_LOOP runs a body for n = 1, 2, ... until a
 * run completes with no failure injected, i.e. until every allocation the body makes has been
 * failed once. Each run makes up to n allocations, so a body of A allocations costs A²/2 of
 * them: db_open's 22,000 took 35 s, and over 120 s under ASan on a slower machine. So the first
 * ALLOC_FAIL_DENSE points are each failed, and past them every ALLOC_FAIL_STRIDE-th (a prime,
 * so a pattern that repeats every few allocations is still hit in each phase); the error paths
 * past the first thousands are the same code reached again. ALLOC_FAIL_EVERY=1 in the
 * environment fails every point, as before. The body must end each run clean: a negative return
 * with a message and no output written, or a success identical to the untouched run; ASan's leak
 * check at exit sees whatever a failing path forgot to free.
 *
 * Not thread-safe to arm from two threads at once; the counter itself is atomic. */
#ifndef TRAINYARD_TESTS_ALLOC_FAIL_H
#define TRAINYARD_TESTS_ALLOC_FAIL_H

#include <stddef.h>

/* Routes jansson's and SQLite's allocators through the counter; call first in main(), before
 * any jansson or SQLite use. Returns 0, or -1 when SQLite refuses the configuration. */
int alloc_fail_init(void);
/* Whether jansson's allocations count (1, the default after alloc_fail_init) or not (0).
 * jansson 2.14's lexer drops a byte of a string when growing its buffer fails (lex_save()
 * ignores strbuffer_append_byte()'s error: akheron/jansson#362, open), and reports a failed
 * string copy as a syntax error; tests that want exact results from json_loads() turn jansson's
 * counting off around it. */
void alloc_fail_jansson(int counted);
/* Fails the n-th counted allocation from now (n >= 1); 0 disarms. */
void alloc_fail_after(long n);
/* Disarms; returns 1 when the armed failure was injected since alloc_fail_after(), else 0. */
int alloc_fail_off(void);
/* The failure point ALLOC_FAIL_LOOP tries after n: n + 1 for the first ALLOC_FAIL_DENSE, then
 * n + ALLOC_FAIL_STRIDE (n + 1 throughout when ALLOC_FAIL_EVERY=1 is set). */
long alloc_fail_next(long n);

#define ALLOC_FAIL_DENSE  2000
#define ALLOC_FAIL_STRIDE 17

/* Runs body with the n-th allocation failing, for n = 1, 2, ... (alloc_fail_next) until one run
 * injects no failure; then *points_out holds the number of failure points exercised (runs - 1),
 * counted as if each were tried (the last n - 1), so that a test's lower bound on the body's
 * allocations reads the same whatever the stride. The body
 * (the macro's last argument, commas allowed) is a statement; `alloc_fail_n` holds n inside it.
 * Setup that should not count goes between alloc_fail_off() and alloc_fail_after(alloc_fail_n)
 * at the top of the body. */
#define ALLOC_FAIL_LOOP(points_out, ...)                                                           \
    do {                                                                                           \
        for (long alloc_fail_n = 1;; alloc_fail_n = alloc_fail_next(alloc_fail_n)) {               \
            alloc_fail_after(alloc_fail_n);                                                        \
            __VA_ARGS__;                                                                           \
            if (!alloc_fail_off()) {                                                               \
                *(points_out) = alloc_fail_n - 1;                                                  \
                break;                                                                             \
            }                                                                                      \
        }                                                                                          \
    } while (0)

#endif
