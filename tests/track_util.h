/* Helpers shared by the track tests: mapping memory, reference bitmaps of the
 * pages really written, and comparing them with what collect reported. */
#ifndef MT_TRACK_UTIL_H
#define MT_TRACK_UTIL_H

#include <errno.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <unistd.h>

#include "memtrack/track.h"
#include "mt_test.h"

/* 1 in an AddressSanitizer or ThreadSanitizer build, whose runtimes put
 * frames and system calls of their own where tests measure. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TU_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define TU_SANITIZED 1
#endif
#endif
#ifndef TU_SANITIZED
#define TU_SANITIZED 0
#endif

static inline size_t tu_page(void) { return (size_t)sysconf(_SC_PAGESIZE); }

static inline void *tu_map(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    MT_CHECK(p != MAP_FAILED);
    return p;
}

/* The backends to run a test against: signal always, uffd where available. */
static inline int tu_backends(mt_track_backend out[2])
{
    int n = 0;
    out[n++] = MT_TRACK_SIGNAL;
    if (mt_track_backend_available(MT_TRACK_UFFD))
        out[n++] = MT_TRACK_UFFD;
    else
        printf("note: uffd backend unavailable on this kernel; testing signal only\n");
    return n;
}

/* Reference: one atomic flag per page of a region, set by the writer just
 * before (or after: both orders are legal references for "collect after all
 * writes") the write itself. */
typedef struct tu_ref {
    _Atomic unsigned char *written;
    size_t npages;
} tu_ref;

static inline tu_ref tu_ref_new(size_t npages)
{
    tu_ref r = {calloc(npages, 1), npages};
    MT_CHECK(r.written != NULL);
    return r;
}

static inline void tu_ref_free(tu_ref *r) { free((void *)r->written); }

/* Drains every dirty run of range `id` into a page bitmap `seen` (pages of
 * the region starting at `base`, which is the range's page-aligned start). */
static inline size_t tu_collect_into(mt_tracker *t, mt_range_id id, uintptr_t range_start,
                                     uintptr_t base, unsigned char *seen, size_t npages)
{
    mt_dirty_run runs[64];
    size_t total = 0;
    size_t ps = tu_page();
    for (;;) {
        long n = mt_tracker_collect(t, id, runs, 64);
        MT_CHECK_OK(n);
        for (long i = 0; i < n; i++) {
            MT_CHECK(runs[i].range == id);
            MT_CHECK(runs[i].length > 0);
            uintptr_t a = range_start + runs[i].offset;
            uintptr_t b = a + runs[i].length;
            for (uintptr_t p = a & ~(uintptr_t)(ps - 1); p < b; p += ps) {
                size_t idx = (p - base) / ps;
                MT_CHECK(idx < npages);
                seen[idx] = 1;
                total++;
            }
        }
        if (n < 64)
            break;
    }
    return total;
}

#endif
