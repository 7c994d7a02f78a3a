/* Migrations: the copies that make a range of a root valid at a location.
 *
 * The planner walks the validity runs over the range; every run without the
 * target's bit is a piece to fetch. Each piece gets a source, best first:
 *   1. a device the target copies from directly (same backend, can_peer),
 *   2. host memory,
 *   3. a host-memory device (one hop: its memory is host memory),
 *   4. for a target whose memory is host memory: any device (one download),
 *   5. else any device, through the root's host memory (download, upload):
 *      the host copy becomes valid on the way.
 * Within a class the planner prefers a source the range's other stale pieces
 * share (a run's bits differ from its neighbours', but usually not in every
 * location), so they become one migration rather than one per source.
 * Pieces with the same source become the segments of one migration command
 * on a hidden per-device copy engine, which depends on the last write into
 * its source and target instances (writes into an instance are ordered),
 * takes sequence numbers at both locations, and becomes the last write into
 * the target. The command that needed the data depends on it. A builder
 * lets the tracked-upload path issue migrations while it is still planning,
 * so copying starts before the tracker has been read to the end. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "probe.h"

static inline uint32_t lowest(uint64_t m)
{
    return (uint32_t)__builtin_ctzll(m);
}

/* The sources equally good for a piece valid at `m` (the first non-empty
 * class of the order above); *relay = 1 when it goes through host memory. */
static inline __attribute__((always_inline)) uint64_t source_candidates(mt_coh *c, uint32_t to,
                                                                          uint64_t m, int *relay)
{
    *relay = 0;
    if (to == MT_COH_HOST) {
        uint64_t hm = m & c->hostmem_mask;
        return hm ? hm : m;
    }
    coh_device *d = c->dev[to];
    if (m & d->peer_mask)
        return m & d->peer_mask;
    if (m & COH_BIT(MT_COH_HOST))
        return COH_BIT(MT_COH_HOST);
    if (m & c->hostmem_mask)
        return m & c->hostmem_mask;
    if (!(d->be->caps & MT_COH_CAP_HOST_MEMORY))
        *relay = 1;
    return m;
}

uint32_t mti_coh_choose_source(mt_coh *c, uint32_t to, uint64_t m, int *relay)
{
    return lowest(source_candidates(c, to, m, relay));
}

/* Host memory the copy reads or writes for a location: the root's host
 * memory, or a host-memory device's instance. */
static void *host_side(mt_coh *c, coh_root *r, uint32_t loc)
{
    (void)c;
    return (void *)(uintptr_t)r->inst[loc]->addr;
}

/* Creates the migration from `from` to `to` with the segments in `segs`.
 * Returns the command (not armed) or NULL. Inlined (with issue) into the
 * direct fetch, which makes almost every migration: no calls, no reloads
 * of what the caller has in registers. */
static inline __attribute__((always_inline)) coh_cmd *make_mig(mt_coh *c, coh_root *r,
                                                               uint32_t from, uint32_t to)
{
    coh_inst *src = r->inst[from], *dst = r->inst[to];
    /* hostmem_mask has the host's bit too. */
    int host_mem_from = (int)(c->hostmem_mask >> from) & 1;
    int host_mem_to = (int)(c->hostmem_mask >> to) & 1;
    int kind = to != MT_COH_HOST && host_mem_from   ? MT_COH_OP_UPLOAD
               : host_mem_to && from != MT_COH_HOST ? MT_COH_OP_DOWNLOAD
                                                    : MT_COH_OP_PEER;
    uint32_t eng_dev = kind == MT_COH_OP_DOWNLOAD ? from : to;
    coh_cmd *cmd = mti_coh_cmd_new(c, COH_KIND_MIGRATION, &c->dev[eng_dev]->eng[MT_COH_ENGINE_COPY]);
    if (!cmd)
        return NULL;
    /* What the engine makes the op of (build_op, at submit). */
    cmd->opkind = (uint32_t)kind;
    if (kind == MT_COH_OP_DOWNLOAD) {
        cmd->dev_addr = src->addr;
        cmd->xaddr = (uint64_t)(uintptr_t)host_side(c, r, to);
    } else if (kind == MT_COH_OP_UPLOAD) {
        cmd->dev_addr = dst->addr;
        cmd->xaddr = (uint64_t)(uintptr_t)host_side(c, r, from);
    } else {
        cmd->dev_addr = dst->addr;
        cmd->xaddr = src->addr;
    }
    cmd->from_loc = from;
    cmd->to_loc = to;
    /* Root host memory (not a device's) may be pinned by the copying device. */
    if ((from == MT_COH_HOST || to == MT_COH_HOST) && r->hostatt) {
        cmd->hostatt = r->hostatt;
        cmd->host_len = r->size;
    }
    if (to == MT_COH_HOST && r->track) {
        mti_coh_root_ref(r);
        cmd->absorb = r;
    }
    return cmd;
}

