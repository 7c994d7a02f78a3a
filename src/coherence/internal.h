/* coherence internals shared by the files of src/coherence/.
 *
 * Objects and who guards them:
 *  - mt_coh.lock (the planner's lock) guards everything the planner reads
 *    and writes: handles, views, roots (validity runs, instances), clients,
 *    queues, device instance lists, the dispatch batch.
 *  - each command's lock (coh_cmd.lk, a spinlock) guards its status
 *    transition and its list of dependents (a few stores; taken under the
 *    planner's lock or alone, never two at once).
 *  - coh_engine.lock guards an engine's ready and in-flight FIFOs.
 *  - coh_loc.lock guards a location's sequence ring; coh_device.mem_lock its
 *    allocator (release callbacks run on any thread).
 * Lock order: lock -> {a command's lock, engine, loc, mem_lock, track_lock, fix_lock};
 * no thread takes `lock` while holding another of these.
 *
 * Internal names carry the coh_ prefix; public ones mt_coh_. */
#ifndef MT_COHERENCE_INTERNAL_H
#define MT_COHERENCE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/types.h>

#include "memtrack/alloc.h"
#include "memtrack/coherence.h"
#include "memtrack/timeline.h"
#include "memtrack/track.h"

#include "../common/page.h"

#define COH_NLOC (MT_COH_MAX_DEVICES + 1)
#define COH_PENDING 1 /* a command's status until it completes */
#define COH_BIT(loc) (1ull << (loc))

typedef struct coh_cmd coh_cmd;
typedef struct coh_root coh_root;
typedef struct coh_inst coh_inst;
typedef struct coh_view coh_view;
typedef struct coh_svm coh_svm;
typedef struct coh_device coh_device;
typedef struct coh_engine coh_engine;
typedef struct coh_loc coh_loc;
typedef struct coh_track coh_track;
typedef struct coh_map coh_map;
typedef struct coh_workers coh_workers;
typedef struct coh_pool coh_pool;

/* ---- validity runs (runs.c) --------------------------------------------------
 * The root buffer [0, size) cut into runs; run i covers [v[i].start,
 * v[i+1].start) and `mask` is the set of locations holding the latest
 * content of those bytes (a location's instance is "at the latest version"
 * there). Neighbours always differ in mask; boundaries are granule multiples
 * (or the buffer's end). mask 0: the content was lost. */
typedef struct coh_run {
    uint64_t start;
    uint64_t mask;
} coh_run;

/* Most buffers have one or two runs: `v` starts on inline storage of
 * COH_RUNS_INLINE entries that the owner provides (a root keeps it off the
 * line its hot fields share; see coh_root). A heap array is always larger
 * (growing doubles from it), so cap == COH_RUNS_INLINE says `v` is inline. */
#define COH_RUNS_INLINE 2
typedef struct coh_runs {
    coh_run *v;
    uint32_t n, cap;
    uint64_t size;
} coh_runs;

typedef struct coh_range {
    uint64_t a, b;
} coh_range;

/* One run [0, size) of `mask`, on `inl` (COH_RUNS_INLINE entries, living as
 * long as r). */
void mti_coh_runs_init(coh_runs *r, coh_run *inl, uint64_t size, uint64_t mask);
void mti_coh_runs_free(coh_runs *r);
static inline uint64_t mti_coh_run_end(const coh_runs *r, uint32_t i)
{
    return i + 1 < r->n ? r->v[i + 1].start : r->size;
}
/* Index of the run containing off (< size). */
static inline uint32_t mti_coh_runs_find(const coh_runs *r, uint64_t off)
{
    /* Branch-free binary search (a conditional move per step): the answer
     * is in [base, base + n); the runs of random ranges would mispredict
     * every branch of the usual loop. */
    const coh_run *base = r->v;
    uint32_t n = r->n;
    while (n > 1) {
        uint32_t half = n / 2;
        base = base[half].start <= off ? base + half : base;
        n -= half;
    }
    return (uint32_t)(base - r->v);
}
/* The same, trying `hint` first (an index found earlier in this enqueue:
 * the runs of an argument's root rarely change between its validation and
 * its updates, and checking the hint is two comparisons, the search about
 * thirty instructions). Any hint is safe: a wrong one is only not used.
 * A hint with COH_HINT_EXACT is used unchecked: the caller knows that the
 * runs have not changed since it was found (planner.c, fetch_arg). */
#define COH_NO_HINT 0x7fffffffu
#define COH_HINT_EXACT 0x80000000u
static inline uint32_t mti_coh_runs_find_from(const coh_runs *r, uint64_t off, uint32_t hint)
{
    if (hint & COH_HINT_EXACT) {
#ifndef NDEBUG
        uint32_t k = hint ^ COH_HINT_EXACT;
        if (!(k < r->n && r->v[k].start <= off && (k + 1 == r->n || off < r->v[k + 1].start)))
            abort();
#endif
        return hint ^ COH_HINT_EXACT;
    }
    if (hint < r->n && r->v[hint].start <= off && (hint + 1 == r->n || off < r->v[hint + 1].start))
        return hint;
    return mti_coh_runs_find(r, off);
}
/* Room for `extra` more runs; 0 or -ENOMEM. Each single-range update below
 * needs 2. */
int mti_coh_runs_grow(coh_runs *r, uint32_t extra);
static inline int mti_coh_runs_reserve(coh_runs *r, uint32_t extra)
{
    return r->n + extra <= r->cap ? 0 : mti_coh_runs_grow(r, extra);
}
/* mask := (mask & and) | or over [a, b). */
void mti_coh_runs_update(coh_runs *r, uint64_t a, uint64_t b, uint64_t and_mask, uint64_t or_mask);
/* The same, `hint` tried first as the index of the run containing a. */
void mti_coh_runs_update_at(coh_runs *r, uint64_t a, uint64_t b, uint64_t and_mask,
                            uint64_t or_mask, uint32_t hint);
/* The two updates of an enqueue, `hint` tried first as the index of the run
 * containing a: mask := m over [a, b) (a write), and mask |= bit over [a, b)
 * (a read made it valid there). Each needs room for 2 more runs. */
