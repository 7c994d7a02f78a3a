/* The enqueue-time planner.
 *
 * An enqueue runs in three steps under the context's lock:
 *  1. validate: every argument resolves to a live buffer (or SVM range) of
 *     the queue's client, its range lies inside it, its access is allowed
 *     (buffer flags, maps), the bytes it reads are not lost, the device is
 *     alive. A bad argument returns an error here: nothing was changed and
 *     nothing reaches a device.
 *  2. reserve: instances at the target (allocating, evicting), host memory
 *     where a copy will pass through it, room in the validity runs. On
 *     failure what this step created is dropped again.
 *  3. plan and commit: migrations for the stale pieces of each argument's
 *     range, the validity update (read: the target joins the valid set;
 *     write: it becomes the only one), dependencies (the instance's last
 *     write, the queue's previous command, the wait list), sequence
 *     numbers, and the command itself.
 * Ranges are widened to the granularity, so a write of a partial granule
 * fetches the granule's other bytes first (at most one granule per end). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

typedef struct coh_res {
    coh_root *root; /* NULL: fine-grained SVM */
    coh_svm *svm;
    uint64_t off, size; /* in the root (or the SVM allocation) */
    uint64_t a, b;      /* off..off+size widened to granules */
    uint32_t access;
    int nneed;          /* ranges that must be valid at the target before it runs */
    coh_range need[2];
    /* Per needed range, seen at validation: runs stale at the target (0:
     * nothing to fetch; later arguments only add the target's bit, so it
     * stays 0) and the locations valid over all of them. Not used for
     * tracked roots (collections change their runs in between). */
    uint32_t nstale[2];
    uint64_t pref[2];
    /* Index of the run containing need[i].a then (a hint), with
     * COH_HINT_EXACT when nothing can change the root's runs before this
     * argument's fetch and update use it: it is alone on its root (other
     * arguments' fetches and reserve's evictions leave the root's runs
     * alone; submit clears the flag for a shared root), untracked, and no
     * stale run can relay through host memory (a relay marks the host). */
    uint32_t at[2];
    int off_peer;       /* some stale run is valid at no peer of the target */
    uint32_t on_root;   /* arguments of this command on its root, itself included */
    int first;          /* the first of them */
} coh_res;

/* The ranges a command must find valid: all of [a, b) when it reads; when it
 * only writes, just the widened edges it does not overwrite. */
static void needed(coh_res *x, int whole_buffer)
{
    x->nneed = 0;
    if (x->access & MT_COH_READ) {
        x->need[x->nneed++] = (coh_range){x->a, x->b};
        return;
    }
    uint64_t e = x->off + x->size;
    if (whole_buffer && (x->off > 0 || e < x->root->size)) {
        x->need[x->nneed++] = (coh_range){x->a, x->b}; /* PoCL: the whole buffer */
        return;
    }
    if (x->a < x->off)
        x->need[x->nneed++] = (coh_range){x->a, x->off};
    if (e < x->b)
        x->need[x->nneed++] = (coh_range){e, x->b};
}

static int check_maps(const coh_root *r, uint64_t a, uint64_t b, uint32_t access, int map)
{
    for (const coh_map *m = r->maps; m; m = m->next) {
        if (m->b <= a || b <= m->a)
            continue;
        if (m->write || (access & MT_COH_WRITE))
            return map ? -EBUSY : MT_EMAPPED;
    }
    return 0;
}

/* Starts loading what validating the arguments reads: slot -> view ->
 * root -> (runs, target instance) is a chain of dependent cache misses per
 * argument (thousands of buffers do not stay in cache). Walked level by
 * level across the arguments, the chains overlap instead of following one
 * another; a bad handle is simply not followed (resolve judges it). */
