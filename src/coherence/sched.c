/* Commands and their dependencies; events are commands seen from outside.
 *
 * A command starts with pending = 1 (the planner's guard) plus one per
 * dependency that had not completed when it was added. Each command's list
 * of dependents is guarded by its own spinlock (a byte in the command: a
 * link is a few stores, and one lock for all commands made every enqueue
 * and every completion meet on one cache line). Completing a command takes
 * its list under its lock, after publishing its status there, so a
 * dependency added concurrently either sees the status (and is not counted)
 * or lands in the list (and is released). The last decrement of
 * `pending` makes a command ready: to its engine, or, for a marker (no work
 * of its own) or a command whose dependency failed, straight to completion.
 * Completion is iterative (a worklist), so long chains of markers do not
 * recurse. */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "../common/clock.h"
#include "internal.h"

/* Waiting for an event: a command carries no mutex or condition variable of
 * its own (one per command would cost two initialisations per enqueue);
 * waiters park on one of 64 process-wide buckets chosen by the command's
 * address. A completion broadcasts its bucket only when the command has
 * waiters; waking other buckets' waiters is harmless (they re-check). */
#define NPARK 64
static struct park {
    pthread_mutex_t m;
    pthread_cond_t cv;
} park[NPARK];
static pthread_once_t park_once = PTHREAD_ONCE_INIT;

static void park_init(void)
{
    for (int i = 0; i < NPARK; i++) {
        pthread_mutex_init(&park[i].m, NULL);
        if (mti_cond_init_monotonic(&park[i].cv))
            pthread_cond_init(&park[i].cv, NULL);
    }
}

static struct park *park_of(const coh_cmd *cmd)
{
    return &park[((uintptr_t)cmd >> 7) % NPARK];
}

/* ---- a command's lock ----------------------------------------------------------
 * Held for a few stores (or a list swap); a holder preempted on a loaded
 * machine is waited for with sched_yield rather than spun on. */
static inline __attribute__((always_inline)) void cmd_lock(coh_cmd *cmd)
{
    /* acquire: pairs with the release of cmd_unlock. */
    while (atomic_exchange_explicit(&cmd->lk, 1, memory_order_acquire)) {
        for (int spins = 0; atomic_load_explicit(&cmd->lk, memory_order_relaxed); spins++)
            if (spins >= 64)
                sched_yield();
    }
}

static inline void cmd_unlock(coh_cmd *cmd)
{
    atomic_store_explicit(&cmd->lk, 0, memory_order_release);
}

/* ---- the command pool ---------------------------------------------------------
 * Commands are created by the planner and freed by whichever thread drops
 * the last reference (usually an engine's), so malloc would hand memory
 * across threads on every command. Freed commands go onto a lock-free stack
 * (Treiber push: ABA-free); the planner, under the context's lock, takes
 * the whole stack at once (an exchange: ABA-free too) when its own list is
 * empty. The pool outlives the context while commands the application still
 * holds are out: it is freed, with the chunks its commands were carved
 * from (carve), by the last of the context and its commands. */
int mti_coh_pool_create(mt_coh *c)
{
    c->pool = calloc(1, sizeof *c->pool);
    if (!c->pool)
        return -ENOMEM;
    atomic_init(&c->pool->refs, 1);
    return 0;
}

enum { CMD_CHUNK = 2 << 20 }; /* commands are carved from these (carve) */

static void free_chunks(void *x)
{
    while (x) {
        void *n = *(void **)x;
        munmap(x, CMD_CHUNK);
        x = n;
    }
}

static void pool_put_n(coh_pool *p, int64_t n)
{
    /* acq_rel: the last one sees every push before it. */
    if (atomic_fetch_sub_explicit(&p->refs, n, memory_order_acq_rel) != n)
        return;
    free_chunks(p->chunks);
    free(p);
}

static void pool_put(coh_pool *p)
{
    pool_put_n(p, 1);
}

void mti_coh_pool_close(mt_coh *c)
{
    coh_pool *p = c->pool;
    atomic_store_explicit(&p->closed, 1, memory_order_release);
    int64_t n = 1 + p->credit; /* the context's reference and the unused credit */
    p->credit = 0;
    pool_put_n(p, n);
}