void mti_coh_runs_set_at(coh_runs *r, uint64_t a, uint64_t b, uint64_t m, uint32_t hint);
void mti_coh_runs_mark_at(coh_runs *r, uint64_t a, uint64_t b, uint64_t bit, uint32_t hint);
/* mask := `mask` over every range of `rg` (sorted, disjoint, non-empty), in
 * one pass. 0 or -ENOMEM (then nothing changed). */
int mti_coh_runs_set_many(coh_runs *r, const coh_range *rg, size_t n, uint64_t mask);
/* AND of the masks over [a, b), and OR. */
void mti_coh_runs_masks(const coh_runs *r, uint64_t a, uint64_t b, uint64_t *all, uint64_t *any);
/* One walk over [a, b): the number of runs without `bit` (stale there),
 * the AND of their masks, and in *flags whether any run is lost (mask 0:
 * COH_STALE_LOST) and whether a stale run is valid at none of `peers`
 * (COH_STALE_OFF_PEER: fetching it may need host memory); *first: the
 * index of the run containing a (a hint for later walks). */
#define COH_STALE_LOST 1
#define COH_STALE_OFF_PEER 2
static inline uint32_t mti_coh_runs_stale(const coh_runs *r, uint64_t a, uint64_t b,
                                          uint64_t bit, uint64_t peers, uint64_t *and_mask,
                                          int *flags, uint32_t *first)
{
    uint32_t n = 0;
    uint64_t m_and = ~0ull;
    int l = 0, off = 0;
    uint32_t k0 = mti_coh_runs_find(r, a);
    *first = k0;
    for (uint32_t k = k0; k < r->n && r->v[k].start < b; k++) {
        uint64_t m = r->v[k].mask;
        l |= !m;
        if (!(m & bit)) {
            n++;
            m_and &= m;
            off |= !(m & peers);
        }
    }
    *and_mask = m_and;
    *flags = (l ? COH_STALE_LOST : 0) | (off ? COH_STALE_OFF_PEER : 0);
    return n;
}
/* Bytes of [a, b) whose mask is 0. */
uint64_t mti_coh_runs_lost(const coh_runs *r, uint64_t a, uint64_t b);
/* 1 when the runs are well formed (tests). */
int mti_coh_runs_check(const coh_runs *r);

/* ---- locations: sequence numbers and deferred reclamation (loc.c) -----------
 * Every command that uses an instance takes a sequence number on the
 * instance's location (host memory or a device). Commands complete in any
 * order; the location's timeline reaches s once every command up to s has,
 * so "release this instance once its last user completed" is
 * mt_timeline_defer(tl, inst->last_seq, ...). */
struct coh_loc {
    pthread_mutex_t lock;
    _Atomic uint64_t next; /* last number handed out (written by the planner only) */
    _Atomic uint64_t wm;   /* every number <= wm has completed (written under lock; release:
                            * whoever sees it sees those commands' completions) */
    uint8_t *done; /* ring of completion flags for (wm, next] */
    uint64_t cap;  /* power of two */
    mt_timeline *tl;
};

int mti_coh_loc_create(coh_loc **out);
void mti_coh_loc_destroy(coh_loc *l);
/* Hands out the next number (planner). 0 on -ENOMEM (then nothing changed).
 * Only the planner hands out numbers (under the context's lock), so `next`
 * has one writer and needs no lock unless the ring must grow. */
uint64_t mti_coh_loc_take_slow(coh_loc *l);
static inline uint64_t mti_coh_loc_take(coh_loc *l)
{
    uint64_t next = atomic_load_explicit(&l->next, memory_order_relaxed) + 1;
    if (next - atomic_load_explicit(&l->wm, memory_order_relaxed) > l->cap)
        return mti_coh_loc_take_slow(l);
    /* release: a completion that sees the number sees the ring it fits in. */
    atomic_store_explicit(&l->next, next, memory_order_release);
    return next;
}
/* Marks s complete; advances the timeline and runs what became ready. */
void mti_coh_loc_done(coh_loc *l, uint64_t s);
static inline uint64_t mti_coh_loc_completed(const coh_loc *l)
{
    return mt_timeline_completed(l->tl);
}

/* ---- instances, roots, views ---------------------------------------------- */

/* A copy of a root buffer at one location. */
struct coh_inst {
    uint64_t addr;       /* device address of byte 0 (a host pointer at location 0) */
    uint64_t last_seq;   /* sequence number of its last user at its location */
    uint64_t stamp;      /* LRU clock of its last use */
    uint64_t uid;        /* unique: a failure fixup names the instance it concerns */
    /* The last command writing into it, and the sequence number it took at
     * this location: no reference. Once the location's watermark passed
     * lw_seq it has completed and is never touched again (its memory may be
     * another command by then); see mti_coh_depend_write. */
    coh_cmd *last_write;
    uint64_t lw_seq;
    coh_root *root;
    uint32_t loc;
    uint32_t dev_index;  /* in coh_device.insts */
    mt_alloc_block block;/* device memory (devices) */
    int owned;           /* location 0: memory memtrack mapped */
    uint64_t len;        /* bytes reserved (>= root size) */
    /* The last command or copy that used it, and its number here (no
     * reference, as last_write): kept for roots with COH_ROOT_USE_CHAIN. */
    coh_cmd *last_use;
    uint64_t lu_seq;
};

/* Zeroed memory on its own cache lines: an instance's or a root's hot
 * fields then share one or two lines instead of straddling a boundary at
 * random (10,000 buffers do not stay in cache: every line is a miss). */
static inline void *mti_coh_zalloc_lines(size_t size)
{
    size = (size + 63) & ~(size_t)63;
    void *p = aligned_alloc(64, size);
    if (p)
        __builtin_memset(p, 0, size);
    return p;
}

/* host_attach results for the root's host memory, one per device. */
typedef struct coh_hostatt {
    _Atomic int state; /* 0 untried, 1 attached, -1 failed */
    void *token;
} coh_hostatt;

enum { COH_ROOT_BUFFER = 0, COH_ROOT_SVM = 1 };

/* What holds a buffer's content: a buffer created without a parent, or the
 * coherent buffer behind a coarse-grained SVM allocation. Handles reach it
 * through views (the buffer's own handle, sub-buffers, buffers made on SVM
 * pointers). */