static void prefetch_args(mt_coh *c, const mt_coh_arg *args, uint32_t nargs, uint32_t target)
{
    /* GCC counts prefetches as no side effect: a function of nothing else
     * is found pure and its call deleted (this one was, until the empty
     * volatile asm said otherwise). */
    __asm__ volatile("");
    enum { N = 8 }; /* the first arguments: most commands have a few */
    uint32_t n = nargs < N ? nargs : N;
    const coh_slot *s[N];
    for (uint32_t i = 0; i < n; i++) {
        uint32_t idx = (uint32_t)args[i].buf - 1; /* handle 0: UINT32_MAX, no slot */
        s[i] = idx < c->nslots ? &c->slots[idx] : NULL;
        if (s[i])
            __builtin_prefetch(s[i]);
    }
    /* A buffer's own handle names its root in the slot; other views are
     * one level more. */
    coh_root *r[N];
    const coh_view *v[N];
    uint32_t views = 0;
    for (uint32_t i = 0; i < n; i++) {
        r[i] = s[i] ? s[i]->root : NULL;
        v[i] = s[i] && !r[i] ? s[i]->view : NULL;
        if (r[i]) {
            __builtin_prefetch(r[i]);
            __builtin_prefetch(&r[i]->inst[target]);
        } else if (v[i]) {
            __builtin_prefetch(v[i]);
            views = 1;
        }
    }
    for (uint32_t i = 0; views && i < n; i++)
        if (v[i] && v[i]->kind != COH_VIEW_FINE && (r[i] = v[i]->root) != NULL) {
            __builtin_prefetch(r[i]);
            __builtin_prefetch(&r[i]->inst[target]);
        }
    for (uint32_t i = 0; i < n; i++)
        if (r[i]) {
            /* The runs: their first line, or four when they are more (a
             * heap array of at least 32, mti_coh_runs_grow: no line beyond
             * it) and the search jumps around in them. */
            const char *rv = (const char *)r[i]->runs.v;
            __builtin_prefetch(rv);
            if (r[i]->runs.n > 4) {
                __builtin_prefetch(rv + 64);
                __builtin_prefetch(rv + 128);
                __builtin_prefetch(rv + 192);
            }
            if (r[i]->inst[target])
                __builtin_prefetch(r[i]->inst[target]);
        }
}

static int resolve(mt_coh *c, mt_coh_client *cl, uint32_t target, uint64_t peers,
                   const mt_coh_arg *arg, int map, coh_res *x)
{
    x->root = NULL;
    x->svm = NULL;
    x->nneed = 0;
    uint64_t limit, base;
    uint32_t flags = 0;
    const coh_slot *sl = arg->buf ? mti_coh_slot_lookup(c, cl, arg->buf) : NULL;
    if (sl && sl->root) { /* a buffer's own handle: the view is not needed */
        x->root = sl->root;
        base = 0;
        limit = sl->root->size;
        flags = sl->flags;
    } else if (arg->buf) {
        coh_view *v = sl ? sl->view : NULL;
        if (!v)
            return MT_ENOBUF;
        x->root = v->kind == COH_VIEW_FINE ? NULL : v->root;
        x->svm = v->kind == COH_VIEW_FINE ? v->svm : NULL;
        base = v->offset;
        limit = v->size;
        flags = v->flags;
    } else if (arg->svm) {
        coh_svm *s = mti_coh_svm_find(cl, arg->svm, 1, NULL);
        if (!s)
            return MT_ENOBUF;
        base = (uint64_t)((uintptr_t)arg->svm - (uintptr_t)s->ptr);
        limit = s->size - base;
        if (s->kind == MT_COH_SVM_FINE)
            x->svm = s;
        else
            x->root = s->root;
    } else
        return MT_ENOBUF;
    if (!arg->size || !arg->access || (arg->access & ~(uint32_t)MT_COH_RW))
        return -EINVAL;
    if (arg->offset > limit || arg->size > limit - arg->offset)
        return -ERANGE;
    if (!map && (((flags & MT_COH_BUF_READ_ONLY) && (arg->access & MT_COH_WRITE)) ||
                 ((flags & MT_COH_BUF_WRITE_ONLY) && (arg->access & MT_COH_READ))))
        return -EACCES;
    x->off = base + arg->offset;
    x->size = arg->size;
    x->access = arg->access;
    if (x->svm) {
        if (target != MT_COH_HOST && !x->svm->dev_addr[target])
            return -EOPNOTSUPP; /* the device cannot use host memory in place */
        return 0;
    }
    coh_root *r = x->root;
    if (c->o.flags & MT_COH_WHOLE_BUFFER) {
        x->a = 0;
        x->b = r->size;
    } else {
        /* Host writes to tracked memory are known per page: its ranges are
         * whole pages, so the host always holds whole pages it may write. */
        uint64_t g = r->track && c->gran < c->page ? c->page : c->gran, e = x->off + x->size;
        uint64_t up = (e + g - 1) & ~(g - 1);
        x->a = x->off & ~(g - 1);
        x->b = up < e || up > r->size ? r->size : up;
    }
    int rc = check_maps(r, x->off, x->off + x->size, x->access, map);
    if (rc)
        return rc;
    needed(x, !!(c->o.flags & MT_COH_WHOLE_BUFFER));
    /* Host memory can only be needed for a run valid at no peer of the
     * target (needs_host walks only then). */
    x->off_peer = 0;
    for (int i = 0; i < x->nneed; i++) {
        int st;
        x->nstale[i] = mti_coh_runs_stale(&r->runs, x->need[i].a, x->need[i].b, COH_BIT(target),
                                      peers, &x->pref[i], &st, &x->at[i]);
        if (st & COH_STALE_LOST)
            return MT_ELOSTDATA;
        x->off_peer |= !!(st & COH_STALE_OFF_PEER);
        /* The likely source of its migration (valid over every stale run):
         * start loading its instance while the other arguments validate. */
        uint64_t p = x->pref[i] & ~COH_BIT(target);
        if (x->nstale[i] && p && r->inst[__builtin_ctzll(p)])
            __builtin_prefetch(r->inst[__builtin_ctzll(p)]);
    }
    if (!x->off_peer && !r->track)
        for (int i = 0; i < x->nneed; i++)
            x->at[i] |= COH_HINT_EXACT;
    return 0;
}