/* A command as the pool keeps it: inline storage in use, nothing taken.
 * Written by whichever thread frees it (or when carved), so that the planner
 * writes only what differs per command. Not here: what the planner may
 * still read of a freed command (mti_coh_depend_write_slow: its sequence
 * numbers, status, lock and fix_applied), which only the planner writes,
 * and the lock and waiter count, which are 0 again whenever it is freed. */
static void cmd_reset(coh_cmd *cmd)
{
    /* What mti_coh_cmd_new hands out: one reference, the planner's guard
     * on `pending`, no error. Nothing reads these of a freed command. */
    atomic_init(&cmd->refs, 1);
    atomic_init(&cmd->pending, 1);
    atomic_init(&cmd->dep_error, 0);
    cmd->deps = cmd->deps_inline;
    cmd->ndeps = 0;
    cmd->capdeps = COH_INLINE_DEPS;
    cmd->roots = cmd->roots_inline;
    cmd->nroots = 0;
    cmd->caproots = COH_INLINE_ROOTS;
    cmd->segs = cmd->segs_inline;
    cmd->nsegs = 0;
    cmd->capsegs = 2;
    cmd->fix = cmd->fix_inline;
    cmd->nfix = 0;
    cmd->capfix = COH_INLINE_FIX;
    cmd->from_loc = cmd->to_loc = 0;
    cmd->opkind = MT_COH_OP_RUN;
    cmd->nargs = 0;
    cmd->bytes = 0;
    cmd->argv = NULL;
    cmd->absorb = NULL;
    cmd->hostatt = NULL;
    cmd->inflight = 0;
    cmd->submitted = 0;
}

/* Commands are carved from 2 MiB chunks, 2 MiB-aligned and advised for
 * transparent huge pages: the planner touches a few thousand pooled
 * commands in no particular order, and on 4 KiB pages nearly every one is a
 * TLB miss (a two-level page walk in a virtual machine). This took 6% off
 * the enqueue decision (docs/coherence.md). Only growing the pool touches a
 * new chunk (once per some 2,500 commands), the one place where the kernel
 * may compact memory to find a huge page. A chunk's first line links it to
 * the pool's list; chunks go back to the system with the pool. */
static coh_cmd *carve(coh_pool *p)
{
    size_t sz = (sizeof(coh_cmd) + 63) & ~(size_t)63;
    if ((size_t)(p->carve_end - p->carve) < sz) {
        size_t len = 2 * (size_t)CMD_CHUNK; /* room to align */
        char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
            return NULL;
        char *a = (char *)(((uintptr_t)m + CMD_CHUNK - 1) & ~(uintptr_t)(CMD_CHUNK - 1));
        if (a > m)
            munmap(m, (size_t)(a - m));
        if (a + CMD_CHUNK < m + len)
            munmap(a + CMD_CHUNK, (size_t)(m + len - (a + CMD_CHUNK)));
        (void)madvise(a, CMD_CHUNK, MADV_HUGEPAGE); /* a hint: THP may be off */
        *(void **)a = p->chunks;
        p->chunks = a;
        p->carve = a + 64;
        p->carve_end = a + CMD_CHUNK;
    }
    coh_cmd *cmd = (coh_cmd *)(void *)p->carve;
    p->carve += sz;
    return cmd;
}

coh_cmd *mti_coh_cmd_take_slow(mt_coh *c)
{
    coh_pool *p = c->pool;
    /* acquire: pairs with the release of the pushes (and so with the
     * freeing thread's cmd_reset). */
    coh_cmd *cmd = atomic_exchange_explicit(&p->head, NULL, memory_order_acquire);
    if (cmd) {
        p->local = cmd->next;
        mti_coh_cmd_prefetch(p->local);
    } else {
        /* Line-aligned, so that its hot fields lie on the five lines its
         * layout puts them on (malloc's 16-byte alignment spreads them
         * over six). */
        if (!(cmd = carve(p)))
            return NULL;
        atomic_init(&cmd->lk, 0);
        atomic_init(&cmd->waiters, 0);
        cmd->ctx = c; /* the same for every use: commands stay in their pool */
        cmd->pool = p;
        cmd_reset(cmd);
    }
    return cmd;
}