struct coh_root {
    /* What every enqueue on the buffer reads, on cache lines of a
     * line-aligned block (mti_coh_zalloc_lines; 10,000 buffers do not stay
     * in cache): line 0 everything but the instances (references, the runs'
     * header, size, tracking, maps, version), line 2 the instances of
     * devices 1 to 8. Line 1 holds the runs' inline storage, read only by
     * buffers of one or two runs (a fragmented buffer's runs are on the
     * heap: it reads lines 0 and 2 and its array), the host instance (read
     * when host memory is involved) and what the planner rarely reads. */
    _Atomic int refs;   /* views + commands + fixups + pending releases */
    uint32_t flags;     /* MT_COH_BUF_* given at creation */
    coh_runs runs;
    uint64_t size;
    coh_track *track;   /* tracked host writes, or NULL */
    coh_map *maps;      /* active maps */
    uint64_t version;   /* writes so far (informational) */
    /* line 1 */
    coh_run runs_inline[COH_RUNS_INLINE];
    coh_hostatt *hostatt; /* [COH_NLOC] once host memory exists */
    mt_coh *ctx;
    mt_coh_client *client;
    coh_inst *inst[COH_NLOC]; /* NULL = no instance; [0] is host memory */
    int kind;
    int views;          /* live views (under the planner's lock) */
    int dead;           /* no view left: released */
    uint32_t index;     /* in mt_coh.roots */
    _Atomic int releases; /* deferred releases outstanding, +1 until dead */
    void (*released)(void *user);
    void *released_user;
};
_Static_assert(offsetof(struct coh_root, version) + sizeof(uint64_t) <= 64 &&
                   offsetof(struct coh_root, inst[1]) % 64 == 0,
               "coh_root: hot fields on line 0, devices 1-8 on one line");

/* coh_root.flags, besides MT_COH_BUF_*: every use of the root's device
 * instances (commands, copies from and into them) runs after the one
 * before (mti_coh_use_chain). Set for tracked memory whose chunks are taken
 * whole (hostsync.c): such a sync may mark bytes a device holds as written
 * by the host, although the host did not write them, and the upload that
 * follows rewrites them (same content) while commands there may still be
 * reading them. Ordering the uses makes that upload wait for them. */
#define COH_ROOT_USE_CHAIN (1u << 31)

enum { COH_VIEW_ROOT = 0, COH_VIEW_SUB = 1, COH_VIEW_FINE = 2 };

/* What a handle names. */
struct coh_view {
    uint32_t slot;
    uint32_t gen;
    mt_coh_client *client;
    int kind;
    coh_root *root;     /* ROOT, SUB */
    coh_svm *svm;       /* FINE */
    uint64_t offset;    /* in the root (or the SVM allocation) */
    uint64_t size;
    uint32_t flags;     /* READ_ONLY / WRITE_ONLY */
    coh_view *next, *prev; /* in the client's list */
};

struct coh_svm {
    void *ptr;
    uint64_t size;
    int kind;           /* MT_COH_SVM_* */
    coh_root *root;     /* COARSE: the coherent buffer */
    uint64_t *dev_addr; /* FINE: [COH_NLOC] device address, 0 = not attached */
    void **dev_token;
    int views;          /* FINE: buffers made on it */
    int freed;
    uint64_t last_seq;  /* FINE: host sequence number of the last command using it */
    mt_coh_client *client;
    coh_svm *next;
};

/* A host map. It holds what it maps like a view does (a view count on its
 * root, or on its fine-grained SVM allocation): a buffer freed while mapped
 * keeps its memory until the unmap. */
struct coh_map {
    void *ptr;
    coh_root *root;
    coh_svm *svm;       /* fine-grained SVM (root NULL) */
    uint64_t a, b;      /* in the root */
    int write;
    coh_map *next;      /* in the root's list */
    coh_map *cnext;     /* in the client's list */
};

struct mt_coh_client {
    mt_coh *ctx;
    coh_view *views;
    coh_svm *svms;
    mt_coh_queue *queues;
    coh_map *maps;
    mt_coh_client *next, *prev;
};

struct mt_coh_queue {
    mt_coh_client *client;
    coh_device *dev;
    coh_cmd *last;      /* holds a reference */
    mt_coh_queue *next;
};

/* ---- commands (sched.c) ------------------------------------------------------ */

/* A failed command's effect on validity: the location's bit is cleared over
 * the ranges it was to write (the segments' destinations, or [a, b)). */
typedef struct coh_fix {
    coh_root *root;
    uint64_t uid;  /* the instance written; skipped if replaced since */
    uint32_t loc;
    int use_segs;
    uint64_t a, b;
} coh_fix;

enum { COH_KIND_RUN = 0, COH_KIND_MIGRATION = 1, COH_KIND_MARKER = 2 };

#define COH_INLINE_DEPS 4
#define COH_INLINE_FIX 4
#define COH_INLINE_ROOTS 4