/* Does fetching x's needed ranges to `target` read host memory, or relay
 * through it? Then the root needs host memory first. */
static int needs_host(mt_coh *c, const coh_res *x, uint32_t target)
{
    /* The host instance is on a line the planner otherwise skips: last. */
    if (!x->off_peer || target == MT_COH_HOST || x->root->inst[0])
        return 0;
    const coh_runs *rs = &x->root->runs;
    uint64_t peers = c->dev[target]->peer_mask;
    for (int i = 0; i < x->nneed; i++) {
        /* Nothing stale, or a peer valid over every stale run: no host. */
        if (!x->nstale[i] || (x->pref[i] & peers))
            continue;
        for (uint32_t k = mti_coh_runs_find(rs, x->need[i].a);
             k < rs->n && rs->v[k].start < x->need[i].b; k++) {
            uint64_t m = rs->v[k].mask;
            int relay;
            if (!(m & COH_BIT(target)) && m && !(m & peers) &&
                (mti_coh_choose_source(c, target, m, &relay) == MT_COH_HOST || relay))
                return 1;
        }
    }
    return 0;
}

typedef struct created {
    coh_inst *v[2 * MT_COH_MAX_ARGS];
    uint32_t n;
} created;

/* `pinned`: the enqueue's roots, each once; `need`: the bytes of the device
 * instances at the target they lack (both gathered while validating). */
static int reserve(mt_coh *c, coh_res *res, uint32_t n, uint32_t target, created *cr,
                   coh_root *const *pinned, uint32_t np, uint64_t need)
{
    /* Refuse before evicting anything when even eviction cannot make room. */
    if (need && !mti_coh_room_possible(c, target, need, pinned, np))
        return MT_EDEVMEM;
    for (uint32_t i = 0; i < n; i++) {
        coh_res *x = &res[i];
        if (!x->root)
            continue;
        int made = 0;
        int rc = mti_coh_inst_ensure(c, x->root, target, pinned, np, &made);
        if (made)
            cr->v[cr->n++] = x->root->inst[target];
        /* The instance's last write, when it may be pending, is linked to
         * in step 3 (by the migration into it, or the command): start
         * loading its header and its dependents. */
        const coh_inst *tin = x->root->inst[target];
        if (tin && tin->last_write &&
            tin->lw_seq > atomic_load_explicit(&c->loc[target]->wm, memory_order_relaxed)) {
            __builtin_prefetch(tin->last_write);
            __builtin_prefetch(&tin->last_write->deps_inline[1]);
        }
        if (!rc && needs_host(c, x, target)) {
            rc = mti_coh_inst_ensure(c, x->root, MT_COH_HOST, pinned, np, &made);
            if (made)
                cr->v[cr->n++] = x->root->inst[MT_COH_HOST];
        }
        /* Room in the runs for every argument on this root: each splits
         * at most two runs per needed range (two) and two for its write;
         * relays and tracked collections reserve their own. */
        if (!rc && x->first)
            rc = mti_coh_runs_reserve(&x->root->runs, 6 * x->on_root + 2);
        if (rc)
            return rc;
    }
    return 0;
}