static void release_roots(coh_cmd *cmd)
{
    for (uint32_t i = 0; i < cmd->nroots; i++)
        mti_coh_root_unref(cmd->roots[i]);
    cmd->nroots = 0;
}

void mti_coh_cmd_free(coh_cmd *cmd)
{
    release_roots(cmd);
    if (cmd->absorb)
        mti_coh_root_unref(cmd->absorb);
    if (cmd->deps != cmd->deps_inline)
        free(cmd->deps);
    if (cmd->roots != cmd->roots_inline)
        free(cmd->roots);
    if (cmd->fix != cmd->fix_inline)
        free(cmd->fix);
    if (cmd->segs != cmd->segs_inline)
        free(cmd->segs);
    if (cmd->argv != cmd->argv_inline)
        free(cmd->argv);
    coh_pool *p = cmd->pool;
    if (!atomic_load_explicit(&p->closed, memory_order_acquire)) {
        cmd_reset(cmd);
        coh_cmd *h = atomic_load_explicit(&p->head, memory_order_relaxed);
        do
            cmd->next = h;
        while (!atomic_compare_exchange_weak_explicit(&p->head, &h, cmd, memory_order_release,
                                                      memory_order_relaxed));
    }
    pool_put(p);
}

static int grow_array(void **arr, uint32_t *cap, size_t elem, void *inline_storage, uint32_t n)
{
    uint64_t ncap = (uint64_t)*cap * 2;
    if (ncap > UINT32_MAX)
        return -ENOMEM;
    void *p;
    if (*arr == inline_storage) {
        p = malloc(ncap * elem);
        if (p)
            memcpy(p, *arr, n * elem);
    } else
        p = realloc(*arr, ncap * elem);
    if (!p)
        return -ENOMEM;
    *arr = p;
    *cap = (uint32_t)ncap;
    return 0;
}

int mti_coh_cmd_add_root(coh_cmd *cmd, coh_root *root)
{
    for (uint32_t i = 0; i < cmd->nroots; i++)
        if (cmd->roots[i] == root)
            return 0;
    if (cmd->nroots == cmd->caproots &&
        grow_array((void **)&cmd->roots, &cmd->caproots, sizeof *cmd->roots, cmd->roots_inline,
                   cmd->nroots))
        return -ENOMEM;
    mti_coh_root_ref(root);
    cmd->roots[cmd->nroots++] = root;
    return 0;
}

int mti_coh_cmd_add_fix_slow(coh_cmd *cmd, const coh_fix *f)
{
    if (cmd->nfix == cmd->capfix &&
        grow_array((void **)&cmd->fix, &cmd->capfix, sizeof *cmd->fix, cmd->fix_inline, cmd->nfix))
        return -ENOMEM;
    cmd->fix[cmd->nfix++] = *f;
    return 0;
}

int mti_coh_cmd_add_seg_slow(coh_cmd *cmd, uint64_t src, uint64_t dst, uint64_t len)
{
    if (cmd->nsegs == cmd->capsegs &&
        grow_array((void **)&cmd->segs, &cmd->capsegs, sizeof *cmd->segs, cmd->segs_inline,
                   cmd->nsegs))
        return -ENOMEM;
    cmd->segs[cmd->nsegs++] = (mt_coh_seg){src, dst, len};
    return 0;
}

int mti_coh_cmd_use_loc(mt_coh *c, coh_cmd *cmd, uint32_t loc, uint64_t *seq)
{
    for (uint32_t i = 0; i < cmd->nloc; i++)
        if (cmd->loc[i] == loc) {
            *seq = cmd->seq[i];
            return 0;
        }
    if (cmd->nloc == 2)
        return -EINVAL; /* a command touches at most two locations */
    uint64_t s = mti_coh_loc_take(mti_coh_loc_of(c, loc));
    if (!s)
        return -ENOMEM;
    cmd->loc[cmd->nloc] = loc;
    cmd->seq[cmd->nloc] = s;
    cmd->nloc++;
    *seq = s;
    return 0;
}

