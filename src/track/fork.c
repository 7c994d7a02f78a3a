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
 * working: protections and the handler are per process.
 *
 * Shared memory (MAP_SHARED, System V) is another matter: a child that
 * inherits the mapping writes the *parent's* pages, through page tables of
 * its own, so nothing is raised in the parent, whose tracker would never
 * report those writes (a Vulkan driver's shared mapping written by a forked
 * child: some of NVIDIA's are inherited, tests/hostile fork-shared; AMD's
 * and Intel's map buffer objects shared). So a descendant that may
 * write a shared range tells the process that added it, through a page
 * mapped shared before any fork (g_box): a bit per range, the range's
 * add_seq modulo the bits there are (a range added 32,768 ranges later may
 * find the bit set: reported whole for nothing, never the other way). That
 * process's collects then report the range whole, for good (every page may
 * change unseen), and mt_range_stats.not_protected says 1. When it is told:
 *  - signal ranges: at the descendant's first write (mti_fork_note_write
 *    from the fault handler, the interposer's preparation of a kernel
 *    write, and any opening of the range there), so a child that only
 *    execs costs nothing. To make that write fault, the child protects its
 *    inherited shared ranges again at the fork: pages the parent kept
 *    writable (hot pages, a range its fault budget opened) would otherwise
 *    take it silently. Not a range kept open for good (kernel writers no
 *    call brackets, mti_sig_unbracketed: a protected page would fail their
 *    writes) or degraded (no room for more protections): told at the fork;
 *  - uffd ranges: at the fork, if the child has the mapping at all (not
 *    MADV_DONTFORK): its copy is not write-protected, so there is no first
 *    write to see;
 * A child made without fork handlers (_Fork, clone) is seen only through
 * the faults of signal ranges. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

static mt_spin g_reg_lock;
static sigset_t g_reg_saved;
static mt_tracker *g_trackers;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

#define BOX_WORDS 512 /* one page of bits */
typedef struct fork_box {
    _Atomic uint64_t written[BOX_WORDS]; /* bit add_seq % (64 * BOX_WORDS): a descendant may write it */
} fork_box;
static fork_box *g_box; /* MAP_SHARED: the same page in every descendant */
static _Atomic uint64_t g_add_seq;

uint64_t mti_fork_next_seq(void)
{
    return atomic_fetch_add_explicit(&g_add_seq, 1, memory_order_relaxed) + 1;
}

static void tell_ancestors(uint64_t seq)
{
    uint64_t i = seq % (64 * BOX_WORDS);
    if (g_box)
        atomic_fetch_or_explicit(&g_box->written[i / 64], 1ull << (i % 64), memory_order_release);
}

void mti_fork_note_write(const mt_range *r)
{
    /* getpid, not a cached pid: a child made by _Fork or clone ran no
     * handler that could update one. Only for shared ranges. */
    if (r->shared_map && (pid_t)syscall(SYS_getpid) != r->add_pid)
        tell_ancestors(r->add_seq);
}

int mti_fork_inherited(const mt_range *r)
{
    uint64_t i = r->add_seq % (64 * BOX_WORDS);
    return r->shared_map && g_box &&
           (atomic_load_explicit(&g_box->written[i / 64], memory_order_acquire) >> (i % 64) & 1);
}

/* Whether the child has the mapping under r at all (MADV_DONTFORK
 * mappings are not inherited). */
static int mapped_here(const mt_range *r)
{
    unsigned char v;
    size_t ps = (size_t)1 << r->page_shift;
    return mincore((void *)r->span_start, ps, &v) == 0 || errno != ENOMEM ||
           mincore((void *)(r->span_end - ps), ps, &v) == 0 || errno != ENOMEM;
}

/* A shared signal range in the child: every page back to its armed
 * protection (the application's, minus write), so that the child's first
 * write faults and is told (mti_fork_note_write). Runs of equal protection
 * in one call each. */
static void rearm_inherited(mt_range *r)
{
    size_t i = 0;
    while (i < r->npages) {
        unsigned st = mti_pstate(r, i);
        size_t j = i + 1;
        while (j < r->npages && mti_pstate(r, j) == st)
            j++;
        if (!(st & MT_PS_GONE))
            (void)mti_sys_mprotect(r->span_start + ((uintptr_t)i << r->page_shift),
                                   (j - i) << r->page_shift, mti_armed_prot(st));
        i = j;
    }
}

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
            atomic_store_explicit(&r->faulting[0], 0, memory_order_relaxed);
            atomic_store_explicit(&r->faulting[1], 0, memory_order_relaxed);
            if (r->backend == MT_TRACK_UFFD) {
                atomic_store_explicit(&r->whole, 1, memory_order_relaxed);
                mti_bits_set_range(r->bits, 0, r->npages);
            }
        }
        pthread_rwlock_unlock(&t->lock);
    }
    mti_helper_fork_child(t);
    /* Closed only where the numbers are still ours: the parent's
     * application may have taken them for files of its own, which the
     * child inherited. */
    mti_uffd_close(t);
}

/* The shared ranges this child has (every tracker's, from the table of all
 * ranges, which the fork left consistent: a range's address, backend and
 * add_seq do not change while it is in the table, even in a tracker whose
 * own lock another thread held). Table lock held. */
static void child_shared_ranges(void)
{
    uint32_t n;
    const mt_sig_entry *e = mti_sigtable_locked_view(&n);
    for (uint32_t i = 0; e && i < n; i++) {
        mt_range *r = e[i].range;
        if (!r->shared_map || !mapped_here(r))
            continue;
        if (r->backend == MT_TRACK_UFFD || atomic_load_explicit(&r->whole, memory_order_relaxed) ||
            atomic_load_explicit(&r->degraded, memory_order_relaxed))
            tell_ancestors(r->add_seq);
        else
            rearm_inherited(r);
    }
}

static void child(void)
{
    mti_arena_fork_child();
    mti_chain_fork_child();
    mti_kw_fork_child();
    mti_sigtable_fork_child();
    mti_procfd_fork_child();
    child_shared_ranges();
    mti_sigtable_unlock();
    for (mt_tracker *t = g_trackers; t; t = t->next_registered)
        child_tracker(t);
    reg_unlock();
}

static void install_atfork(void)
{
    /* Before any range exists, so every descendant shares it. Without it
     * (no memory) descendants cannot tell: as before it existed. */
    void *p = mti_sys_mmap(NULL, sizeof(fork_box), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    g_box = p == MAP_FAILED ? NULL : p;
    pthread_atfork(prepare, parent, child);
}

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