/* Links a filled migration into the graph and lets it go. The command is
 * fresh (make_mig): its root and locations go straight into their inline
 * slots; its fixup is implicit (fixup.c). */
static inline __attribute__((always_inline)) int issue(mt_coh *c, coh_root *r, coh_cmd *cmd,
                                                       coh_cmd *main, uint64_t bytes)
{
    uint32_t from = cmd->from_loc, to = cmd->to_loc;
    coh_inst *src = r->inst[from], *dst = r->inst[to];
    cmd->bytes = bytes;
    /* Its one reference, the planner's, becomes the execution's (the
     * target instance's last write holds none). Fresh: roots is inline. */
    mti_coh_root_ref(r);
    cmd->roots_inline[0] = r;
    cmd->nroots = 1;
    cmd->fix_uid = dst->uid; /* its fixup: the segments in this instance (fixup.c) */
    /* RAW on the source, writes into the target in order, and the command
     * that needs the data waits for this copy (not armed yet: no lock). */
    int rc = mti_coh_depend_write(c, cmd, src);
    if (!rc)
        rc = mti_coh_depend_write(c, cmd, dst);
    if (!rc && main)
        rc = mti_coh_cmd_depend_fresh(main, cmd);
    /* Sequence numbers at both ends (from != to); the command is fresh
     * (nloc 0). */
    uint64_t s1 = mti_coh_loc_take(mti_coh_loc_of(c, from)), s2 = mti_coh_loc_take(mti_coh_loc_of(c, to));
    if (__builtin_expect(s1 && s2, 1)) {
        cmd->loc[0] = from;
        cmd->loc[1] = to;
        cmd->seq[0] = s1;
        cmd->seq[1] = s2;
        cmd->nloc = 2;
        if (s1 > src->last_seq)
            src->last_seq = s1;
        dst->last_seq = s2;
    } else {
        if (s1) {
            cmd->loc[cmd->nloc] = from;
            cmd->seq[cmd->nloc++] = s1;
            if (s1 > src->last_seq)
                src->last_seq = s1;
        }
        if (s2) {
            cmd->loc[cmd->nloc] = to;
            cmd->seq[cmd->nloc++] = s2;
            dst->last_seq = s2;
        }
        if (!rc)
            rc = -ENOMEM;
    }
    /* Out of memory half way is reported to the caller; the command still
     * runs (it can only lack a dependency whose append failed, and then the
     * enqueue fails too). */
    mti_coh_set_write(dst, cmd, s2);
    if (__builtin_expect(r->flags & COH_ROOT_USE_CHAIN, 0)) { /* before it is armed */
        if (!rc && from != MT_COH_HOST)
            rc = mti_coh_use_chain(c, cmd, src, s1);
        if (!rc && to != MT_COH_HOST)
            rc = mti_coh_use_chain(c, cmd, dst, s2);
    }
    mti_coh_inst_touch(c, src);
    /* Segments final: collections drop its pages from now on. absorb is
     * off the lines a migration writes: read only for downloads to host. */
    if (to == MT_COH_HOST && cmd->absorb)
        mti_coh_track_inflight(cmd->absorb, cmd);
    c->st_migrations += 1;
    c->st_copied[cmd->opkind] += bytes; /* UPLOAD, DOWNLOAD or PEER */
    if (main) {
        main->migrations++;
        if (to == main->to_loc)
            main->bytes_in += bytes;
        else
            main->bytes_relay += bytes;
    }
    mti_coh_cmd_arm_give(c, cmd); /* the planner's reference becomes the execution's */
    return rc;
}

