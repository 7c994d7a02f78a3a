/* Helpers shared by the alloc tests: creating allocators, asserting that the
 * consistency checker passes, and snapshots of the whole layout (the dump)
 * to prove that a failed call changed nothing. */
#ifndef MT_ALLOC_UTIL_H
#define MT_ALLOC_UTIL_H

#include <errno.h>

#include "memtrack/alloc.h"
#include "mt_test.h"

#define AU_CHECK(a)                                                                 \
    do {                                                                            \
        char msg_[256];                                                             \
        int rc_ = mt_alloc_check((a), msg_, sizeof msg_);                           \
        if (rc_ != 0) {                                                             \
            fprintf(stderr, "mt_alloc_check: %s\n", msg_);                          \
            mt_alloc_dump((a), stderr);                                             \
            mt_test_fail_(__FILE__, __LINE__);                                      \
        }                                                                           \
    } while (0)

/* The dump as a malloc'ed string: equal snapshots mean equal layouts. */
static inline char *au_snapshot(const mt_alloc *a)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    MT_CHECK(f != NULL);
    MT_CHECK_OK(mt_alloc_dump(a, f));
    fclose(f);
    return buf;
}

/* Runs `expr`, expects error `code`, and checks the layout did not change. */
#define AU_CHECK_ERR_UNCHANGED(a, expr, code)                                       \
    do {                                                                            \
        char *before_ = au_snapshot(a);                                             \
        MT_CHECK_ERR((expr), (code));                                               \
        char *after_ = au_snapshot(a);                                              \
        if (strcmp(before_, after_) != 0) {                                         \
            fprintf(stderr, "layout changed by a failed call:\n%s---\n%s", before_, after_); \
            mt_test_fail_(__FILE__, __LINE__);                                      \
        }                                                                           \
        free(before_);                                                              \
        free(after_);                                                               \
        AU_CHECK(a);                                                                \
    } while (0)

static inline mt_alloc *au_create(mt_alloc_strategy s, uint64_t min_align, uint64_t gran)
{
    mt_alloc_opts o = {.strategy = s, .min_align = min_align, .granularity = gran};
    mt_alloc *a = NULL;
    MT_CHECK_OK(mt_alloc_create(&o, &a));
    return a;
}

static inline mt_alloc_block au_alloc(mt_alloc *a, uint64_t size, uint64_t align,
                                      mt_alloc_kind kind)
{
    mt_alloc_block b;
    MT_CHECK_OK(mt_alloc_allocate(a, size, align, kind, &b));
    return b;
}

#endif
