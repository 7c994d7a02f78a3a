/* The consistency checker: re-derives every fact the allocator keeps
 * incrementally (chains, class lists, bitmaps, offset map, counters) from
 * scratch and compares. Each node must be accounted for exactly once: in a
 * region chain or on the unused list. Slow on purpose; tests call it after
 * every step. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "offmap.h"

typedef struct checker {
    const mt_alloc *a;
    uint8_t *seen; /* per node: 1 chain, 2 class list, 4 unused list, 8 sentinel */
    char *msg;
    size_t len;
    uint64_t free_in_chains, used_in_chains, used_bytes; /* used_bytes: granules */
    uint64_t pad; /* granules of pad kept by used blocks */
    uint32_t empty_regions;
} checker;

__attribute__((format(printf, 2, 3))) static int fail(checker *c, const char *fmt, ...)
{
    if (c->msg && c->len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->msg, c->len, fmt, ap);
        va_end(ap);
    }
    return MT_ECORRUPT;
}

static int mark(checker *c, uint32_t id, uint8_t bit, const char *where)
{
    if (!node_ok(id, c->a->b_cap))
        return fail(c, "%s: node id %" PRIu32 " out of range", where, id);
    if (c->seen[id >> NODE_SHIFT] & bit)
        return fail(c, "%s: node %" PRIu32 " reached twice (cycle)", where, id);
    c->seen[id >> NODE_SHIFT] |= bit;
    return 0;
}

/* Offsets and sizes are in granules, as in the nodes; messages give bytes. */

/* Two used blocks of different kinds with only free space between them must
 * not share a granularity page. */
static int check_granularity(checker *c, const blk *prev_used, const blk *x)
{
    unsigned p = c->a->pshift;
    if (p == 0 || !prev_used || blk_kind(prev_used) == blk_kind(x))
        return 0;
    unsigned gs = c->a->gshift;
    if (((blk_off(prev_used) + blk_size(prev_used) - 1) >> p) == (blk_off(x) >> p))
        return fail(c, "blocks at 0x%" PRIx64 " and 0x%" PRIx64 " of different kinds share a page",
                    blk_off(prev_used) << gs, blk_off(x) << gs);
    return 0;
}

static int check_region(checker *c, uint32_t rid)
{
    const mt_alloc *a = c->a;
    const region *r = &a->reg[rid];
    unsigned gs = a->gshift;
    uint64_t pos = 0, used = 0, allocs = 0, rsize = r->size >> gs;
    uint32_t sid = r->sentinel, prev = sid;
    const blk *prev_used = NULL;
    int rc;
    if ((rc = mark(c, sid, 8, "region sentinel")))
        return rc;
    const blk *sx = NODE(a->b, sid);
    if (sx->size != (SZ_USED | SZ_SENT) || sx->off != OFF_MASK || sx->region != rid)
        return fail(c, "region %" PRIu32 ": sentinel %" PRIu32 " is not one", rid, sid);
    for (uint32_t id = sx->next_phys; id != sid; prev = id, id = NODE(a->b, id)->next_phys) {
        if ((rc = mark(c, id, 1, "region chain")))
            return rc;
        const blk *x = NODE(a->b, id);
        if (x->prev_phys != prev || blk_off(x) != pos)
            return fail(c, "region %" PRIu32 ": block %" PRIu32 " at 0x%" PRIx64 " has prev %"
                        PRIu32 " (expected %" PRIu32 ", 0x%" PRIx64 ")",
                        rid, id, blk_off(x) << gs, x->prev_phys, prev, pos << gs);
        uint64_t size = blk_size(x);
        if (size == 0 || size > rsize - pos)
            return fail(c, "block %" PRIu32 ": bad size %" PRIu64, id, size << gs);
        if (blk_is_free(x)) {
            if (x->size != size || x->off != pos)
                return fail(c, "free block %" PRIu32 " has state bits", id);
            if (blk_is_free(NODE(a->b, prev)))
                return fail(c, "free blocks %" PRIu32 " and %" PRIu32 " not coalesced", prev, id);
            if (a->ht && map_find(a, rid, blk_off(x)).bucket != UINT32_MAX)
                return fail(c, "free block at 0x%" PRIx64 " is in the offset map", pos << gs);
            c->free_in_chains++;
        } else {
            if ((x->size & ~(SZ_MASK | SZ_USED | SZ_NONLINEAR)) != 0 || x->region != rid)
                return fail(c, "used block %" PRIu32 ": bad state bits or region %" PRIu32, id,
                            x->region);
            /* A kept pad leaves data in the block; never with granularity
             * pages (alloc.c, kept_pad). */
            if (blk_pad(x) >= size || (a->pshift != 0 && blk_pad(x) != 0))
                return fail(c, "used block %" PRIu32 ": bad pad %u", id, blk_pad(x));
            if (a->ht) {
                mloc l = map_find(a, rid, blk_data_off(x));
                if (l.bucket == UINT32_MAX || map_id(a, l) != id)
                    return fail(c, "used block at 0x%" PRIx64 " missing from the offset map",
                                blk_data_off(x) << gs);
            } else if (blk_key(x) != used_key(rid)) { /* the hint check's word (internal.h) */
                return fail(c, "used block %" PRIu32 ": note %" PRIu32 " is not NOTE_USED", id,
                            x->note);
            }
            if ((rc = check_granularity(c, prev_used, x)))
                return rc;
            prev_used = x;
            used += size;
            c->pad += blk_pad(x);
            allocs++;
            c->used_in_chains++;
        }
        pos += size;
    }
    if (sx->prev_phys != prev)
        return fail(c, "region %" PRIu32 ": sentinel's prev is %" PRIu32 ", last block %" PRIu32,
                    rid, sx->prev_phys, prev);
    if (pos != rsize)
        return fail(c, "region %" PRIu32 ": blocks cover 0x%" PRIx64 " of 0x%" PRIx64 " bytes",
                    rid, pos << gs, r->size);
    c->used_bytes += used;
    c->empty_regions += allocs == 0;
    return 0;
}