void mti_coh_fetch_begin(coh_builder *b, mt_coh *c, coh_root *r, uint32_t to, coh_cmd *main)
{
    b->c = c;
    b->r = r;
    b->to = to;
    b->main = main;
    b->n = 0;
    b->bytes = 0;
    b->issued = 0;
    b->pref = ~0ull;
    b->runs_changed = 0;
}

static uint64_t seg_bytes(const coh_cmd *cmd)
{
    uint64_t bytes = 0;
    for (uint32_t i = 0; i < cmd->nsegs; i++)
        bytes += cmd->segs[i].len;
    return bytes;
}

/* Two hops through the root's host memory (`down`, made by make_mig as a
 * download to host memory, then an upload of the same segments); the host
 * copy becomes valid. */
static __attribute__((noinline)) int issue_relay(mt_coh *c, coh_root *r, uint32_t to, coh_cmd *main,
                                                 coh_cmd *down)
{
    int rc = 0;
    uint64_t relayed = seg_bytes(down);
    c->st_relay += relayed;
    coh_cmd *up = make_mig(c, r, MT_COH_HOST, to);
    if (!up) {
        rc = -ENOMEM;
    } else {
        for (uint32_t i = 0; i < down->nsegs && !rc; i++)
            rc = mti_coh_cmd_add_seg(up, down->segs[i].src, down->segs[i].dst, down->segs[i].len);
    }
    for (uint32_t i = 0; i < down->nsegs; i++)
        if (mti_coh_runs_reserve(&r->runs, 2) == 0)
            mti_coh_runs_update(&r->runs, down->segs[i].dst, down->segs[i].dst + down->segs[i].len,
                            ~0ull, COH_BIT(MT_COH_HOST));
    int rc2 = issue(c, r, down, main, relayed);
    if (up) {
        if (!rc)
            rc = mti_coh_cmd_depend(c, up, down);
        int rc3 = issue(c, r, up, main, seg_bytes(up));
        rc = rc ? rc : rc3;
    }
    return rc ? rc : rc2;
}

static int flush_one(coh_builder *b, uint32_t which)
{
    if (!b->m[which].relay)
        return issue(b->c, b->r, b->m[which].cmd, b->main, seg_bytes(b->m[which].cmd));
    b->runs_changed = 1; /* issue_relay marks host memory valid over what it relays */
    return issue_relay(b->c, b->r, b->to, b->main, b->m[which].cmd);
}

int mti_coh_fetch_flush(coh_builder *b, int force)
{
    if (!b->n)
        return 0;
    if (!force && b->bytes < b->c->o.pipeline_bytes) {
        /* Below the piece size, issue early only while the target's copy
         * engine is about to run dry, and not for crumbs: each piece costs a
         * hand-over and a launch (about what copying 1 MiB costs on a
         * GPU, hence a 32nd of the default piece: on a sparse upload the
         * collection is the long part, and the copy should start early).
         * "About to run dry": idle, or, on an in-order engine (which starts
         * a piece before the one ahead completes), one piece in flight and
         * none behind it, so that the next is queued while that one copies
         * (pieces then grow to what is collected during one copy). */
        coh_engine *e = b->to == MT_COH_HOST ? NULL : &b->c->dev[b->to]->eng[MT_COH_ENGINE_COPY];
        if (!e || e->bhead)
            return 0;
        uint32_t busy = atomic_load_explicit(&e->busy, memory_order_relaxed);
        /* Except the first piece, which goes whatever its size once the
         * engine is idle: the device has nothing else to do, and an
         * upload's first chunk is small (hosttrack.h) so that it starts
         * early. */
        int first = !b->issued && !busy;
        if (!first && (b->bytes < b->c->o.pipeline_bytes / 32 || busy > (uint32_t)e->in_order))
            return 0;
    }
    int rc = 0;
    for (uint32_t i = 0; i < b->n; i++) {
        int r2 = flush_one(b, i);
        rc = rc ? rc : r2;
    }
    b->n = 0;
    b->bytes = 0;
    b->issued++;
    COH_PROBE("issue", b->issued, force);
    if (!force && b->to != MT_COH_HOST) /* pipelining: hand it over now */
        mti_coh_engine_kick(&b->c->dev[b->to]->eng[MT_COH_ENGINE_COPY]);
    return rc;
}

/* Adds the piece [a, e) whose valid locations are `m`. Among equally good
 * sources it takes one a migration being built already copies from, else
 * one valid over every stale piece of the range (b->pref): pieces of one
 * range then share one migration instead of one per source. */