struct coh_cmd {
    /* Hot: what creating and linking a migration touches lies in the first
     * four cache lines (a line-aligned block, sched.c): lines 0-1 the
     * header, 2-3 what the engine makes the op of, its segments, roots and
     * first dependent. A migration writes nothing else at enqueue: the op
     * is built by the engine thread at submit, and the fields that stay the
     * same from one use to the next (context, pool) are written when the
     * command is first allocated. A command (RUN) adds what follows up to
     * its fixups and arguments. */
    _Atomic int refs;
    _Atomic int status;        /* COH_PENDING, 0 or an error */
    _Atomic uint32_t pending;  /* dependencies not complete, +1 while being built */
    _Atomic int dep_error;     /* first error among its dependencies */
    _Atomic int waiters;       /* threads parked waiting for it */
    _Atomic int lk;            /* guards status transition and deps (sched.c) */
    uint16_t kind;             /* COH_KIND_* */
    uint8_t nloc;              /* sequence numbers taken at locations */
    /* The planner applied its fixup (planner's lock). On this line: every
     * command writes it at creation, and a command (RUN) does not use the
     * migration's lines 2-3 otherwise. */
    uint8_t fix_applied;
    /* Submitted to an in-order engine (under lk): a later command of that
     * engine need not wait for its completion (mti_coh_cmd_submitted).
     * Here: linking to a pending command reads it. */
    int submitted;
    coh_engine *eng;           /* NULL: no work of its own (marker) */
    coh_cmd *next;             /* engine FIFO / batch / fixup list / pool */
    /* Dependents, under lk. */
    coh_cmd **deps;
    uint32_t ndeps, capdeps;
    /* line 1 */
    uint32_t loc[2];
    uint64_t seq[2];
    /* Roots it references (released when done; kept for fixups on failure). */
    coh_root **roots;
    uint32_t nroots, caproots;
    mt_coh_seg *segs;
    uint32_t nsegs, capsegs;
    uint32_t from_loc, to_loc; /* migrations: for the byte counters */
    /* line 2: what the engine turns into `op` at submit (build_op, engine.c). */
    uint32_t opkind;           /* mt_coh_op_kind */
    uint64_t bytes;            /* copies: sum of the segments */
    uint64_t dev_addr;         /* copies: this device's instance */
    uint64_t xaddr;            /* UPLOAD/DOWNLOAD: host memory; PEER: the source instance */
    /* A migration's fixup is implicit (fixup.c): its segments' destinations
     * in roots[0]'s instance `fix_uid` at to_loc. */
    uint64_t fix_uid;
    /* Inline storage, used through the pointers above (not cleared); the
     * first entries are what a migration or a small command uses. */
    mt_coh_seg segs_inline[2];
    coh_root *roots_inline[COH_INLINE_ROOTS];
    coh_cmd *deps_inline[COH_INLINE_DEPS];
    /* Warm: commands (RUN) only, and a migration's further dependents. */
    mt_coh_kernel_fn fn;
    void *user;
    uint64_t *argv;            /* addr[nargs] then size[nargs] */
    uint32_t nargs;
    uint32_t migrations;       /* what the planner decided (event info; */
    uint64_t bytes_in, bytes_relay; /* not kept for migrations) */
    uint64_t argv_inline[8];
    coh_fix *fix;
    uint32_t nfix, capfix;
    coh_fix fix_inline[COH_INLINE_FIX];
    /* Cold: set once per allocation, or for some commands only. */
    /* A download into tracked host memory: pages it wrote are not host writes.
     * In the root's list of in-flight downloads from issue to completion
     * (hosttrack.c; anext/aprev/inflight under the track's ilock; anext and
     * aprev are written when it joins, only read while inflight). */
    coh_root *absorb;
    /* op.host is a root's host memory: attach it (pinning) on first use
     * (host_len is set with it). */
    coh_hostatt *hostatt;
    int inflight;
    mt_coh *ctx;
    coh_pool *pool;            /* where it returns when freed */
    coh_cmd *anext, *aprev;
    uint64_t host_len;
    /* What submit returned, for the completer (1: in flight, wait for it;
     * else the status: a submit by the planner whose result the completer
     * delivers, mti_coh_engine_kick). Set before it joins the in-flight list. */
    int sub_rc;
    /* The operation, written by the engine thread (build_op). */
    mt_coh_op op;
};
/* The lines a migration writes at enqueue (the pool prefetches them). */
#define COH_CMD_HOT_END offsetof(coh_cmd, deps_inline[1])
_Static_assert(offsetof(coh_cmd, deps_inline[1]) <= 4 * 64,
               "coh_cmd: a migration's fields on four lines");

/* The command pool (sched.c): freed commands are pushed lock-free by any
 * thread onto `head`; the planner takes the whole stack at once into
 * `local` when that is empty. */
struct coh_pool {
    _Atomic(coh_cmd *) head; /* freed commands */
    _Atomic int64_t refs;    /* the context + every command allocated from it */
    _Atomic int closed;      /* the context is gone: do not pool (the chunks go with it) */
    coh_cmd *local;          /* the planner's list (context lock) */
    int64_t credit;          /* references taken ahead for new commands (context lock) */
    void *chunks;            /* the memory commands are carved from (context lock) */
    char *carve, *carve_end; /* what is left of the newest chunk */
};

int mti_coh_pool_create(mt_coh *c);
void mti_coh_pool_close(mt_coh *c); /* the context is going; commands still out free themselves */
/* The next command will be written soon (a command's migrations come in a
 * row): start loading its hot lines. */
static inline void mti_coh_cmd_prefetch(const coh_cmd *next)
{
    if (next)
        for (size_t o = 0; o < COH_CMD_HOT_END; o += 64)
            __builtin_prefetch((const char *)next + o, 1);
}
/* `local` is empty: takes the shared stack (its first command, the rest
 * into `local`) or allocates one. NULL on -ENOMEM. */
coh_cmd *mti_coh_cmd_take_slow(mt_coh *c);
/* A command from the pool, pending, one reference (the caller's); inline,
 * below the context. NULL on -ENOMEM. */
static inline coh_cmd *mti_coh_cmd_new(mt_coh *c, int kind, coh_engine *eng);
static inline void mti_coh_cmd_ref(coh_cmd *cmd)
{
    atomic_fetch_add_explicit(&cmd->refs, 1, memory_order_relaxed);
}
/* The last reference went: frees cmd (to its pool). */
void mti_coh_cmd_free(coh_cmd *cmd);
static inline void mti_coh_cmd_unref(coh_cmd *cmd)
{
    /* acq_rel: the last owner sees every write the others made. */
    if (cmd && atomic_fetch_sub_explicit(&cmd->refs, 1, memory_order_acq_rel) == 1)
        mti_coh_cmd_free(cmd);
}
static inline int mti_coh_cmd_status(const coh_cmd *cmd)
{
    return atomic_load_explicit(&cmd->status, memory_order_acquire);
}
enum { COH_DEP_DATA = 0, COH_DEP_ORDER = 1, COH_DEP_WAIT = 2 /* the application's wait list */ };
/* The general link (mti_coh_cmd_depend_ex with a pending or failed dep). */
int mti_coh_cmd_link(mt_coh *c, coh_cmd *cmd, coh_cmd *dep, int kind);
/* cmd waits for dep (a NULL or completed dep adds nothing; a failed one
 * sets dep_error). 0 or -ENOMEM. A completed dependency stays completed: no
 * lock needed to see that (acquire pairs with the release store of the
 * status). */
static inline int mti_coh_cmd_depend(mt_coh *c, coh_cmd *cmd, coh_cmd *dep)
{
    if (!dep || dep == cmd || atomic_load_explicit(&dep->status, memory_order_acquire) == 0)
        return 0;
    return mti_coh_cmd_link(c, cmd, dep, COH_DEP_DATA);
}
/* The same where dep is a command the planner is building and has not armed
 * yet (no other thread can reach it): no lock, and no status to look at. */
