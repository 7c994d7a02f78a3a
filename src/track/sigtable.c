/* The coherent memory table: every range of every tracker in the process,
 * sorted by address, read by the fault handler and the interposer's hooks
 * without locks.
 *
 * Left-right scheme: two copies of the sorted array. Readers (the handler,
 * collect, kernel-write preparation, hook look-ups) count themselves in on
 * the active copy and re-check that it is still active; the single writer
 * (spin lock, signals blocked) edits the inactive copy, flips `active`,
 * then waits until the old copy has no readers. Readers never allocate, and
 * wait only for a hook writer (below), which never waits for anything but
 * readers; writers pay a copy of the array per change, which add/remove can
 * afford. After mti_sigtable_remove() returns, no reader holds a pointer to
 * the removed range.
 *
 * Two kinds of readers. *Heavy* sections act on protections (the fault
 * handler, collect, kernel-write preparation); *light* sections only look
 * ranges up and set dirty bits (the hooks' look-ups, the end of a kernel
 * write). Both keep the table's memory alive (the writer waits for both).
 *
 * Hook writers (the application's mprotect/munmap/mremap/mmap over tracked
 * memory) change page states and real protections together. Under the same
 * lock they raise `hook_active`, which keeps new heavy readers out, and wait
 * for the heavy readers inside to leave: a heavy section then sees page
 * states and real protections that agree from start to end (a handler never
 * re-protects a page with a protection the application just changed, nor
 * touches memory it just unmapped). Light sections neither wait for nor are
 * waited for by hook writers: they run with signals open, and a signal
 * handler's tracked write (a heavy section, which may have to wait for a
 * hook writer) can interrupt them anywhere, even between counting
 * themselves in and noting it in their thread-local depth; if hook writers
 * waited for them, that handler and the writer would wait for each other.
 * Heavy sections are always entered with asynchronous signals blocked (the
 * handler by its sa_mask, the others explicitly), so their count and their
 * thread's depth cannot be split by a signal, and a nested heavy section (a
 * fault inside collect) knows exactly that its thread is counted: it never
 * backs off, since the hook writer is waiting for its outer section. */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>

#include "internal.h"

#define MT_SIGTABLE_CAP (1u << 16)
#define MT_REMOVED_RING 256 /* power of two */

static mt_spin g_lock;
static sigset_t g_lock_saved;
static mt_sig_entry *g_copy[2];
static _Atomic uint32_t g_count[2];
static _Atomic unsigned g_active;
static _Atomic uint32_t g_readers[2]; /* heavy */
static _Atomic uint32_t g_light[2];
static _Atomic int g_hook_active;
static _Atomic uint64_t g_version = 1; /* one more per published edit; never 0 */

/* Heavy sections this thread is inside (initial-exec: no __tls_get_addr
 * from a signal handler, even in a dlopen()ed layer). */
static __thread int tls_reader_depth __attribute__((tls_model("initial-exec")));

/* Spans removed recently, for the stale-fault retry (signal_posix.c). */
static struct {
    _Atomic uintptr_t start, end;
} g_removed[MT_REMOVED_RING];
static _Atomic uint32_t g_removed_next;

void mti_sigtable_lock(void)
{
    sigset_t saved;
    mti_sys_block_all(&saved);
    mti_spin_lock(&g_lock);
    g_lock_saved = saved;
}

void mti_sigtable_unlock(void)
{
    sigset_t saved = g_lock_saved;
    mti_spin_unlock(&g_lock);
    mti_sys_restore_mask(&saved);
}

/* Async-signal-safe. */
unsigned mti_sigtable_enter(const mt_sig_entry **entries, uint32_t *count)
{
    for (;;) {
        unsigned i = atomic_load_explicit(&g_active, memory_order_acquire);
        /* seq_cst increment then seq_cst re-checks: pairs with the writer's
         * seq_cst flip (or hook flag) then seq_cst readers load (Dekker):
         * either we see the flip/flag and back off, or the writer sees us
         * and waits. A nested section of a thread already inside never backs
         * off for a hook: the hook waits for the outer one, which could not
         * finish while we spin. */
        atomic_fetch_add_explicit(&g_readers[i], 1, memory_order_seq_cst);
        if (atomic_load_explicit(&g_active, memory_order_seq_cst) == i &&
            (tls_reader_depth > 0 || !atomic_load_explicit(&g_hook_active, memory_order_seq_cst))) {
            tls_reader_depth++;
            *entries = g_copy[i];
            *count = g_copy[i] ? atomic_load_explicit(&g_count[i], memory_order_acquire) : 0;
            return i;
        }
        atomic_fetch_sub_explicit(&g_readers[i], 1, memory_order_release);
        int spins = 0;
        while (atomic_load_explicit(&g_hook_active, memory_order_acquire)) {
            if (++spins < 64)
                mti_cpu_relax();
            else
                sched_yield();
        }
    }
}