static int add_piece(coh_builder *b, uint64_t a, uint64_t e, uint64_t m)
{
    int relay;
    uint64_t cand = source_candidates(b->c, b->to, m, &relay);
    uint32_t i = 0;
    while (i < b->n && !(b->m[i].relay == relay && (cand & COH_BIT(b->m[i].src))))
        i++;
    if (i == b->n) {
        uint32_t from = lowest(cand & b->pref ? cand & b->pref : cand);
        if (b->n == COH_MAX_SOURCES) {
            int rc = mti_coh_fetch_flush(b, 1);
            if (rc)
                return rc;
            i = 0;
        }
        coh_cmd *cmd = make_mig(b->c, b->r, from, relay ? MT_COH_HOST : b->to);
        if (!cmd)
            return -ENOMEM;
        b->m[i].src = from;
        b->m[i].relay = relay;
        b->m[i].cmd = cmd;
        b->n = i + 1;
    }
    b->bytes += e - a;
    return mti_coh_cmd_add_seg(b->m[i].cmd, a, a, e - a);
}

/* The pieces of [a, bnd) stale at the target, with b->pref set. A flush in
 * the middle of the walk (a ninth source) that issued a relay has marked
 * host memory valid over earlier pieces: the runs may have been split or
 * merged under the walk's index, so the walk finds its place again by
 * offset (by index it could skip a run, leaving a piece unfetched). */
static int fetch_pieces(coh_builder *b, uint64_t a, uint64_t bnd, uint32_t hint)
{
    const coh_runs *rs = &b->r->runs;
    uint64_t bit = COH_BIT(b->to);
    b->runs_changed = 0;
    for (uint32_t k = mti_coh_runs_find_from(rs, a, hint); k < rs->n && rs->v[k].start < bnd;) {
        uint64_t m = rs->v[k].mask;
        if ((m & bit) || !m) {
            k++;
            continue; /* valid there already, or lost (validation refused reads of it) */
        }
        uint64_t s = rs->v[k].start > a ? rs->v[k].start : a;
        uint64_t e = mti_coh_run_end(rs, k) < bnd ? mti_coh_run_end(rs, k) : bnd;
        int rc = add_piece(b, s, e, m); /* [s, e) itself is not among what a flush relays */
        if (rc)
            return rc;
        if (b->runs_changed && e < bnd) {
            b->runs_changed = 0;
            a = e;
            k = mti_coh_runs_find(rs, e);
        } else {
            k++;
        }
    }
    return 0;
}

int mti_coh_fetch_add(coh_builder *b, uint64_t a, uint64_t bnd)
{
    int flags; /* lost runs are skipped by fetch_pieces */
    uint32_t k0;
    mti_coh_runs_stale(&b->r->runs, a, bnd, COH_BIT(b->to), ~0ull, &b->pref, &flags, &k0);
    return fetch_pieces(b, a, bnd, k0);
}

void mti_coh_fetch_end(coh_builder *b)
{
    for (uint32_t i = 0; i < b->n; i++)
        mti_coh_cmd_unref(b->m[i].cmd); /* never issued (error path) */
    b->n = 0;
}

/* The usual fetch: a peer of `to` is valid over every stale run, so every
 * piece's best sources include it and the builder would put them all into
 * one migration from it. Built directly: one walk, no builder. */
static int fetch_direct(mt_coh *c, coh_root *r, uint32_t to, uint64_t a, uint64_t b, coh_cmd *main,
                        uint32_t from, uint32_t hint)
{
    const coh_runs *rs = &r->runs;
    uint64_t bit = COH_BIT(to);
    coh_cmd *cmd = make_mig(c, r, from, to);
    if (!cmd)
        return -ENOMEM;
    int rc = 0;
    uint64_t bytes = 0;
    for (uint32_t k = mti_coh_runs_find_from(rs, a, hint); k < rs->n && rs->v[k].start < b && !rc;
         k++) {
        uint64_t m = rs->v[k].mask;
        if ((m & bit) || !m)
            continue; /* valid there already, or lost (validation refused reads of it) */
        uint64_t s = rs->v[k].start > a ? rs->v[k].start : a;
        uint64_t e = mti_coh_run_end(rs, k) < b ? mti_coh_run_end(rs, k) : b;
        bytes += e - s;
        rc = mti_coh_cmd_add_seg(cmd, s, s, e - s);
    }
    if (rc) {
        mti_coh_cmd_unref(cmd); /* never issued */
        return rc;
    }
    return issue(c, r, cmd, main, bytes);
}