static int check_classes(checker *c)
{
    const mt_alloc *a = c->a;
    const tlsf_idx *ix = &a->ix;
    uint64_t listed = 0;
    int rc;
    if (ix->cls_map[N_CLASSES / 64] >> (N_CLASSES % 64) ||
        ix->head[N_CLASSES] != NIL)
        return fail(c, "bits or heads past the last class");
    for (unsigned fl = 0; fl < FL_N; fl++) {
        for (unsigned sl = 0; sl < SL_N; sl++) {
            uint32_t h = ix->head[fl * SL_N + sl];
            unsigned k = fl * SL_N + sl;
            if (((ix->cls_map[k / 64] >> (k % 64)) & 1) != (h != NIL))
                return fail(c, "bitmap bit (%u,%u) disagrees with its list", fl, sl);
            for (uint32_t id = h, prev = NIL; id != NIL;
                 prev = id, id = NODE(a->b, id)->next_free) {
                if ((rc = mark(c, id, 2, "class list")))
                    return rc;
                const blk *x = NODE(a->b, id);
                unsigned f, s;
                class_of(x->size, &f, &s);
                if (!blk_is_free(x) || x->size == 0 || !(c->seen[id >> NODE_SHIFT] & 1) ||
                    NODE(a->b, id)->prev_free != prev || f != fl || s != sl)
                    return fail(c, "class (%u,%u): node %" PRIu32 " is not a free block of "
                                "this class in a region chain", fl, sl, id);
                listed++;
            }
        }
    }
    if (listed != c->free_in_chains)
        return fail(c, "%" PRIu64 " blocks listed, %" PRIu64 " free in chains", listed,
                    c->free_in_chains);
    return 0;
}

/* Every map entry names a used block found in a chain, carries its tag, is
 * the one a lookup finds, and lies within ht_limit of its home; spill
 * counts match; the map is at most half full. */
static int check_map(checker *c)
{
    const mt_alloc *a = c->a;
    uint32_t n = a->ht_mask + 1;
    uint32_t *spill = calloc(n, sizeof *spill);
    if (!spill)
        return -ENOMEM;
    uint64_t entries = 0;
    int rc = 0;
    for (uint32_t j = 0; j < n && rc == 0; j++) {
        for (uint32_t lane = 0; lane < MAP_LANES && rc == 0; lane++) {
            if (a->ht[j].tag[lane] == 0)
                continue;
            uint32_t id = a->ht[j].id[lane];
            if (!node_ok(id, a->b_cap) || !(c->seen[id >> NODE_SHIFT] & 1) ||
                blk_is_free(NODE(a->b, id))) {
                rc = fail(c, "map bucket %" PRIu32 " lane %" PRIu32 " names node %" PRIu32
                          ", not a used block", j, lane, id);
                break;
            }
            const blk *x = NODE(a->b, id);
            uint64_t h = map_hash(a, x->region, blk_data_off(x));
            uint32_t home = map_home(a, h), d = (j - home) & a->ht_mask;
            mloc l = map_find(a, x->region, blk_data_off(x));
            if (a->ht[j].tag[lane] != map_tag(h) || d > a->ht_limit || l.bucket != j ||
                l.lane != lane || noted_bucket(x) != j || noted_lane(x) != lane ||
                !(x->note & NOTE_AWAY) != (d == 0)) {
                rc = fail(c, "map bucket %" PRIu32 " lane %" PRIu32 " (block at 0x%" PRIx64
                          ") is misplaced", j, lane, blk_data_off(x) << a->gshift);
                break;
            }
            spill[home] += d != 0;
            entries++;
        }
    }
    for (uint32_t j = 0; j < n && rc == 0; j++)
        if (spill[j] != a->ht[j].spill)
            rc = fail(c, "map bucket %" PRIu32 ": spill count %" PRIu32 ", %" PRIu32
                      " entries spilled", j, a->ht[j].spill, spill[j]);
    free(spill);
    if (rc == 0 && (entries != c->used_in_chains || entries != a->live ||
                    a->live > a->ht_room || (uint64_t)a->ht_room * 2 != (uint64_t)n * MAP_LANES))
        rc = fail(c, "map has %" PRIu64 " entries (recorded %" PRIu32 ", room %" PRIu32 " in %"
                  PRIu32 " buckets) for %" PRIu64 " used blocks", entries, a->live,
                  a->ht_room, n, c->used_in_chains);
    return rc;
}