/* Drops the device instances this enqueue created (they hold nothing yet).
 * Host memory it created stays: zero pages standing for content the host
 * already held (its bit was set without memory). */
static void rollback(mt_coh *c, created *cr)
{
    while (cr->n) {
        coh_inst *in = cr->v[--cr->n];
        if (in->loc != MT_COH_HOST)
            mti_coh_inst_drop(c, in);
    }
}

/* A map's record: allocated before the enqueue commits (map_prepare, which
 * can fail), linked in once it has (map_link, which cannot). */
static coh_map *map_prepare(coh_res *x, void *ptr)
{
    coh_map *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->ptr = ptr;
    m->root = x->root;
    m->a = x->off;
    m->b = x->off + x->size;
    m->write = !!(x->access & MT_COH_WRITE);
    m->svm = x->root ? NULL : x->svm;
    return m;
}

static void map_link(mt_coh_client *cl, coh_map *m)
{
    mti_coh_hold(m->root, m->svm); /* until the unmap, even if freed before */
    if (m->root) {
        m->next = m->root->maps;
        m->root->maps = m;
    }
    m->cnext = cl->maps;
    cl->maps = m;
}

/* Step 3a for one argument: fetch what it needs to `to` and mark that valid
 * there. Writes are applied only once every argument was fetched (3b), so an
 * argument reading bytes another one overwrites still gets their content
 * from before the command. */
static int fetch_arg(mt_coh *c, coh_cmd *main, uint32_t to, coh_res *x, int alone)
{
    coh_root *r = x->root;
    int rc = 0;
    if (!r)
        return 0;
    if (r->track) {
        /* Host writes first: they are older than this command. */
        rc = mti_coh_track_sync(c, r, x->a, x->b, to == MT_COH_HOST ? COH_NO_FETCH : to, main, x->need,
                            x->nneed, c->sync_epoch);
        if (rc)
            return rc;
    }
    for (int k = 0; k < x->nneed && !rc; k++) {
        if (!r->track && !x->nstale[k])
            continue; /* valid at `to` already: nothing to fetch or mark */
        if (!r->track || to == MT_COH_HOST)
            rc = mti_coh_plan_fetch(c, r, to, x->need[k].a, x->need[k].b, main,
                                r->track ? 0 : x->pref[k], r->track ? COH_NO_HINT : x->at[k]);
        /* Valid at `to` now, for the arguments after this one; a writing
         * argument alone on its root is made the only valid copy in step
         * 3b anyway (one update instead of two). */
        if (!rc && !(alone && (x->access & MT_COH_WRITE)))
            mti_coh_runs_mark_at(&r->runs, x->need[k].a, x->need[k].b, COH_BIT(to),
                                 r->track ? COH_NO_HINT : x->at[k]);
    }
    return rc;
}

/* Step 3b for one argument, in two halves, so that a failure (out of
 * memory) changes nothing a later command or map could see: the first
 * half does everything that can fail (its fixup, its dependency on the
 * instance's last write, the root's reference, the sequence number), the
 * second, once every argument's first half succeeded, what cannot (its
 * write into the validity runs, the instance's last write, its address).
 * With the first half undone by failing the command, an enqueue that
 * returns an error has only started copies that are valid anyway. */