int mti_coh_cmd_depend_fresh_slow(coh_cmd *cmd, coh_cmd *dep);
static inline int mti_coh_cmd_depend_fresh(coh_cmd *cmd, coh_cmd *dep)
{
    if (dep->ndeps == dep->capdeps)
        return mti_coh_cmd_depend_fresh_slow(cmd, dep); /* grows the list */
    dep->deps[dep->ndeps++] = cmd; /* a data link: tag bit clear (sched.c) */
    /* relaxed: cmd's other dependencies may be completing (decrements). */
    atomic_fetch_add_explicit(&cmd->pending, 1, memory_order_relaxed);
    return 0;
}
/* cmd waits for the last write into `in` (mti_coh_depend_write). */
int mti_coh_depend_write_slow(mt_coh *c, coh_cmd *cmd, coh_cmd *w, uint32_t loc, uint64_t seq);
/* cmd, numbered `seq` at in's location, uses the instance of a root with
 * COH_ROOT_USE_CHAIN: it runs after the instance's last use (order only:
 * that one's failure is not cmd's) and becomes the last. 0 or -ENOMEM. */
int mti_coh_use_chain(mt_coh *c, coh_cmd *cmd, coh_inst *in, uint64_t seq);
/* Records cmd, which took `seq` at in's location, as the last write into in. */
static inline void mti_coh_set_write(coh_inst *in, coh_cmd *cmd, uint64_t seq)
{
    in->last_write = cmd;
    in->lw_seq = seq ? seq : UINT64_MAX; /* no number (-ENOMEM): never seen as done */
}
/* cmd runs after dep, whatever its outcome (queue order). */
static inline int mti_coh_cmd_depend_ex(mt_coh *c, coh_cmd *cmd, coh_cmd *dep, int kind)
{
    if (!dep || dep == cmd)
        return 0;
    /* A completed dependency stays completed: no lock needed to see that
     * (acquire pairs with the release store of the status). */
    if (atomic_load_explicit(&dep->status, memory_order_acquire) == 0)
        return 0;
    return mti_coh_cmd_link(c, cmd, dep, kind);
}
static inline int mti_coh_cmd_after(mt_coh *c, coh_cmd *cmd, coh_cmd *dep)
{
    return mti_coh_cmd_depend_ex(c, cmd, dep, COH_DEP_ORDER);
}
/* The planner is done building cmd: it runs once its dependencies have
 * completed. Ready commands go to the batch (planner's lock held). */
static inline void mti_coh_cmd_arm(mt_coh *c, coh_cmd *cmd); /* below the context */
/* The same, the caller's reference becoming the execution's (one reference
 * and one release less); below the context. */
static inline void mti_coh_cmd_arm_give(mt_coh *c, coh_cmd *cmd);
/* Records that cmd uses an instance at loc: takes a sequence number there
 * (one per location per command). 0 or -ENOMEM. */
int mti_coh_cmd_use_loc(mt_coh *c, coh_cmd *cmd, uint32_t loc, uint64_t *seq);
int mti_coh_cmd_add_root(coh_cmd *cmd, coh_root *root);
/* The same for a root cmd does not hold yet (no search). */
static inline int mti_coh_cmd_add_root_new(coh_cmd *cmd, coh_root *root)
{
    if (cmd->nroots == cmd->caproots)
        return mti_coh_cmd_add_root(cmd, root);
    atomic_fetch_add_explicit(&root->refs, 1, memory_order_relaxed); /* mti_coh_root_ref */
    cmd->roots[cmd->nroots++] = root;
    return 0;
}
int mti_coh_cmd_add_fix_slow(coh_cmd *cmd, const coh_fix *f);
static inline int mti_coh_cmd_add_fix(coh_cmd *cmd, const coh_fix *f)
{
    if (cmd->nfix == cmd->capfix)
        return mti_coh_cmd_add_fix_slow(cmd, f); /* grows the array */
    cmd->fix[cmd->nfix++] = *f;
    return 0;
}
int mti_coh_cmd_add_seg_slow(coh_cmd *cmd, uint64_t src, uint64_t dst, uint64_t len);
/* Appends a segment, extending the last one when they touch. 0 or -ENOMEM. */
static inline int mti_coh_cmd_add_seg(coh_cmd *cmd, uint64_t src, uint64_t dst, uint64_t len)
{
    if (cmd->nsegs) {
        mt_coh_seg *l = &cmd->segs[cmd->nsegs - 1];
        if (l->src + l->len == src && l->dst + l->len == dst) {
            l->len += len;
            return 0;
        }
    }
    if (cmd->nsegs < cmd->capsegs) {
        cmd->segs[cmd->nsegs++] = (mt_coh_seg){src, dst, len};
        return 0;
    }
    return mti_coh_cmd_add_seg_slow(cmd, src, dst, len);
}
/* Completes cmd with status (engine threads, or the planner for markers). */
void mti_coh_cmd_complete(coh_cmd *cmd, int status);
/* cmd was submitted to its in-order engine (its submitter thread, before
 * it can complete): the dependents waiting for it on the same engine are
 * released (they will run after it there). */
void mti_coh_cmd_submitted(coh_cmd *cmd);

/* ---- engines (engine.c) --------------------------------------------------------
 * Each device has two: compute (RUN) and copy (the hidden migration queue).
 * A submitter thread takes ready commands in order and submits them; with an
 * asynchronous backend a completer thread waits for them in order. */
struct coh_engine {
    coh_device *dev;
    int kind;
    pthread_mutex_t lock;
    pthread_cond_t cond;  /* submitter: work or stop */
    pthread_cond_t icond; /* completer: in-flight work or stop */
    coh_cmd *head, *tail;   /* ready */
    coh_cmd *ihead, *itail; /* in flight */
    int sleeping, isleeping, stop, stopped;
    pthread_t sub, comp;
    int has_sub, has_comp;
    _Atomic uint32_t busy;  /* ready + in flight: "is the engine idle?" */
    int in_order;           /* MT_COH_CAP_ASYNC and MT_COH_CAP_IN_ORDER */
    /* The planner may submit for this engine (a copy engine of a backend with
     * MT_COH_CAP_SUBMIT_ANY_THREAD): mti_coh_engine_kick. */
    int direct;
    /* A thread is submitting for this engine (under `lock`): its submitter,
     * or the planner in mti_coh_engine_kick. Submits are one at a time and
     * in order. */
    int in_submit;
    /* Batch (planner's lock): ready commands not yet handed over. */
    coh_cmd *bhead, *btail;
};