/* Links are tagged: bit 0 set = order only (a failure does not propagate).
 * A data dependency that already failed propagates its error only while
 * its fixup is not applied: once the planner has cleared what it was to
 * write, the instance is consistent again and later writes into it need not
 * fail (the planner's lock orders fix_applied). Caller holds dep's lock, or
 * dep is a command the planner is building (not armed: nothing else can
 * complete it or link to it). */
static inline __attribute__((always_inline)) int link_locked(coh_cmd *cmd, coh_cmd *dep, int kind)
{
    int st = atomic_load_explicit(&dep->status, memory_order_relaxed);
    if (st == COH_PENDING) {
        /* Submitted to the in-order engine cmd runs on: the engine's order
         * is the wait (and a failure of dep fails cmd there too). */
        if (dep->submitted && dep->eng == cmd->eng)
            return 0;
        if (dep->ndeps == dep->capdeps &&
            grow_array((void **)&dep->deps, &dep->capdeps, sizeof *dep->deps, dep->deps_inline,
                       dep->ndeps))
            return -ENOMEM;
        /* No reference for the link: cmd is armed or being built, and
         * stays alive (the planner's or its execution's reference) until it
         * completes, which is after every dependency let go of it (see
         * complete_one). */
        dep->deps[dep->ndeps++] = (coh_cmd *)((uintptr_t)cmd | (uintptr_t)(kind == COH_DEP_ORDER));
        atomic_fetch_add_explicit(&cmd->pending, 1, memory_order_relaxed);
    } else if (st < 0 && kind != COH_DEP_ORDER && (kind == COH_DEP_WAIT || !dep->fix_applied)) {
        int zero = 0;
        atomic_compare_exchange_strong_explicit(&cmd->dep_error, &zero, st, memory_order_relaxed,
                                                memory_order_relaxed);
    }
    return 0;
}

int mti_coh_cmd_link(mt_coh *c, coh_cmd *cmd, coh_cmd *dep, int kind)
{
    (void)c;
    cmd_lock(dep);
    int rc = link_locked(cmd, dep, kind);
    cmd_unlock(dep);
    return rc;
}

/* Whether w is still the command that took `seq` at `loc`. Last writes and
 * last uses hold no reference: w may have completed, been freed and come
 * back from the pool as another command. Its sequence numbers tell (they
 * are never reused, and only the planner writes them); pool memory stays a
 * command while the context lives. */
static int numbered(const coh_cmd *w, uint32_t loc, uint64_t seq)
{
    for (uint32_t i = 0; i < w->nloc; i++)
        if (w->loc[i] == loc && w->seq[i] == seq)
            return 1;
    return 0;
}

int mti_coh_depend_write_slow(mt_coh *c, coh_cmd *cmd, coh_cmd *w, uint32_t loc, uint64_t seq)
{
    /* Not the same command: the write completed (and a failed one is kept,
     * not reused, until its fixup is applied). */
    if (!numbered(w, loc, seq))
        return 0;
    int st = atomic_load_explicit(&w->status, memory_order_acquire);
    if (st == 0)
        return 0;
    if (st != COH_PENDING) {
        /* Failed: it matters until its fixup is applied (it is then held
         * by the fixup list, not freed; a freed command is not locked). */
        if (!w->fix_applied) {
            int zero = 0;
            atomic_compare_exchange_strong_explicit(&cmd->dep_error, &zero, st,
                                                    memory_order_relaxed, memory_order_relaxed);
        }
        return 0;
    }
    /* Pending: alive until it completes, and it re-checks under its lock. */
    return mti_coh_cmd_link(c, cmd, w, COH_DEP_DATA);
}

int mti_coh_use_chain(mt_coh *c, coh_cmd *cmd, coh_inst *in, uint64_t seq)
{
    coh_cmd *u = in->last_use;
    int rc = 0;
    /* As a last write, but order only: a use that completed, failed or was
     * reused needs nothing. */
    if (u && u != cmd &&
        in->lu_seq > atomic_load_explicit(&c->loc[in->loc]->wm, memory_order_acquire) &&
        numbered(u, in->loc, in->lu_seq) &&
        atomic_load_explicit(&u->status, memory_order_acquire) == COH_PENDING)
        rc = mti_coh_cmd_link(c, cmd, u, COH_DEP_ORDER);
    if (seq) {
        in->last_use = cmd;
        in->lu_seq = seq;
    }
    return rc;
}