/* Async-signal-safe. */
void mti_sigtable_leave(unsigned token)
{
    tls_reader_depth--;
    /* release: our reads of the copy happen before the writer reuses it. */
    atomic_fetch_sub_explicit(&g_readers[token], 1, memory_order_release);
}

/* Async-signal-safe. */
unsigned mti_sigtable_enter_light(const mt_sig_entry **entries, uint32_t *count)
{
    for (;;) {
        unsigned i = atomic_load_explicit(&g_active, memory_order_acquire);
        /* The same Dekker pair with the table writer as heavy readers. */
        atomic_fetch_add_explicit(&g_light[i], 1, memory_order_seq_cst);
        if (atomic_load_explicit(&g_active, memory_order_seq_cst) == i) {
            *entries = g_copy[i];
            *count = g_copy[i] ? atomic_load_explicit(&g_count[i], memory_order_acquire) : 0;
            return i;
        }
        atomic_fetch_sub_explicit(&g_light[i], 1, memory_order_release);
    }
}

/* Async-signal-safe. */
void mti_sigtable_leave_light(unsigned token)
{
    atomic_fetch_sub_explicit(&g_light[token], 1, memory_order_release);
}

/* Async-signal-safe. Entries never overlap, so sorting by start also sorts by end. */
uint32_t mti_sigtable_first_ending_after(const mt_sig_entry *e, uint32_t n, uintptr_t addr)
{
    uint32_t lo = 0, hi = n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (e[mid].end <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void wait_readers(unsigned i)
{
    while (atomic_load_explicit(&g_readers[i], memory_order_seq_cst) != 0 ||
           atomic_load_explicit(&g_light[i], memory_order_seq_cst) != 0)
        sched_yield();
}

static int ensure_copies(void)
{
    if (g_copy[0])
        return 0;
    size_t bytes = (size_t)MT_SIGTABLE_CAP * sizeof(mt_sig_entry);
    for (int i = 0; i < 2; i++) {
        /* Own mappings, large and zero-filled, touched lazily (see arena.c
         * for why never malloc). */
        void *p = mti_sys_mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            if (i == 1) {
                mti_sys_munmap(g_copy[0], bytes);
                g_copy[0] = NULL;
            }
            return -ENOMEM;
        }
        g_copy[i] = p;
    }
    return 0;
}

/* Writes the inactive copy as an edit of the active one, publishes it and
 * waits for the old copy to drain. pos/insert describe the edit. */
static void publish_edit(uint32_t pos, const mt_sig_entry *insert)
{
    unsigned cur = atomic_load_explicit(&g_active, memory_order_relaxed);
    unsigned nxt = cur ^ 1u;
    wait_readers(nxt); /* late readers that backed off from it */
    uint32_t n = atomic_load_explicit(&g_count[cur], memory_order_relaxed);
    mt_sig_entry *src = g_copy[cur], *dst = g_copy[nxt];
    memcpy(dst, src, pos * sizeof *dst);
    if (insert) {
        dst[pos] = *insert;
        memcpy(dst + pos + 1, src + pos, (n - pos) * sizeof *dst);
        n++;
    } else {
        memcpy(dst + pos, src + pos + 1, (n - pos - 1) * sizeof *dst);
        n--;
    }
    atomic_store_explicit(&g_count[nxt], n, memory_order_release);
    atomic_store_explicit(&g_active, nxt, memory_order_seq_cst);
    atomic_fetch_add_explicit(&g_version, 1, memory_order_seq_cst);
    wait_readers(cur);
}

uint64_t mti_sigtable_version(void) { return atomic_load_explicit(&g_version, memory_order_seq_cst); }

int mti_sigtable_insert(mt_range *r)
{
    int rc = ensure_copies();
    if (rc)
        return rc;
    unsigned cur = atomic_load_explicit(&g_active, memory_order_relaxed);
    uint32_t n = atomic_load_explicit(&g_count[cur], memory_order_relaxed);
    if (n >= MT_SIGTABLE_CAP)
        return -ENOSPC;
    const mt_sig_entry *e = g_copy[cur];
    uint32_t pos = mti_sigtable_first_ending_after(e, n, r->start);
    if (pos < n && e[pos].start < r->end)
        return -EEXIST;
    mt_sig_entry ins = {r->start, r->end, r};
    publish_edit(pos, &ins);
    return 0;
}

void mti_sigtable_remove(mt_range *r)
{
    unsigned cur = atomic_load_explicit(&g_active, memory_order_relaxed);
    uint32_t n = atomic_load_explicit(&g_count[cur], memory_order_relaxed);
    const mt_sig_entry *e = g_copy[cur];
    if (!e)
        return;
    uint32_t pos = mti_sigtable_first_ending_after(e, n, r->start);
    if (pos < n && e[pos].range == r)
        publish_edit(pos, NULL);
}

const mt_sig_entry *mti_sigtable_locked_view(uint32_t *count)
{
    unsigned cur = atomic_load_explicit(&g_active, memory_order_relaxed);
    *count = g_copy[cur] ? atomic_load_explicit(&g_count[cur], memory_order_relaxed) : 0;
    return g_copy[cur];
}

uint32_t mti_sigtable_count(void)
{
    unsigned cur = atomic_load_explicit(&g_active, memory_order_relaxed);
    return atomic_load_explicit(&g_count[cur], memory_order_relaxed);
}

int mti_sigtable_page_state(uintptr_t page, const mt_range *self)
{
    uint32_t n;
    const mt_sig_entry *e = mti_sigtable_locked_view(&n);
    if (!e)
        return -1;
    size_t ps = (size_t)1 << self->page_shift;
    for (uint32_t i = mti_sigtable_first_ending_after(e, n, page);
         i < n && e[i].start < page + ps; i++)
        if (e[i].range != self)
            return (int)mti_pstate(e[i].range, mti_page_index(e[i].range, page));
    return -1;
}

void mti_sigtable_hook_begin(void)
{
    /* seq_cst store then seq_cst loads: the writer half of the Dekker pair
     * in mti_sigtable_enter. */
    atomic_store_explicit(&g_hook_active, 1, memory_order_seq_cst);
    uint32_t own = (uint32_t)tls_reader_depth;
    while (atomic_load_explicit(&g_readers[0], memory_order_seq_cst) +
               atomic_load_explicit(&g_readers[1], memory_order_seq_cst) >
           own)
        sched_yield();
}

void mti_sigtable_hook_end(void)
{
    /* release: the page states written in the section are visible to the
     * readers that see the flag down (they load it with acquire). */
    atomic_store_explicit(&g_hook_active, 0, memory_order_release);
}

void mti_sigtable_note_removed(uintptr_t start, uintptr_t end)
{
    uint32_t i = atomic_fetch_add_explicit(&g_removed_next, 1, memory_order_relaxed);
    i &= MT_REMOVED_RING - 1;
    atomic_store_explicit(&g_removed[i].start, 0, memory_order_relaxed);
    atomic_store_explicit(&g_removed[i].end, end, memory_order_release);
    atomic_store_explicit(&g_removed[i].start, start, memory_order_release);
}

/* Async-signal-safe. */
int mti_sigtable_recently_removed(uintptr_t addr)
{
    for (unsigned i = 0; i < MT_REMOVED_RING; i++) {
        uintptr_t s = atomic_load_explicit(&g_removed[i].start, memory_order_acquire);
        uintptr_t e = atomic_load_explicit(&g_removed[i].end, memory_order_acquire);
        if (s && addr >= s && addr < e)
            return 1;
    }
    return 0;
}

/* fork() child, single-threaded, with the lock taken by fork.c's prepare
 * handler: readers of other threads do not exist here; only this thread's
 * own sections (normally none) still count. */
void mti_sigtable_fork_child(void)
{
    atomic_store_explicit(&g_readers[0], 0, memory_order_relaxed);
    atomic_store_explicit(&g_readers[1], 0, memory_order_relaxed);
    atomic_store_explicit(&g_light[0], 0, memory_order_relaxed);
    atomic_store_explicit(&g_light[1], 0, memory_order_relaxed);
    unsigned cur = atomic_load_explicit(&g_active, memory_order_relaxed);
    atomic_store_explicit(&g_readers[cur], (uint32_t)tls_reader_depth, memory_order_relaxed);
    atomic_store_explicit(&g_hook_active, 0, memory_order_relaxed);
}