/* Appends the chain first..last (last->next NULL) to the list head/tail: an
 * engine's ready, in-flight or batch list. */
static inline void mti_coh_cmds_append(coh_cmd **head, coh_cmd **tail, coh_cmd *first, coh_cmd *last)
{
    if (*tail)
        (*tail)->next = first;
    else
        *head = first;
    *tail = last;
}

/* Takes the engine's whole batch (planner's lock held): returns its first
 * command (NULL: empty), sets *tail and *n. */
static inline coh_cmd *mti_coh_batch_take(coh_engine *e, coh_cmd **tail, uint32_t *n)
{
    coh_cmd *h = e->bhead;
    *tail = e->btail;
    *n = 0;
    for (coh_cmd *x = h; x; x = x->next)
        (*n)++;
    e->bhead = e->btail = NULL;
    return h;
}

int mti_coh_engine_start(coh_engine *e, coh_device *d, int kind);
/* Stops an engine: queued commands fail with MT_ECANCELED, in-flight ones
 * are waited for (the backend's shutdown releases stuck waits). */
void mti_coh_engine_stop(coh_engine *e);
/* Hands the engine's batch over (planner's lock held). The hand-over lives
 * in sched.c (it completes what a stopped engine refuses). */
void mti_coh_engine_doorbell(coh_engine *e);
/* As the doorbell, but when the engine may be submitted for by other threads
 * (e->direct) and its submitter has nothing queued and is not submitting,
 * the caller submits the batch itself (planner's lock held; engine.c).
 * Used for an upload's pieces. */
void mti_coh_engine_kick(coh_engine *e);
#ifndef NDEBUG
/* Set while this thread submits in mti_coh_engine_kick, where no command
 * may complete (sched.c checks it in Debug builds). */
extern _Thread_local int mti_coh_kicking;
#endif
/* Every engine's batch (planner's lock held). */
void mti_coh_doorbell_all(mt_coh *c);

/* ---- devices (device.c, memory.c) --------------------------------------------------- */

#define COH_MAX_REGIONS 1024

struct coh_device {
    mt_coh *ctx;
    uint32_t id;
    const mt_coh_backend *be;
    void *h;
    char name[64];
    coh_engine eng[2];
    pthread_mutex_t mem_lock;
    mt_alloc *alloc;          /* device memory, under mem_lock */
    uint64_t region_base[COH_MAX_REGIONS];
    uint64_t mem_reserved, mem_used;
    int alloc_exhausted;      /* the backend refused a region (mem_lock) */
    coh_inst **insts;         /* instances here (planner's lock) */
    uint32_t ninsts, capinsts;
    _Atomic int lost;         /* 0 or the loss code */
    int loss_handled;         /* planner's lock */
    uint64_t peer_mask;       /* devices it copies from directly (same backend) */
    _Atomic uint64_t bytes_in, bytes_out, evictions;
};

/* Allocates `size` bytes of device memory (mem_lock). 0, -ENOSPC or -ENOMEM. */
void mti_coh_device_destroy(coh_device *d); /* stops its engines */
void mti_coh_device_free(coh_device *d);    /* then frees it */
int mti_coh_dev_alloc(coh_device *d, uint64_t size, mt_alloc_block *b, uint64_t *addr);
void mti_coh_dev_free(coh_device *d, const mt_alloc_block *b);

/* ---- the context ------------------------------------------------------------------ */

/* A handle's slot. Besides the view it names, what validating an argument
 * needs: the owning client and, for a buffer's own handle (a view of all of
 * a root), the root and the view's access flags, so that an enqueue goes
 * from the handle straight to the root (one dependent cache miss less per
 * argument: the view is not read). 32 bytes, two to a cache line. */
typedef struct coh_slot {
    uint32_t gen;
    union {
        uint32_t flags;     /* live: the view's flags (READ_ONLY / WRITE_ONLY) */
        uint32_t next_free; /* free: the next free slot, 1-based */
    };
    mt_coh_client *client;  /* live: the view's client */
    coh_root *root;         /* live, a view of the whole root: the root; else NULL */
    coh_view *view;         /* NULL: free */
} coh_slot;

struct mt_coh {
    pthread_mutex_t lock;
    mt_coh_opts o;
    /* The process that created it (mti_coh_forked). */
    uint64_t token;
    pid_t pid;
    uint64_t gran;             /* granularity */
    uint64_t page;             /* host page size */
    int closing;
    coh_device *dev[COH_NLOC]; /* [1..ndev] */
    uint32_t ndev;
    coh_loc *loc[COH_NLOC];    /* [0..ndev] */
    uint64_t hostmem_mask;     /* host (bit 0) and host-memory devices */
    /* Handles. */
    coh_slot *slots;
    uint32_t nslots, capslots, free_slot; /* free_slot: 1-based, 0 = none */
    /* Live roots (for device loss and shutdown). */
    coh_root **roots;
    uint32_t nroots, caproots;
    mt_coh_client *clients;
    /* Scheduling. */
    uint32_t batch_count;
    int batch_big;             /* a ready command moves >= 1 MiB */
    /* Failures waiting for the planner. */
    pthread_mutex_t fix_lock;
    coh_cmd *fix_head;
    _Atomic int fix_pending;
    _Atomic uint64_t lost_pending; /* devices lost, not yet handled */
    /* Tracked host memory. */
    mt_tracker *tracker;
    coh_workers *workers;
    _Atomic uint64_t track_whole_chunks; /* chunks uploaded whole at every sync */
    /* The enqueue being planned (under the lock): a chunk taken whole is
     * applied once per enqueue, not once per argument (hostsync.c). */
    uint64_t sync_epoch;
    uint64_t clock;            /* LRU clock */
    uint64_t next_uid;
    coh_pool *pool;            /* command memory */
    /* Counters: the planner's under its lock, the engines' atomic. */
    uint64_t st_enqueues, st_rejected, st_migrations, st_relay, st_evictions, st_dirty;
    uint64_t st_copied[MT_COH_OP_PEER + 1]; /* bytes by op kind: h2d, d2h, d2d */
    _Atomic uint64_t st_failed;
};