int mti_coh_cmd_depend_fresh_slow(coh_cmd *cmd, coh_cmd *dep)
{
    return link_locked(cmd, dep, COH_DEP_DATA);
}


static void engine_push(coh_engine *e, coh_cmd *cmd);

/* Commands to complete, found on the way (what a completion releases): a
 * stack linked through the commands themselves, so completing never
 * allocates (it used to grow an array, and abort when it could not). A
 * command on it is ready and in no other list, and its status is its
 * dep_error: no dependency is left to change it. */
typedef struct worklist {
    coh_cmd *head;
} worklist;

static void wl_push(worklist *w, coh_cmd *cmd)
{
    cmd->next = w->head;
    w->head = cmd;
}

/* cmd's last dependency completed: run it, or complete it at once. */
static void ready(coh_cmd *cmd, worklist *w)
{
    if (atomic_load_explicit(&cmd->dep_error, memory_order_relaxed) || !cmd->eng)
        wl_push(w, cmd); /* failed, or a marker: complete it at once */
    else
        engine_push(cmd->eng, cmd);
}

/* A failed command that was to write: queued for the planner's next
 * mti_coh_fixups_run (fixup.c), which clears what it was to write. */
static void fixup_push(mt_coh *c, coh_cmd *cmd)
{
    mti_coh_cmd_ref(cmd);
    pthread_mutex_lock(&c->fix_lock);
    cmd->next = c->fix_head;
    c->fix_head = cmd;
    pthread_mutex_unlock(&c->fix_lock);
    /* release: pairs with the planner's acquire load of fix_pending. */
    atomic_store_explicit(&c->fix_pending, 1, memory_order_release);
}

static void account(mt_coh *c, coh_cmd *cmd, int status)
{
    if (status) {
        atomic_fetch_add_explicit(&c->st_failed, 1, memory_order_relaxed);
        return;
    }
    if (cmd->kind != COH_KIND_MIGRATION)
        return;
    uint64_t n = cmd->bytes;
    if (cmd->to_loc && c->dev[cmd->to_loc])
        atomic_fetch_add_explicit(&c->dev[cmd->to_loc]->bytes_in, n, memory_order_relaxed);
    if (cmd->from_loc && c->dev[cmd->from_loc])
        atomic_fetch_add_explicit(&c->dev[cmd->from_loc]->bytes_out, n, memory_order_relaxed);
}

#ifndef NDEBUG
/* Set by engine.c while the planner's thread submits; defined here, where
 * it is checked, so that sched.c does not call back into engine.c. */
_Thread_local int mti_coh_kicking;
#endif

