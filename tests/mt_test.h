/* mt_test.h: the whole test "framework". Assertions print file:line and the
 * values involved, then exit(1); a test program passes when main returns 0.
 * Randomised tests take their seed from `--seed N` or $MT_SEED and always
 * print it, so a failure can be replayed exactly. */
#ifndef MT_TEST_H
#define MT_TEST_H

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "memtrack/base.h"

static inline void mt_test_fail_(const char *file, int line)
{
    fprintf(stderr, "%s:%d: test failed\n", file, line);
    fflush(stderr);
    exit(1);
}

#define MT_CHECK(cond)                                                              \
    do {                                                                            \
        if (!(cond)) {                                                              \
            fprintf(stderr, "check failed: %s\n", #cond);                           \
            mt_test_fail_(__FILE__, __LINE__);                                      \
        }                                                                           \
    } while (0)

#define MT_CHECK_INT_EQ(a, b)                                                       \
    do {                                                                            \
        intmax_t a_ = (intmax_t)(a), b_ = (intmax_t)(b);                            \
        if (a_ != b_) {                                                             \
            fprintf(stderr, "check failed: %s == %s (%jd vs %jd)\n", #a, #b, a_, b_); \
            mt_test_fail_(__FILE__, __LINE__);                                      \
        }                                                                           \
    } while (0)

#define MT_CHECK_UINT_EQ(a, b)                                                      \
    do {                                                                            \
        uintmax_t a_ = (uintmax_t)(a), b_ = (uintmax_t)(b);                         \
        if (a_ != b_) {                                                             \
            fprintf(stderr, "check failed: %s == %s (%ju vs %ju, 0x%jx vs 0x%jx)\n", \
                    #a, #b, a_, b_, a_, b_);                                        \
            mt_test_fail_(__FILE__, __LINE__);                                      \
        }                                                                           \
    } while (0)

/* Passes when `expr` returns 0 or a positive count; prints mt_strerror otherwise. */
#define MT_CHECK_OK(expr)                                                           \
    do {                                                                            \
        long r_ = (long)(expr);                                                     \
        if (r_ < 0) {                                                               \
            fprintf(stderr, "check failed: %s returned %ld (%s)\n", #expr, r_,      \
                    mt_strerror((int)r_));                                          \
            mt_test_fail_(__FILE__, __LINE__);                                      \
        }                                                                           \
    } while (0)

/* Passes when `expr` returns exactly the error code `code`. */
#define MT_CHECK_ERR(expr, code)                                                    \
    do {                                                                            \
        long r_ = (long)(expr), c_ = (long)(code);                                  \
        if (r_ != c_) {                                                             \
            fprintf(stderr, "check failed: %s returned %ld (%s), expected %ld (%s)\n", \
                    #expr, r_, mt_strerror((int)r_), c_, mt_strerror((int)c_));     \
            mt_test_fail_(__FILE__, __LINE__);                                      \
        }                                                                           \
    } while (0)

#define MT_CHECK_MEM_EQ(a, b, n)                                                    \
    do {                                                                            \
        const unsigned char *a_ = (const void *)(a), *b_ = (const void *)(b);       \
        size_t n_ = (n);                                                            \
        for (size_t i_ = 0; i_ < n_; i_++)                                          \
            if (a_[i_] != b_[i_]) {                                                 \
                fprintf(stderr, "check failed: %s == %s over %zu bytes: first "     \
                        "difference at byte %zu (0x%02x vs 0x%02x)\n",              \
                        #a, #b, n_, i_, a_[i_], b_[i_]);                            \
                mt_test_fail_(__FILE__, __LINE__);                                  \
            }                                                                       \
    } while (0)

/* Seed for randomised tests: --seed N on the command line, else $MT_SEED, else
 * derived from the clock. Printed so that a failing run can be replayed. */
static inline uint64_t mt_test_seed(int argc, char **argv)
{
    uint64_t seed = 0;
    int have = 0;
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "--seed") == 0) {
            seed = strtoull(argv[i + 1], NULL, 0);
            have = 1;
        }
    const char *env = getenv("MT_SEED");
    if (!have && env && *env) {
        seed = strtoull(env, NULL, 0);
        have = 1;
    }
    if (!have) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        seed = (uint64_t)ts.tv_sec * 1000003u ^ (uint64_t)ts.tv_nsec;
    }
    printf("seed=%" PRIu64 " (replay with --seed %" PRIu64 ")\n", seed, seed);
    fflush(stdout);
    return seed;
}

/* splitmix64: small, fast, good enough for test data; state is caller-owned so
 * every thread can have its own stream. */
static inline uint64_t mt_test_rand(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [0, n); n > 0. */
static inline uint64_t mt_test_below(uint64_t *state, uint64_t n)
{
    return mt_test_rand(state) % n;
}

#endif