/* A command from the pool, pending, one reference (the caller's). Inline:
 * the planner makes one or two per argument. NULL on -ENOMEM. */
static inline coh_cmd *mti_coh_cmd_new(mt_coh *c, int kind, coh_engine *eng)
{
    coh_pool *p = c->pool;
    coh_cmd *cmd = p->local;
    if (__builtin_expect(cmd != NULL, 1)) {
        p->local = cmd->next;
        mti_coh_cmd_prefetch(p->local);
    } else if (!(cmd = mti_coh_cmd_take_slow(c)))
        return NULL;
    /* The command's reference on the pool, from references taken 64 at a
     * time (one atomic per 64 commands). */
    if (__builtin_expect(!p->credit, 0)) {
        atomic_fetch_add_explicit(&p->refs, 64, memory_order_relaxed);
        p->credit = 64;
    }
    p->credit--;
    /* The rest was reset when it was freed (cmd_reset: its reference,
     * pending guard and dep_error too); `next` is written wherever it joins
     * a list. Its status and numbers only the planner writes (a freed
     * command's are read: mti_coh_depend_write_slow). */
    atomic_init(&cmd->status, COH_PENDING);
    cmd->nloc = 0;
    cmd->fix_applied = 0;
    cmd->kind = kind;
    cmd->eng = eng;
    if (kind != COH_KIND_MIGRATION) { /* what an event reports */
        cmd->bytes_in = cmd->bytes_relay = 0;
        cmd->migrations = 0;
    }
    return cmd;
}

/* Completes cmd at arm: a dependency failed, or it has no work (marker). */
void mti_coh_cmd_ready_at_arm_slow(mt_coh *c, coh_cmd *cmd);
static inline void mti_coh_cmd_arm_give(mt_coh *c, coh_cmd *cmd)
{
    /* acq_rel: as the decrements of completing dependencies (sched.c). */
    if (atomic_fetch_sub_explicit(&cmd->pending, 1, memory_order_acq_rel) != 1)
        return;
    /* Ready now: into the engine's batch, handed over at the next
     * doorbell (inline: most migrations are ready when armed). */
    coh_engine *e = cmd->eng;
    if (atomic_load_explicit(&cmd->dep_error, memory_order_relaxed) || !e) {
        mti_coh_cmd_ready_at_arm_slow(c, cmd);
        return;
    }
    cmd->next = NULL;
    mti_coh_cmds_append(&e->bhead, &e->btail, cmd, cmd);
    c->batch_count++;
    if (cmd->bytes >= (1u << 20)) /* a large copy starts at once */
        c->batch_big = 1;
}

static inline void mti_coh_cmd_arm(mt_coh *c, coh_cmd *cmd)
{
    /* The execution's reference: dropped by mti_coh_cmd_complete. */
    mti_coh_cmd_ref(cmd);
    mti_coh_cmd_arm_give(c, cmd);
}

static inline coh_loc *mti_coh_loc_of(mt_coh *c, uint32_t loc)
{
    return c->loc[loc];
}

/* cmd waits for the last write into `in` (writes into an instance are
 * ordered; readers wait for the data). The write is not touched when the
 * location's watermark says it completed and no failure awaits its fixup:
 * a completed write adds nothing, and a failed one only matters until its
 * fixup is applied (sched.c). Completions publish fix_pending before the
 * watermark, so the acquire of wm makes a pending fixup visible. Planner's
 * lock held. 0 or -ENOMEM. */
static inline int mti_coh_depend_write(mt_coh *c, coh_cmd *cmd, const coh_inst *in)
{
    coh_cmd *w = in->last_write;
    if (!w || w == cmd)
        return 0;
    if (in->lw_seq <= atomic_load_explicit(&c->loc[in->loc]->wm, memory_order_acquire) &&
        !atomic_load_explicit(&c->fix_pending, memory_order_acquire))
        return 0;
    return mti_coh_depend_write_slow(c, cmd, w, in->loc, in->lw_seq);
}

/* handles and views (buffer.c) */
/* The view a handle names: `generation << 32 | slot`, so a freed or forged
 * handle finds nothing, and neither does another client's. */
static inline const coh_slot *mti_coh_slot_lookup(const mt_coh *c, const mt_coh_client *cl,
                                                  mt_coh_buf h)
{
    uint32_t idx = (uint32_t)h - 1, gen = (uint32_t)(h >> 32);
    if ((uint32_t)h == 0 || idx >= c->nslots)
        return NULL;
    const coh_slot *s = &c->slots[idx];
    if (!s->view || s->gen != gen || s->client != cl)
        return NULL;
    return s;
}
static inline coh_view *mti_coh_view_lookup(mt_coh *c, mt_coh_client *cl, mt_coh_buf h)
{
    const coh_slot *s = mti_coh_slot_lookup(c, cl, h);
    return s ? s->view : NULL;
}
/* Fork. A context works in the process that created it: its engine and
 * collecting threads run there, and a lock another thread held at the fork
 * stays held in the child. In a forked child every call on it returns
 * MT_EFORKED before touching a lock, and the destroy calls do nothing (a
 * runtime's destructor in a child that exits must not crash or hang; the
 * child's copy of the memory goes with it). How a child knows: the
 * process's token, which contexts copy when created, lives in a page with
 * MADV_WIPEONFORK, which reads zero after every kind of fork (_Fork and a
 * raw clone included): one load on the enqueue path. Where the kernel
 * lacks it (before 4.14) an atfork handler clears the token instead, and
 * the calls that can block or tear down also compare the pid. */
extern _Atomic uint64_t *mti_coh_token;
static inline int mti_coh_forked(const mt_coh *c)
{
    return atomic_load_explicit(mti_coh_token, memory_order_relaxed) != c->token;
}
int mti_coh_forked_slow(const mt_coh *c);
/* This process's token, made on first use (fork.c). */
uint64_t mti_coh_process_token(void);
/* The SVM allocation of `cl` holding all of [p, p+size), or NULL; with
 * `partial`, also whether the range shares bytes with one it does not lie
 * inside (a host pointer reaching past an allocation's end). */
coh_svm *mti_coh_svm_find(mt_coh_client *cl, const void *p, uint64_t size, int *partial);
void mti_coh_view_free(mt_coh *c, coh_view *v);
void mti_coh_svm_release(mt_coh *c, coh_svm *s);
/* Takes / drops the hold a view or a map has on what it shows (the last
 * drop releases a root, or a freed fine-grained SVM allocation). Lock held. */