static void complete_one(coh_cmd *cmd, int status, worklist *w)
{
    mt_coh *c = cmd->ctx;
#ifndef NDEBUG
    if (mti_coh_kicking)
        abort(); /* a completion on the planner's submitting thread (engine.c) */
#endif
    account(c, cmd, status);
    /* A failed download's pages are not host writes either (the fixup
     * clears the host's bit there): absorbed whatever the status. */
    if (cmd->absorb)
        mti_coh_track_absorb(cmd->absorb, cmd);
    if (status < 0 && (cmd->nfix || cmd->kind == COH_KIND_MIGRATION))
        fixup_push(c, cmd); /* keeps its roots for the planner */
    else
        release_roots(cmd);
    /* Publish the status and take the dependents in one step (see top). */
    cmd_lock(cmd);
    atomic_store_explicit(&cmd->status, status, memory_order_release);
    coh_cmd **deps = cmd->deps;
    uint32_t n = cmd->ndeps;
    cmd->deps = cmd->deps_inline;
    cmd->ndeps = 0;
    cmd->capdeps = COH_INLINE_DEPS;
    cmd_unlock(cmd);
    /* Sequence numbers after the status: a location whose watermark passes
     * this command releases memory only once the command is final. */
    for (uint32_t i = 0; i < cmd->nloc; i++)
        mti_coh_loc_done(mti_coh_loc_of(c, cmd->loc[i]), cmd->seq[i]);
    /* seq_cst pairs with the waiter's increment of `waiters` before its
     * re-check of the status (a Dekker pair, as in the timeline). */
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&cmd->waiters, memory_order_seq_cst)) {
        struct park *pk = park_of(cmd);
        pthread_mutex_lock(&pk->m);
        pthread_cond_broadcast(&pk->cv);
        pthread_mutex_unlock(&pk->m);
    }
    for (uint32_t i = 0; i < n; i++) {
        coh_cmd *d = (coh_cmd *)((uintptr_t)deps[i] & ~(uintptr_t)1);
        if (status < 0 && !((uintptr_t)deps[i] & 1)) {
            int zero = 0;
            atomic_compare_exchange_strong_explicit(&d->dep_error, &zero, status,
                                                    memory_order_relaxed, memory_order_relaxed);
        }
        /* acq_rel: the command that becomes ready sees what every dependency
         * wrote before completing. The decrement is the last touch of d
         * (links hold no reference): once it counted, d may complete and go. */
        if (atomic_fetch_sub_explicit(&d->pending, 1, memory_order_acq_rel) == 1)
            ready(d, w);
    }
    if (deps != cmd->deps_inline)
        free(deps);
}

/* Completes what became complete on the way (and what that releases). */
static void wl_run(worklist *w)
{
    while (w->head) {
        coh_cmd *cmd = w->head;
        w->head = cmd->next;
        complete_one(cmd, atomic_load_explicit(&cmd->dep_error, memory_order_relaxed), w);
        mti_coh_cmd_unref(cmd);
    }
}

void mti_coh_cmd_complete(coh_cmd *cmd, int status)
{
    worklist w = {NULL};
    complete_one(cmd, status, &w);
    mti_coh_cmd_unref(cmd); /* the execution's reference */
    wl_run(&w);
}

void mti_coh_cmd_submitted(coh_cmd *cmd)
{
    worklist w = {NULL};
    coh_engine *e = cmd->eng;
    coh_cmd *take[16];
    uint32_t nt;
    do {
        /* Dependents on this engine leave cmd's list (a few at a time: new
         * links may land in the list as soon as the lock is let go); from
         * now on link_locked does not add them. */
        nt = 0;
        cmd_lock(cmd);
        cmd->submitted = 1;
        uint32_t k = 0;
        for (uint32_t i = 0; i < cmd->ndeps; i++) {
            coh_cmd *d = (coh_cmd *)((uintptr_t)cmd->deps[i] & ~(uintptr_t)1);
            if (d->eng == e && nt < 16)
                take[nt++] = d;
            else
                cmd->deps[k++] = cmd->deps[i];
        }
        cmd->ndeps = k;
        cmd_unlock(cmd);
        /* As complete_one does, without a status: d is submitted after cmd
         * on the same engine, so it runs after it. */
        for (uint32_t i = 0; i < nt; i++)
            if (atomic_fetch_sub_explicit(&take[i]->pending, 1, memory_order_acq_rel) == 1)
                ready(take[i], &w);
    } while (nt == 16);
    wl_run(&w);
}

void mti_coh_cmd_ready_at_arm_slow(mt_coh *c, coh_cmd *cmd)
{
    (void)c;
    mti_coh_cmd_complete(cmd, atomic_load_explicit(&cmd->dep_error, memory_order_relaxed));
}

/* ---- hand-over to the engines ----------------------------------------------------
 * Here rather than in engine.c: a command that becomes ready goes to its
 * engine, and one an engine no longer takes completes at once, so hand-over
 * and completion call each other; engine.c's threads only call in. */
/* Hands the chain h..t (n commands) to e's ready list and wakes its
 * submitter, or completes them all with MT_ECANCELED when e no longer takes
 * work (`refuse_stopping`: also while it is being stopped). */
