/* The process a context belongs to (internal.h, mti_coh_forked): a token
 * that reads zero in a forked child. A file of its own: every entry point
 * asks it, and it asks nothing of the module. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"

/* This process's token (internal.h, mti_coh_forked): 0 until a context is
 * created, 0 again in a forked child. */
static _Atomic uint64_t g_token_word;
_Atomic uint64_t *mti_coh_token = &g_token_word;
static pthread_once_t g_token_once = PTHREAD_ONCE_INIT;

static void clear_token(void)
{
    atomic_store_explicit(mti_coh_token, 0, memory_order_relaxed);
}

static void token_init(void)
{
    long ps = (long)mti_page_size();
    void *p = mmap(NULL, (size_t)ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p != MAP_FAILED && madvise(p, (size_t)ps, MADV_WIPEONFORK) == 0)
        mti_coh_token = p; /* never unmapped: contexts of any thread read it */
    else if (p != MAP_FAILED)
        munmap(p, (size_t)ps);
    pthread_atfork(NULL, NULL, clear_token);
}

/* The token, made on first use in this process (also in a forked child,
 * where it differs from the parent's: the pid is part of it). */
uint64_t mti_coh_process_token(void)
{
    pthread_once(&g_token_once, token_init);
    uint64_t t = atomic_load_explicit(mti_coh_token, memory_order_relaxed);
    if (t)
        return t;
    static _Atomic uint32_t made;
    uint64_t fresh = (uint64_t)(uint32_t)getpid() << 32 | (atomic_fetch_add(&made, 1) + 1);
    if (atomic_compare_exchange_strong(mti_coh_token, &t, fresh))
        return fresh;
    return t; /* another thread made it first */
}

int mti_coh_forked_slow(const mt_coh *c)
{
    return mti_coh_forked(c) || getpid() != c->pid;
}