void mti_coh_hold(coh_root *r, coh_svm *s);
void mti_coh_unhold(mt_coh *c, coh_root *r, coh_svm *s);
/* Unlinks a map from its root's list and drops its hold; the caller has
 * taken it off the client's list and frees it. Lock held. */
void mti_coh_map_end(mt_coh *c, coh_map *m);
static inline void mti_coh_root_ref(coh_root *r)
{
    atomic_fetch_add_explicit(&r->refs, 1, memory_order_relaxed);
}
/* Host memory for the root (maps, relays, host-less buffers). 0 or -ENOMEM. */
int mti_coh_root_host(mt_coh *c, coh_root *r);

/* instances and eviction (memory.c) */
/* Makes sure root has an instance at loc, evicting at that device if full.
 * *created = 1 when this call made it. 0, MT_EDEVMEM or -ENOMEM. `pinned`
 * lists roots the current enqueue needs (never evicted). */
int mti_coh_inst_make(mt_coh *c, coh_root *r, uint32_t loc, coh_root *const *pinned,
                      uint32_t npinned, int *created);
static inline void mti_coh_inst_touch(mt_coh *c, coh_inst *in)
{
    in->stamp = ++c->clock;
}
static inline int mti_coh_inst_ensure(mt_coh *c, coh_root *r, uint32_t loc,
                                      coh_root *const *pinned, uint32_t npinned, int *created)
{
    if (r->inst[loc]) { /* the steady state: nothing to make */
        *created = 0;
        mti_coh_inst_touch(c, r->inst[loc]);
        return 0;
    }
    return mti_coh_inst_make(c, r, loc, pinned, npinned, created);
}
/* Drops an instance: clears its location's bit and releases its memory once
 * its last user completed. */
void mti_coh_inst_drop(mt_coh *c, coh_inst *in);
/* Could `need` bytes of new instances fit at device loc, counting what
 * eviction may free? No means the enqueue must fail before evicting. */
int mti_coh_room_possible(mt_coh *c, uint32_t loc, uint64_t need, coh_root *const *pinned,
                      uint32_t npinned);

/* planning (planner.c, transfer.c) */
typedef struct coh_plan coh_plan;
int mti_coh_submit(mt_coh_queue *q, uint32_t target, const mt_coh_arg *args, uint32_t nargs,
               mt_coh_kernel_fn fn, void *user, mt_coh_event *const *wait, uint32_t nwait,
               int map, void **map_ptr, coh_cmd **out);
/* Plans the copies that make [a, b) of root valid at `to` and adds them as
 * dependencies of `main`; `pref` (0: none) are the locations valid over
 * every stale piece (mti_coh_runs_stale), preferred as sources. 0 or -ENOMEM. */
int mti_coh_plan_fetch(mt_coh *c, coh_root *r, uint32_t to, uint64_t a, uint64_t b, coh_cmd *main,
                   uint64_t pref, uint32_t hint);
/* Where a piece valid at `m` is fetched from for `to`; *relay = 1 when it
 * goes through host memory. */
uint32_t mti_coh_choose_source(mt_coh *c, uint32_t to, uint64_t m, int *relay);
/* Migrations being built: one per source location, issued at a flush
 * (tracked pipelining flushes early). Lives on the planner's stack. */
#define COH_MAX_SOURCES 8
typedef struct coh_builder {
    mt_coh *c;
    coh_root *r;
    uint32_t to;
    coh_cmd *main;
    struct {
        uint32_t src;   /* source location */
        int relay;      /* through host memory */
        coh_cmd *cmd;   /* segments collected so far */
    } m[COH_MAX_SOURCES];
    uint32_t n;
    uint64_t bytes;     /* collected, not yet issued */
    uint32_t issued;    /* flushes so far */
    uint64_t pref;      /* locations valid over every stale piece of the range */
    int runs_changed;   /* a relay flushed: host memory marked valid, runs re-cut */
} coh_builder;
void mti_coh_fetch_begin(coh_builder *b, mt_coh *c, coh_root *r, uint32_t to, coh_cmd *main);
int mti_coh_fetch_add(coh_builder *b, uint64_t a, uint64_t bnd);
int mti_coh_fetch_flush(coh_builder *b, int force);
void mti_coh_fetch_end(coh_builder *b);

/* failures and device loss (fixup.c) */
void mti_coh_fixups_run(mt_coh *c);

/* tracked host memory (hosttrack.c; mti_coh_track_sync in hostsync.c) */
int mti_coh_track_create(mt_coh *c, coh_root *r);
void mti_coh_track_destroy(mt_coh *c, coh_root *r);
#define COH_NO_FETCH UINT32_MAX
/* Collects host writes in [a, b) (whole chunks) and applies them; unless
 * `to` is COH_NO_FETCH, also plans the fetch of the `need` ranges to `to`
 * chunk by chunk (pipelined: copies start while later chunks are being
 * collected). `epoch`: the enqueue's c->sync_epoch (a chunk taken whole
 * that this enqueue applied already is not applied again), 0 outside an
 * enqueue. 0 or -ENOMEM. */
int mti_coh_track_sync(mt_coh *c, coh_root *r, uint64_t a, uint64_t b, uint32_t to, coh_cmd *main,
                   const coh_range *need, int nneed, uint64_t epoch);
/* A download into tracked host memory is issued (planner): until it
 * completes, collections drop the pages it writes. */
void mti_coh_track_inflight(coh_root *r, coh_cmd *cmd);
/* A download into tracked host memory completed (any status): its pages are
 * not host writes; it leaves the in-flight list. */
void mti_coh_track_absorb(coh_root *r, coh_cmd *cmd);
/* A root's last reference (commands, instances, views): frees it. Inline
 * here because files on both sides of the scheduler drop roots (commands
 * completing, instances released, views freed). */
static inline void mti_coh_root_unref(coh_root *r)
{
    if (atomic_fetch_sub_explicit(&r->refs, 1, memory_order_acq_rel) != 1)
        return;
    mti_coh_runs_free(&r->runs);
    mti_coh_track_destroy(NULL, r); /* frees what killing it left */
    free(r->hostatt);
    free(r);
}
int mti_coh_workers_start(mt_coh *c);
void mti_coh_workers_stop(mt_coh *c);


#endif