static int commit_prepare(mt_coh *c, coh_cmd *main, uint32_t to, coh_res *x, int map,
                          uint64_t seq0, uint64_t *tseq)
{
    int rc = 0;
    if (!x->root) { /* fine-grained SVM: used in place, kept alive by host sequence */
        uint64_t seq = 0;
        rc = mti_coh_cmd_use_loc(c, main, MT_COH_HOST, &seq);
        if (!rc)
            x->svm->last_seq = seq;
        return rc;
    }
    coh_root *r = x->root;
    coh_inst *in = r->inst[to];
    if ((x->access & MT_COH_WRITE) && !map) {
        coh_fix f = {.root = r, .uid = in->uid, .loc = to, .a = x->a, .b = x->b};
        rc = mti_coh_cmd_add_fix(main, &f);
    }
    /* The instance's last write; one this enqueue issued (numbered after
     * seq0) is one of main's migrations, a dependency already. */
    if (!rc && in->lw_seq <= seq0)
        rc = mti_coh_depend_write(c, main, in);
    if (!rc && x->first) /* the first argument on its root: not held yet */
        rc = mti_coh_cmd_add_root_new(main, r);
    if (!rc && !map) {
        if (!*tseq) /* one number at the target for the whole command */
            rc = mti_coh_cmd_use_loc(c, main, to, tseq);
        if (!rc && __builtin_expect(r->flags & COH_ROOT_USE_CHAIN, 0) && to != MT_COH_HOST)
            rc = mti_coh_use_chain(c, main, in, *tseq);
    }
    return rc;
}

static void commit_apply(coh_cmd *main, uint32_t to, coh_res *x, uint32_t i, int map,
                         void **map_ptr, uint64_t tseq)
{
    if (!x->root) {
        if (map)
            *map_ptr = (char *)x->svm->ptr + x->off;
        else if (main->argv) {
            main->argv[i] = x->svm->dev_addr[to] + x->off;
            main->argv[main->nargs + i] = x->size;
        }
        return;
    }
    coh_root *r = x->root;
    coh_inst *in = r->inst[to];
    if (x->access & MT_COH_WRITE) {
        /* The run at x->a: found at validation when it read from there
         * (exact when alone on its root: a write's read did not mark). */
        mti_coh_runs_set_at(&r->runs, x->a, x->b, COH_BIT(to),
                            x->nneed && x->need[0].a == x->a ? x->at[0] : COH_NO_HINT);
        r->version++;
    }
    if (!map) {
        in->last_seq = tseq;
        /* Its write becomes the instance's last (another argument on the
         * same instance finds main itself there: no dependency). */
        if (x->access & MT_COH_WRITE)
            mti_coh_set_write(in, main, tseq);
    }
    /* Its LRU stamp was taken in reserve (mti_coh_inst_ensure). */
    if (map)
        *map_ptr = (char *)(uintptr_t)in->addr + x->off;
    else if (main->argv) {
        main->argv[i] = in->addr + x->off;
        main->argv[main->nargs + i] = x->size;
    }
}

