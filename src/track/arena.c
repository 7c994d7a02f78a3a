/* Metadata arena: memory for trackers, ranges, dirty bitmaps and page states.
 *
 * Why not malloc: the application may track malloc memory (lavapipe hands
 * out device memory from the heap), and a tracked range covers whole pages,
 * so a bitmap calloc'd next to a tracked block can land in a page the tracker
 * has write-protected: the fault handler then faults on its own bookkeeping
 * with SIGSEGV blocked and the process dies. The arena's pages come straight
 * from mmap and are never handed to anyone else, so they are never inside a
 * tracked span.
 *
 * Small blocks (<= MT_ARENA_MAX_SMALL) come from power-of-two size classes
 * carved out of 64 KiB chunks, with a free list per class (chunks are kept
 * for the life of the process: few ranges churn, and it keeps the map count
 * low: one VMA per chunk, not one per range). Larger blocks are mappings of
 * their own, unmapped on free. Not async-signal-safe (add/remove only). */
#define _GNU_SOURCE
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"

#define MT_ARENA_MIN_SHIFT 5   /* 32 bytes */
#define MT_ARENA_MAX_SHIFT 12  /* 4096 bytes */
#define MT_ARENA_MAX_SMALL (1u << MT_ARENA_MAX_SHIFT)
#define MT_ARENA_CHUNK (64u << 10)
#define MT_ARENA_CLASSES (MT_ARENA_MAX_SHIFT - MT_ARENA_MIN_SHIFT + 1)

typedef struct free_block {
    struct free_block *next;
} free_block;

static mt_spin g_lock;
static sigset_t g_saved; /* the holder's signal mask (one holder at a time) */
static free_block *g_free[MT_ARENA_CLASSES];
static unsigned char *g_bump[MT_ARENA_CLASSES], *g_bump_end[MT_ARENA_CLASSES];

static void lock(void)
{
    sigset_t saved;
    mti_sys_block_all(&saved);
    mti_spin_lock(&g_lock);
    g_saved = saved;
}

static void unlock(void)
{
    sigset_t saved = g_saved;
    mti_spin_unlock(&g_lock);
    mti_sys_restore_mask(&saved);
}

static size_t page_round(size_t n)
{
    size_t ps = mti_page_size();
    return (n + ps - 1) & ~(ps - 1);
}

static int size_class(size_t size)
{
    int c = 0;
    while (((size_t)1 << (c + MT_ARENA_MIN_SHIFT)) < size)
        c++;
    return c;
}

void *mti_arena_alloc(size_t size)
{
    if (size == 0)
        size = 1;
    if (size > MT_ARENA_MAX_SMALL) {
        void *p = mti_sys_mmap(NULL, page_round(size), PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        return p == MAP_FAILED ? NULL : p; /* fresh mappings are zero */
    }
    int c = size_class(size);
    size_t bsize = (size_t)1 << (c + MT_ARENA_MIN_SHIFT);
    void *p = NULL;
    lock();
    if (g_free[c]) {
        p = g_free[c];
        g_free[c] = g_free[c]->next;
    } else {
        if (g_bump[c] == NULL || g_bump[c] + bsize > g_bump_end[c]) {
            void *chunk = mti_sys_mmap(NULL, MT_ARENA_CHUNK, PROT_READ | PROT_WRITE,
                                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (chunk != MAP_FAILED) {
                g_bump[c] = chunk;
                g_bump_end[c] = (unsigned char *)chunk + MT_ARENA_CHUNK;
            }
        }
        if (g_bump[c] && g_bump[c] + bsize <= g_bump_end[c]) {
            p = g_bump[c];
            g_bump[c] += bsize;
        }
    }
    unlock();
    if (p)
        memset(p, 0, bsize);
    return p;
}

void mti_arena_free(void *p, size_t size)
{
    if (!p)
        return;
    if (size == 0)
        size = 1;
    if (size > MT_ARENA_MAX_SMALL) {
        mti_sys_munmap(p, page_round(size));
        return;
    }
    int c = size_class(size);
    lock();
    free_block *b = p;
    b->next = g_free[c];
    g_free[c] = b;
    unlock();
}

/* fork(): the lock is taken before and released on both sides, so the
 * child never inherits it held by a thread that does not exist there. */
void mti_arena_fork_prepare(void) { lock(); }
void mti_arena_fork_parent(void) { unlock(); }
void mti_arena_fork_child(void) { unlock(); }
