/* check: the few assertions the C unit tests use. A failed check prints where and what, and the
 * test goes on so that one run shows every failure; check_exit() turns the count into the exit
 * status (0 pass, 1 fail). check_skip() exits 77, which meson reports as a skip. */
#ifndef TRAINYARD_TESTS_CHECK_H
#define TRAINYARD_TESTS_CHECK_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int check_failures;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);               \
            check_failures++;                                                                      \
        }                                                                                          \
    } while (0)

#define CHECK_INT(a, b)                                                                            \
    do {                                                                                           \
        long long check_a_ = (long long)(a), check_b_ = (long long)(b);                            \
        if (check_a_ != check_b_) {                                                                \
            fprintf(stderr, "%s:%d: %s == %lld, expected %s == %lld\n", __FILE__, __LINE__, #a,    \
                    check_a_, #b, check_b_);                                                       \
            check_failures++;                                                                      \
        }                                                                                          \
    } while (0)

#define CHECK_STR(a, b)                                                                            \
    do {                                                                                           \
        const char *check_a_ = (a), *check_b_ = (b);                                               \
        if (!check_a_ || !check_b_ || strcmp(check_a_, check_b_) != 0) {                           \
            fprintf(stderr, "%s:%d: %s is \"%s\", expected \"%s\"\n", __FILE__, __LINE__, #a,      \
                    check_a_ ? check_a_ : "(null)", check_b_ ? check_b_ : "(null)");               \
            check_failures++;                                                                      \
        }                                                                                          \
    } while (0)

#define CHECK_NEAR(a, b, tol)                                                                      \
    do {                                                                                           \
        double check_a_ = (a), check_b_ = (b);                                                     \
        if (!(fabs(check_a_ - check_b_) <= (tol))) {                                               \
            fprintf(stderr, "%s:%d: %s == %.9g, expected %.9g within %g\n", __FILE__, __LINE__,    \
                    #a, check_a_, check_b_, (double)(tol));                                        \
            check_failures++;                                                                      \
        }                                                                                          \
    } while (0)

static inline int check_exit(void)
{
    if (check_failures)
        fprintf(stderr, "%d check(s) failed\n", check_failures);
    return check_failures ? 1 : 0;
}

static inline void check_skip(const char *why)
{
    printf("SKIP: %s\n", why);
    exit(77);
}

/* Removes the test's scratch folder dir and everything in it when every check passed (a failed
 * run keeps it to look at), then returns check_exit(): the last line of a test's main. */
static inline int check_exit_removing(const char *dir)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (check_failures == 0 && system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return check_exit();
}

#endif
