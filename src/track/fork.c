/* fork(): keep track's locks and tables usable in the child.
 *
 * pthread_atfork handlers, registered when the first tracker is created (so
 * they work with or without the interposer). Before the fork the forking
 * thread takes track's short internal locks (the table lock, which also
 * excludes the application's memory hooks; the signal-chain lock; the
 * arena lock), so the child never inherits one held by a thread that does
 * not exist there. It does not take the trackers' own rwlocks: a thread may
 * hold one while waiting for a lock of the application's (or of the layer's)
 * that the forking thread holds, and fork() would deadlock. Instead, in the
 * child, a tracker whose rwlock was held by another thread at the fork is
 * marked poisoned: its tables may be half-updated, so every call on it fails
 * with -ENOTRECOVERABLE, and destroy leaves it alone. Other trackers stay
 * usable in the child.
 *
 * uffd ranges: the child's mappings are not registered (the kernel does not
 * copy a userfaultfd registration without UFFD_FEATURE_EVENT_FORK), and the
 * inherited userfaultfd and pagemap descriptors act on the *parent's*
 * address space. The child closes them, so nothing it does can re-protect or
 * unregister the parent's pages, and reports its uffd ranges whole on each
 * collect (every page may change unseen). Signal-backend ranges keep
 * working: protections and the handler are per process. */
#define _GNU_SOURCE
#include <pthread.h>
#include <unistd.h>

#include "internal.h"

static mt_spin g_reg_lock;
static sigset_t g_reg_saved;
static mt_tracker *g_trackers;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void reg_lock(void)
{
    sigset_t saved;
    mti_sys_block_all(&saved);
    mti_spin_lock(&g_reg_lock);
    g_reg_saved = saved;
}

static void reg_unlock(void)
{
    sigset_t saved = g_reg_saved;
    mti_spin_unlock(&g_reg_lock);
    mti_sys_restore_mask(&saved);
}

/* Lock order, the same as everywhere else: registry, table, chain, arena. */
static void prepare(void)
{
    reg_lock();
    mti_sigtable_lock();
    mti_chain_fork_prepare();
    mti_arena_fork_prepare();
}

static void parent(void)
{
    mti_arena_fork_parent();
    mti_chain_fork_parent();
    mti_sigtable_unlock();
    reg_unlock();
}

static void child_tracker(mt_tracker *t)
{
    if (pthread_rwlock_trywrlock(&t->lock) != 0) {
        /* Held by a thread that does not exist here. */
        pthread_rwlock_init(&t->lock, NULL);
        atomic_store_explicit(&t->poisoned, 1, memory_order_relaxed);
    } else {
        for (uint32_t i = 0; i < t->nsorted; i++) {
            mt_range *r = t->sorted[i];
            /* Fault handlers of threads that do not exist here. */
            atomic_store_explicit(&r->faulting, 0, memory_order_relaxed);
            if (r->backend == MT_TRACK_UFFD) {
                atomic_store_explicit(&r->whole, 1, memory_order_relaxed);
                mti_bits_set_range(r->bits, 0, r->npages);
            }
        }
        pthread_rwlock_unlock(&t->lock);
    }
    mti_helper_fork_child(t);
    if (t->uffd >= 0)
        close(t->uffd);
    if (t->pagemap_fd >= 0)
        close(t->pagemap_fd);
    t->uffd = t->pagemap_fd = -1;
}

static void child(void)
{
    mti_arena_fork_child();
    mti_chain_fork_child();
    mti_kw_fork_child();
    mti_sigtable_fork_child();
    mti_sigtable_unlock();
    for (mt_tracker *t = g_trackers; t; t = t->next_registered)
        child_tracker(t);
    reg_unlock();
}

static void install_atfork(void) { pthread_atfork(prepare, parent, child); }

void mti_fork_register(mt_tracker *t)
{
    pthread_once(&g_once, install_atfork);
    reg_lock();
    t->next_registered = g_trackers;
    g_trackers = t;
    reg_unlock();
}

void mti_fork_unregister(mt_tracker *t)
{
    reg_lock();
    for (mt_tracker **p = &g_trackers; *p; p = &(*p)->next_registered)
        if (*p == t) {
            *p = t->next_registered;
            break;
        }
    reg_unlock();
}