static int check_nodes(checker *c)
{
    const mt_alloc *a = c->a;
    uint32_t n = 0;
    int rc;
    for (uint32_t id = a->b_unused; id != NIL; id = NODE(a->b, id)->next_free, n++) {
        if ((rc = mark(c, id, 4, "unused nodes")))
            return rc;
        if (!blk_is_free(NODE(a->b, id))) /* a stale hint must find no used block */
            return fail(c, "unused node %" PRIu32 " is not marked unused", id);
    }
    if (n != mti_alloc_unused(a))
        return fail(c, "%" PRIu32 " unused nodes, recorded %" PRIu32, n, mti_alloc_unused(a));
    if (a->credit > a->credit_base)
        return fail(c, "credit %" PRIu32 " above its base %" PRIu32, a->credit, a->credit_base);
    /* The sink still reads as "no block, empty class" (tlsf.h). */
    const blk *sink = NODE(a->b, NIL);
    if (sink->off != UINT64_MAX || sink->size != 0)
        return fail(c, "node NIL was written as a block");
    for (uint32_t i = 1; i < a->b_cap; i++) {
        uint32_t id = i << NODE_SHIFT;
        uint8_t s = c->seen[i];
        if (s != 4 && s != 1 && s != 3 && s != 8)
            return fail(c, "node %" PRIu32 " is lost or in two places (marks %u)", id, s);
        if (s == 1 && blk_is_free(NODE(a->b, id)))
            return fail(c, "free block %" PRIu32 " is on no class list", id);
    }
    return 0;
}

static int check_totals(checker *c)
{
    const mt_alloc *a = c->a;
    uint64_t total = 0;
    uint32_t live = 0, empty = c->empty_regions;
    /* Empty regions are counted only by an allocator that releases them
     * (alloc.c, the copies). */
    if (!(a->flags & MT_ALLOC_RELEASE_EMPTY))
        empty = a->reg_empty;
    for (uint32_t rid = 0; rid < a->reg_cap; rid++)
        if (a->reg[rid].size) {
            total += a->reg[rid].size;
            live++;
        }
    if (c->pad != a->pad)
        return fail(c, "kept pads: %" PRIu64 " granules, counted %" PRIu64, c->pad, a->pad);
    if (total != a->total || c->used_bytes != a->used || c->used_in_chains != a->live ||
        live != a->reg_live || empty != a->reg_empty)
        return fail(c, "totals disagree: bytes %" PRIu64 "/%" PRIu64 ", used granules %" PRIu64
                    "/%" PRIu64
                    ", allocations %" PRIu64 "/%" PRIu64 ", regions %" PRIu32 "/%" PRIu32
                    ", empty %" PRIu32 "/%" PRIu32, total, a->total, c->used_bytes, a->used,
                    c->used_in_chains, (uint64_t)a->live, live, a->reg_live, empty,
                    a->reg_empty);
    return 0;
}

int mt_alloc_check(const mt_alloc *a, char *msg, size_t msg_len)
{
    if (!a)
        return -EINVAL;
    checker c = {.a = a, .msg = msg, .len = msg_len};
    if (msg && msg_len)
        msg[0] = '\0';
    c.seen = calloc(a->b_cap, 1);
    if (!c.seen)
        return -ENOMEM;
    int rc = 0;
    for (uint32_t rid = 0; rc == 0 && rid < a->reg_cap; rid++)
        if (a->reg[rid].size)
            rc = check_region(&c, rid);
    if (rc == 0)
        rc = check_classes(&c);
    if (rc == 0 && a->ht)
        rc = check_map(&c);
    if (rc == 0)
        rc = check_nodes(&c);
    if (rc == 0)
        rc = check_totals(&c);
    free(c.seen);
    return rc;
}