static void hand_over(coh_engine *e, coh_cmd *h, coh_cmd *t, uint32_t n, int refuse_stopping)
{
    pthread_mutex_lock(&e->lock);
    if (e->stopped || (refuse_stopping && e->stop)) {
        pthread_mutex_unlock(&e->lock);
        while (h) {
            coh_cmd *nx = h->next;
            mti_coh_cmd_complete(h, MT_ECANCELED);
            h = nx;
        }
        return;
    }
    atomic_fetch_add_explicit(&e->busy, n, memory_order_relaxed);
    mti_coh_cmds_append(&e->head, &e->tail, h, t);
    if (e->sleeping)
        pthread_cond_signal(&e->cond);
    pthread_mutex_unlock(&e->lock);
}

static void engine_push(coh_engine *e, coh_cmd *cmd)
{
    cmd->next = NULL;
    hand_over(e, cmd, cmd, 1, 0);
}

void mti_coh_engine_doorbell(coh_engine *e)
{
    if (!e->bhead)
        return;
    coh_cmd *t;
    uint32_t n;
    coh_cmd *h = mti_coh_batch_take(e, &t, &n);
    hand_over(e, h, t, n, 1);
}

void mti_coh_doorbell_all(mt_coh *c)
{
    for (uint32_t i = 1; i <= c->ndev; i++)
        for (int k = 0; k < 2; k++)
            mti_coh_engine_doorbell(&c->dev[i]->eng[k]);
    c->batch_count = 0;
    c->batch_big = 0;
}

/* ---- events ------------------------------------------------------------------- */

int mt_coh_event_status(const mt_coh_event *ev)
{
    if (!ev)
        return -EINVAL;
    return mti_coh_cmd_status((const coh_cmd *)ev);
}

void mt_coh_event_retain(mt_coh_event *ev)
{
    if (ev)
        mti_coh_cmd_ref((coh_cmd *)ev);
}

void mt_coh_event_release(mt_coh_event *ev)
{
    mti_coh_cmd_unref((coh_cmd *)ev);
}

int mt_coh_event_info_get(const mt_coh_event *ev, mt_coh_event_info *out)
{
    if (!ev || !out)
        return -EINVAL;
    const coh_cmd *cmd = (const coh_cmd *)ev;
    out->bytes_in = cmd->bytes_in;
    out->bytes_relay = cmd->bytes_relay;
    out->migrations = cmd->migrations;
    return 0;
}

int mt_coh_event_wait(mt_coh_event *ev, int64_t timeout_ns)
{
    if (!ev)
        return -EINVAL;
    coh_cmd *cmd = (coh_cmd *)ev;
    int st = mti_coh_cmd_status(cmd);
    if (st != COH_PENDING)
        return st;
    /* Pending in a forked child: its engines are in the parent, it would
     * never complete here (the context is alive: destroy completes every
     * command). */
    mt_coh *c = cmd->ctx;
    if (mti_coh_forked_slow(c))
        return MT_EFORKED;
    /* The command may still sit in a batch: hand everything over first. */
    pthread_mutex_lock(&c->lock);
    if (c->batch_count)
        mti_coh_doorbell_all(c);
    pthread_mutex_unlock(&c->lock);
    if (timeout_ns == 0)
        return mti_coh_cmd_status(cmd) == COH_PENDING ? MT_ETIMEDOUT : mti_coh_cmd_status(cmd);
    struct timespec dl;
    if (timeout_ns > 0)
        mti_deadline_after(&dl, timeout_ns);
    pthread_once(&park_once, park_init);
    struct park *pk = park_of(cmd);
    pthread_mutex_lock(&pk->m);
    atomic_fetch_add_explicit(&cmd->waiters, 1, memory_order_seq_cst);
    while (atomic_load_explicit(&cmd->status, memory_order_seq_cst) == COH_PENDING)
        if (mti_cond_wait_until(&pk->cv, &pk->m, timeout_ns > 0 ? &dl : NULL))
            break;
    atomic_fetch_sub_explicit(&cmd->waiters, 1, memory_order_relaxed);
    pthread_mutex_unlock(&pk->m);
    st = mti_coh_cmd_status(cmd);
    return st == COH_PENDING ? MT_ETIMEDOUT : st;
}