int mti_coh_submit(mt_coh_queue *q, uint32_t target, const mt_coh_arg *args, uint32_t nargs,
               mt_coh_kernel_fn fn, void *user, mt_coh_event *const *wait, uint32_t nwait, int map,
               void **map_ptr, coh_cmd **out)
{
    mt_coh_client *cl = q->client;
    mt_coh *c = cl->ctx;
    if (mti_coh_forked(c))
        return MT_EFORKED;
    coh_res res[MT_COH_MAX_ARGS];
    int bad = nargs > MT_COH_MAX_ARGS || (nargs && !args) || (nwait && !wait);
    /* An event of another context: its command may sit in that context's
     * batch, which nothing here hands over, so the dependent would wait
     * forever (OpenCL refuses it too: CL_INVALID_CONTEXT). Only the pointer
     * is compared: the event outlives its context. */
    for (uint32_t i = 0; !bad && i < nwait; i++)
        bad = !wait[i] || ((const coh_cmd *)wait[i])->ctx != c;
    if (bad) {
        pthread_mutex_lock(&c->lock);
        c->st_rejected++;
        pthread_mutex_unlock(&c->lock);
        return -EINVAL;
    }
    pthread_mutex_lock(&c->lock);
    if (atomic_load_explicit(&c->fix_pending, memory_order_acquire))
        mti_coh_fixups_run(c);
    int rc = c->closing ? MT_ECANCELED : 0;
    if (!rc && target != MT_COH_HOST)
        rc = atomic_load_explicit(&q->dev->lost, memory_order_acquire);
    if (!rc && nargs > 1)
        prefetch_args(c, args, nargs, target);
    /* The devices the target copies from directly (resolve, per argument). */
    uint64_t peers = target == MT_COH_HOST ? 0 : c->dev[target]->peer_mask;
    /* The roots, each once (never evicted by this enqueue), and the bytes
     * of the instances at the target they lack (reserve). */
    coh_root *pinned[MT_COH_MAX_ARGS];
    uint32_t np = 0;
    uint64_t need = 0;
    for (uint32_t i = 0; !rc && i < nargs; i++) {
        rc = resolve(c, cl, target, peers, &args[i], map, &res[i]);
        /* Arguments sharing a root (once, for reserve and the updates). */
        res[i].on_root = 1;
        res[i].first = 1;
        for (uint32_t j = 0; j < i && res[i].root; j++)
            if (res[j].root == res[i].root) {
                res[i].on_root++;
                res[j].on_root++;
                res[i].first = 0;
                /* Updates of the other argument come in between. */
                for (int k = 0; k < res[i].nneed; k++)
                    res[i].at[k] &= ~COH_HINT_EXACT;
                for (int k = 0; k < res[j].nneed; k++)
                    res[j].at[k] &= ~COH_HINT_EXACT;
            }
        coh_root *r = res[i].root;
        if (r && res[i].first) {
            pinned[np++] = r;
            if (target != MT_COH_HOST && !r->inst[target])
                need += (r->size + 255) & ~(uint64_t)255;
        }
    }
    created cr;
    cr.n = 0;
    if (!rc)
        rc = reserve(c, res, nargs, target, &cr, pinned, np, need);
    coh_cmd *main = NULL;
    if (!rc) {
        coh_engine *e = fn ? &q->dev->eng[MT_COH_ENGINE_COMPUTE] : NULL;
        main = mti_coh_cmd_new(c, fn ? COH_KIND_RUN : COH_KIND_MARKER, e);
        /* Its own fields (function, arguments, fixups) are written after
         * the migrations are planned: start loading them now. */
        if (main)
            for (size_t o = offsetof(coh_cmd, fn) & ~(size_t)63;
                 o < offsetof(coh_cmd, fix_inline[2]); o += 64)
                __builtin_prefetch((const char *)main + o, 1);
        if (!main)
            rc = -ENOMEM;
        else if (fn && nargs > 4 && !(main->argv = malloc(2 * nargs * sizeof *main->argv)))
            rc = -ENOMEM;
        else if (fn && nargs <= 4)
            main->argv = main->argv_inline;
    }
    if (rc) {
        rollback(c, &cr);
        mti_coh_cmd_unref(main);
        c->st_rejected += 1;
        pthread_mutex_unlock(&c->lock);
        return rc;
    }
    main->to_loc = target;
    main->fn = fn; /* the engine makes the op of these (RUN) */
    main->user = user;
    main->nargs = nargs;
    /* From here on the enqueue happens; an allocation failure below leaves
     * consistent state (issued migrations are prefetches) and is reported.
     * Numbers the target hands out from here on are this enqueue's. */
    uint64_t seq0 = atomic_load_explicit(&mti_coh_loc_of(c, target)->next, memory_order_relaxed);
    c->sync_epoch++;
    for (uint32_t i = 0; !rc && i < nargs; i++) {
        rc = fetch_arg(c, main, target, &res[i], res[i].on_root == 1);
    }
    uint64_t tseq = 0;
    for (uint32_t i = 0; !rc && i < nargs; i++)
        rc = commit_prepare(c, main, target, &res[i], map, seq0, &tseq);
    coh_map *added = NULL;
    if (!rc && map && !(added = map_prepare(&res[0], NULL)))
        rc = -ENOMEM;
    if (!rc) /* queue order: after it, even if it failed (as OpenCL queues) */
        rc = mti_coh_cmd_after(c, main, q->last);
    for (uint32_t i = 0; !rc && i < nwait; i++)
        rc = mti_coh_cmd_depend_ex(c, main, (coh_cmd *)wait[i], COH_DEP_WAIT);
    if (rc) {
        /* Nothing is committed: main fails at once without having written
         * (no fixups to apply) and stays out of the queue's order, so that
         * a finish does not report it; the copies already issued bring
         * valid content and are kept (prefetches). */
        free(added);
        main->nfix = 0;
        atomic_store_explicit(&main->dep_error, rc, memory_order_relaxed);
        mti_coh_cmd_arm(c, main);
        c->st_rejected += 1;
        if (c->batch_count >= c->o.batch || c->batch_big)
            mti_coh_doorbell_all(c);
        pthread_mutex_unlock(&c->lock);
        mti_coh_cmd_unref(main);
        return rc;
    }
    for (uint32_t i = 0; i < nargs; i++)
        commit_apply(main, target, &res[i], i, map, map_ptr, tseq);
    if (map) {
        added->ptr = *map_ptr;
        map_link(cl, added);
    }
    mti_coh_cmd_ref(main);
    mti_coh_cmd_unref(q->last);
    q->last = main;
    mti_coh_cmd_arm(c, main);
    c->st_enqueues += 1;
    /* Doorbell: batches of 32, or at once for big transfers and maps. */
    if (c->batch_count >= c->o.batch || c->batch_big || map)
        mti_coh_doorbell_all(c);
    pthread_mutex_unlock(&c->lock);
    *out = main;
    return 0;
}

