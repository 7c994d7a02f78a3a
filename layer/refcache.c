/* Freed reference copies, kept for the next memory of the same size.
 *
 * Applications that allocate, map, fill and free memories over and over (a
 * video decoder's frames, per-frame staging) would otherwise give each new
 * memory a fresh reference: anonymous pages that fault twice each (a read
 * maps the zero page while the first content is diffed, the first change
 * copies it) and are unmapped again a frame later, which costs the diffing
 * modes more than reading the memory whole (docs/benchmarks.md, churn). A
 * kept reference is zeroed again before reuse (replay's image of a new
 * memory is zeros): a memset of populated pages costs a fraction of those
 * faults. At most CACHE_BYTES are kept, the oldest dropped first; they
 * count as the layer's extra memory while kept. */
#define _GNU_SOURCE
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>

#include "refcache.h"
#include "session.h"

#define SLOTS 8
#define CACHE_BYTES ((size_t)64 << 20)

static struct {
    void *ref;
    size_t size;
    unsigned long age; /* when it was given back: the oldest goes first */
} g_slot[SLOTS];
static size_t g_bytes;
static unsigned long g_clock;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

void lt_refcache_after_fork(void)
{
    /* Only the forking thread exists in the child: the lock may have been
     * held by another. The kept references are the child's own copies. */
    pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    memcpy(&g_lock, &m, sizeof m);
}

void *lt_refcache_take(size_t size)
{
    void *ref = NULL;
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < SLOTS && !ref; i++)
        if (g_slot[i].ref && g_slot[i].size == size) {
            ref = g_slot[i].ref;
            g_slot[i].ref = NULL;
            g_bytes -= size;
        }
    pthread_mutex_unlock(&g_lock);
    if (ref) {
        lt_stat_add(LT_ST_EXTRA_BYTES, -(int64_t)size);
        memset(ref, 0, size);
    }
    return ref;
}

void lt_refcache_give(void *ref, size_t size)
{
    void *drop[SLOTS];
    size_t dropsz[SLOTS], ndrop = 0;
    int kept = 0;
    pthread_mutex_lock(&g_lock);
    if (size <= CACHE_BYTES) {
        /* Make room: the oldest first, until the bytes and a slot fit. */
        for (;;) {
            int free_slot = -1, oldest = -1;
            for (int i = 0; i < SLOTS; i++) {
                if (!g_slot[i].ref)
                    free_slot = free_slot < 0 ? i : free_slot;
                else if (oldest < 0 || g_slot[i].age < g_slot[oldest].age)
                    oldest = i;
            }
            if (free_slot >= 0 && g_bytes + size <= CACHE_BYTES) {
                g_slot[free_slot].ref = ref;
                g_slot[free_slot].size = size;
                g_slot[free_slot].age = ++g_clock;
                g_bytes += size;
                kept = 1;
                break;
            }
            drop[ndrop] = g_slot[oldest].ref;
            dropsz[ndrop++] = g_slot[oldest].size;
            g_bytes -= g_slot[oldest].size;
            g_slot[oldest].ref = NULL;
        }
    }
    pthread_mutex_unlock(&g_lock);
    /* Unmapped outside the lock: munmap flushes TLBs. */
    for (size_t i = 0; i < ndrop; i++) {
        munmap(drop[i], dropsz[i]);
        lt_stat_add(LT_ST_EXTRA_BYTES, -(int64_t)dropsz[i]);
    }
    if (kept)
        lt_stat_add(LT_ST_EXTRA_BYTES, (int64_t)size);
    else
        munmap(ref, size);
}

size_t lt_refcache_drop_all(void)
{
    void *drop[SLOTS];
    size_t dropsz[SLOTS], ndrop = 0, bytes = 0;
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < SLOTS; i++)
        if (g_slot[i].ref) {
            drop[ndrop] = g_slot[i].ref;
            dropsz[ndrop++] = g_slot[i].size;
            g_slot[i].ref = NULL;
        }
    g_bytes = 0;
    pthread_mutex_unlock(&g_lock);
    for (size_t i = 0; i < ndrop; i++) {
        munmap(drop[i], dropsz[i]);
        lt_stat_add(LT_ST_EXTRA_BYTES, -(int64_t)dropsz[i]);
        bytes += dropsz[i];
    }
    return bytes;
}