/* The fetch of an untracked range whose stale runs no one peer of `to`
 * holds: the builder's choice of sources (add_piece) in one walk, the
 * migrations issued at its end, each with the bytes counted on the way. */
static int fetch_split(mt_coh *c, coh_root *r, uint32_t to, uint64_t a, uint64_t b, coh_cmd *main,
                       uint64_t pref, uint32_t hint)
{
    struct {
        uint32_t src;
        int relay;
        coh_cmd *cmd;
        uint64_t bytes;
    } m[COH_MAX_SOURCES];
    uint32_t n = 0;
    int rc = 0;
    const coh_runs *rs = &r->runs;
    uint64_t bit = COH_BIT(to);
    for (uint32_t k = mti_coh_runs_find_from(rs, a, hint); k < rs->n && rs->v[k].start < b; k++) {
    walk:;
        uint64_t mk = rs->v[k].mask;
        if ((mk & bit) || !mk)
            continue; /* valid there already, or lost (validation refused reads of it) */
        uint64_t s = rs->v[k].start > a ? rs->v[k].start : a;
        uint64_t e = mti_coh_run_end(rs, k) < b ? mti_coh_run_end(rs, k) : b;
        int relay;
        uint64_t cand = source_candidates(c, to, mk, &relay);
        uint32_t i = 0;
        while (i < n && !(m[i].relay == relay && (cand & COH_BIT(m[i].src))))
            i++;
        if (i == n) {
            if (n == COH_MAX_SOURCES) { /* a ninth source: issue what was collected */
                int relayed = 0;
                for (uint32_t j = 0; j < n; j++) {
                    relayed |= m[j].relay;
                    int r2 = m[j].relay ? issue_relay(c, r, to, main, m[j].cmd)
                                        : issue(c, r, m[j].cmd, main, m[j].bytes);
                    rc = rc ? rc : r2;
                }
                n = i = 0;
                if (rc)
                    return rc;
                if (relayed) {
                    /* The relays marked host memory valid over earlier
                     * pieces: the runs may have been split or merged under
                     * k (by index the walk could skip a run and leave a
                     * piece unfetched). Find [s, ...) again by offset, and
                     * take the run there afresh. */
                    a = s;
                    k = mti_coh_runs_find(rs, s);
                    goto walk;
                }
            }
            uint32_t from = lowest(cand & pref ? cand & pref : cand);
            coh_cmd *cmd = make_mig(c, r, from, relay ? MT_COH_HOST : to);
            if (!cmd) {
                rc = -ENOMEM;
                break;
            }
            m[i].src = from;
            m[i].relay = relay;
            m[i].cmd = cmd;
            m[i].bytes = 0;
            n = i + 1;
        }
        m[i].bytes += e - s;
        if ((rc = mti_coh_cmd_add_seg(m[i].cmd, s, s, e - s)) != 0)
            break;
    }
    /* What was collected is issued even after a failure (prefetches). */
    for (uint32_t j = 0; j < n; j++) {
        int r2 = m[j].relay ? issue_relay(c, r, to, main, m[j].cmd)
                            : issue(c, r, m[j].cmd, main, m[j].bytes);
        rc = rc ? rc : r2;
    }
    return rc;
}

int mti_coh_plan_fetch(mt_coh *c, coh_root *r, uint32_t to, uint64_t a, uint64_t b, coh_cmd *main,
                   uint64_t pref, uint32_t hint)
{
    /* Fast path: the whole range already valid at `to`. */
    const coh_runs *rs = &r->runs;
    if (rs->n == 1 && (rs->v[0].mask & COH_BIT(to)))
        return 0;
    uint64_t direct = to != MT_COH_HOST && pref && pref != ~0ull ? pref & c->dev[to]->peer_mask : 0;
    if (direct)
        return fetch_direct(c, r, to, a, b, main, lowest(direct), hint);
    return fetch_split(c, r, to, a, b, main, pref ? pref : ~0ull, hint);
}