int mt_coh_enqueue(mt_coh_queue *q, const mt_coh_command *cmd, mt_coh_event **ev)
{
    if (!q || !cmd)
        return -EINVAL;
    coh_cmd *out;
    int rc = mti_coh_submit(q, q->dev->id, cmd->args, cmd->nargs, cmd->fn, cmd->user, cmd->wait,
                        cmd->nwait, 0, NULL, &out);
    if (rc)
        return rc;
    if (ev)
        *ev = (mt_coh_event *)out;
    else
        mti_coh_cmd_unref(out);
    return 0;
}

int mt_coh_map(mt_coh_queue *q, const mt_coh_arg *target, mt_coh_event *const *wait,
               uint32_t nwait, void **ptr, mt_coh_event **ev)
{
    if (!q || !target || !ptr)
        return -EINVAL;
    coh_cmd *out;
    void *p = NULL;
    int rc = mti_coh_submit(q, MT_COH_HOST, target, 1, NULL, NULL, wait, nwait, 1, &p, &out);
    if (rc)
        return rc;
    *ptr = p;
    if (ev)
        *ev = (mt_coh_event *)out;
    else
        mti_coh_cmd_unref(out);
    return 0;
}

int mt_coh_unmap(mt_coh_queue *q, void *ptr, mt_coh_event **ev)
{
    if (!q)
        return -EINVAL;
    mt_coh_client *cl = q->client;
    mt_coh *c = cl->ctx;
    if (mti_coh_forked(c))
        return MT_EFORKED;
    pthread_mutex_lock(&c->lock);
    coh_map **pp = &cl->maps;
    while (*pp && (*pp)->ptr != ptr)
        pp = &(*pp)->cnext;
    if (!*pp) {
        pthread_mutex_unlock(&c->lock);
        return -ENOENT;
    }
    /* The unmap is a point in the queue: later commands of the queue follow
     * it. Content needs nothing: a writing map made the host copy the only
     * valid one when it was planned. The marker first: an unmap that runs
     * out of memory leaves the map as it was (the caller may try again). */
    coh_cmd *u = mti_coh_cmd_new(c, COH_KIND_MARKER, NULL);
    int rc = u ? mti_coh_cmd_after(c, u, q->last) : -ENOMEM;
    if (rc) {
        pthread_mutex_unlock(&c->lock);
        mti_coh_cmd_unref(u); /* never armed, linked to nothing */
        return rc;
    }
    coh_map *m = *pp;
    *pp = m->cnext;
    mti_coh_map_end(c, m);
    free(m);
    mti_coh_cmd_ref(u);
    mti_coh_cmd_unref(q->last);
    q->last = u;
    mti_coh_cmd_arm(c, u);
    pthread_mutex_unlock(&c->lock);
    if (ev)
        *ev = (mt_coh_event *)u;
    else
        mti_coh_cmd_unref(u);
    return 0;
}
