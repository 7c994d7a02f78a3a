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
    uint8_t *seen; /* per node: 1 chain, 2 class list, 4 unused list */
    char *msg;
    size_t len;
    uint64_t free_in_chains, used_in_chains, used_bytes;
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
    if (id == NIL || id >= c->a->b_cap)
        return fail(c, "%s: node id %" PRIu32 " out of range", where, id);
    if (c->seen[id] & bit)
        return fail(c, "%s: node %" PRIu32 " reached twice (cycle)", where, id);
    c->seen[id] |= bit;
    return 0;
}

/* Two used blocks of different kinds with only free space between them must
 * not share a granularity page. */
static int check_granularity(checker *c, const blk *prev_used, const blk *x)
{
    unsigned p = c->a->pshift;
    if (p == 0 || !prev_used || prev_used->kind == x->kind)
        return 0;
    if (((prev_used->off + prev_used->size - 1) >> p) == (x->off >> p))
        return fail(c, "blocks at 0x%" PRIx64 " and 0x%" PRIx64 " of different kinds share a page",
                    prev_used->off, x->off);
    return 0;
}

static int check_region(checker *c, uint32_t rid)
{
    const mt_alloc *a = c->a;
    const region *r = &a->reg[rid];
    uint64_t g = 1ull << a->gshift, pos = 0, used = 0, allocs = 0;
    uint32_t prev = NIL;
    const blk *prev_used = NULL;
    int rc;
    for (uint32_t id = r->first; id != NIL; prev = id, id = a->b[id].next_phys) {
        if ((rc = mark(c, id, 1, "region chain")))
            return rc;
        const blk *x = &a->b[id];
        if (x->region != rid || x->prev_phys != prev || x->off != pos)
            return fail(c, "region %" PRIu32 ": block %" PRIu32 " at 0x%" PRIx64
                        " has region %" PRIu32 ", prev %" PRIu32 ", offset 0x%" PRIx64
                        " (expected %" PRIu32 ", 0x%" PRIx64 ")",
                        rid, id, x->off, x->region, x->prev_phys, x->off, prev, pos);
        if (x->size == 0 || (x->size & (g - 1)) || x->size > r->size - pos)
            return fail(c, "block %" PRIu32 ": bad size %" PRIu64, id, x->size);
        if (x->free) {
            if (prev != NIL && a->b[prev].free)
                return fail(c, "free blocks %" PRIu32 " and %" PRIu32 " not coalesced", prev, id);
            if (map_find(a, rid, x->off) != UINT32_MAX)
                return fail(c, "free block at 0x%" PRIx64 " is in the offset map", x->off);
            c->free_in_chains++;
        } else {
            if (x->kind > MT_ALLOC_NONLINEAR)
                return fail(c, "block %" PRIu32 ": bad kind %u", id, x->kind);
            uint32_t slot = map_find(a, rid, x->off);
            if (slot == UINT32_MAX || a->ht[slot].id != id)
                return fail(c, "used block at 0x%" PRIx64 " missing from the offset map", x->off);
            if ((rc = check_granularity(c, prev_used, x)))
                return rc;
            prev_used = x;
            used += x->size;
            allocs++;
            c->used_in_chains++;
        }
        pos += x->size;
    }
    if (pos != r->size)
        return fail(c, "region %" PRIu32 ": blocks cover 0x%" PRIx64 " of 0x%" PRIx64 " bytes",
                    rid, pos, r->size);
    if (used != r->used || allocs != r->allocs)
        return fail(c, "region %" PRIu32 ": counted %" PRIu64 " bytes in %" PRIu64
                    " allocations, recorded %" PRIu64 " in %" PRIu64, rid, used, allocs,
                    r->used, r->allocs);
    c->used_bytes += used;
    return 0;
}

static int check_classes(checker *c)
{
    const mt_alloc *a = c->a;
    const tlsf_idx *ix = &a->ix;
    uint64_t listed = 0;
    int rc;
    for (unsigned fl = 0; fl < FL_N; fl++) {
        if (((ix->fl_map >> fl) & 1) != (ix->sl_map[fl] != 0))
            return fail(c, "first-level bit %u disagrees with its second level", fl);
        for (unsigned sl = 0; sl < SL_N; sl++) {
            uint32_t h = ix->head[fl * SL_N + sl];
            if (((ix->sl_map[fl] >> sl) & 1) != (h != NIL))
                return fail(c, "bitmap bit (%u,%u) disagrees with its list", fl, sl);
            if (h != NIL && h < a->b_cap && ix->head_off[fl * SL_N + sl] != a->b[h].off)
                return fail(c, "class (%u,%u): recorded head offset 0x%" PRIx64 ", head at 0x%"
                            PRIx64, fl, sl, ix->head_off[fl * SL_N + sl], a->b[h].off);
            for (uint32_t id = h, prev = NIL; id != NIL; prev = id, id = a->b[id].next_free) {
                if ((rc = mark(c, id, 2, "class list")))
                    return rc;
                const blk *x = &a->b[id];
                unsigned f, s;
                class_of(x->size >> a->gshift, &f, &s);
                if (!x->free || !(c->seen[id] & 1) || x->prev_free != prev || f != fl || s != sl ||
                    x->cls != fl * SL_N + sl)
                    return fail(c, "class (%u,%u): node %" PRIu32 " is not a free block of "
                                "this class in a region chain", fl, sl, id);
                listed++;
            }
        }
    }
    if (listed != c->free_in_chains || listed != a->free_blocks)
        return fail(c, "%" PRIu64 " blocks listed, %" PRIu64 " free in chains, %" PRIu64
                    " recorded", listed, c->free_in_chains, a->free_blocks);
    return 0;
}

/* Every map entry names a used block found in a chain, carries its hash, is
 * the one a lookup finds, and lies within ht_limit of its home; the table is
 * at most half full. */
static int check_map(checker *c)
{
    const mt_alloc *a = c->a;
    uint64_t entries = 0;
    for (uint32_t i = 0; i <= a->ht_mask; i++) {
        uint32_t id = a->ht[i].id;
        if (id == NIL)
            continue;
        if (id >= a->b_cap || !(c->seen[id] & 1) || a->b[id].free)
            return fail(c, "map slot %" PRIu32 " names node %" PRIu32 ", not a used block", i,
                        id);
        const blk *x = &a->b[id];
        uint32_t tag = map_tag(a, x->region, x->off);
        if (a->ht[i].tag != tag || ((i - map_home(a, tag)) & a->ht_mask) > a->ht_limit ||
            map_find(a, x->region, x->off) != i)
            return fail(c, "map slot %" PRIu32 " (block at 0x%" PRIx64 ") is misplaced", i,
                        x->off);
        entries++;
    }
    if (entries != c->used_in_chains || entries != a->ht_used ||
        (uint64_t)a->ht_used * 2 > (uint64_t)a->ht_mask + 1)
        return fail(c, "map has %" PRIu64 " entries (recorded %" PRIu32 ", %" PRIu32
                    " slots) for %" PRIu64 " used blocks", entries, a->ht_used, a->ht_mask + 1,
                    c->used_in_chains);
    return 0;
}

static int check_nodes(checker *c)
{
    const mt_alloc *a = c->a;
    uint32_t n = 0;
    int rc;
    for (uint32_t id = a->b_unused; id != NIL; id = a->b[id].next_free, n++)
        if ((rc = mark(c, id, 4, "unused nodes")))
            return rc;
    if (n != a->b_unused_n)
        return fail(c, "%" PRIu32 " unused nodes, recorded %" PRIu32, n, a->b_unused_n);
    for (uint32_t id = 1; id < a->b_cap; id++) {
        uint8_t s = c->seen[id];
        if (s != 4 && s != 1 && s != 3)
            return fail(c, "node %" PRIu32 " is lost or in two places (marks %u)", id, s);
        if (s == 1 && a->b[id].free)
            return fail(c, "free block %" PRIu32 " is on no class list", id);
    }
    return 0;
}

static int check_totals(checker *c)
{
    const mt_alloc *a = c->a;
    uint64_t total = 0;
    uint32_t live = 0, empty = 0;
    for (uint32_t rid = 0; rid < a->reg_cap; rid++)
        if (a->reg[rid].size) {
            total += a->reg[rid].size;
            live++;
            empty += a->reg[rid].allocs == 0;
        }
    if (total != a->total || c->used_bytes != a->used || c->used_in_chains != a->allocs ||
        live != a->reg_live || empty != a->reg_empty)
        return fail(c, "totals disagree: bytes %" PRIu64 "/%" PRIu64 ", used %" PRIu64 "/%" PRIu64
                    ", allocations %" PRIu64 "/%" PRIu64 ", regions %" PRIu32 "/%" PRIu32
                    ", empty %" PRIu32 "/%" PRIu32, total, a->total, c->used_bytes, a->used,
                    c->used_in_chains, a->allocs, live, a->reg_live, empty, a->reg_empty);
    return 0;
}

int mt_alloc_check(const mt_alloc *a, char *msg, size_t msg_len)
{
    if (!a)
        return -EINVAL;
    checker c = {.a = a, .msg = msg, .len = msg_len};
    if (msg && msg_len)
        msg[0] = '\0';
    c.seen = calloc(a->b_cap ? a->b_cap : 1, 1);
    if (!c.seen)
        return -ENOMEM;
    int rc = 0;
    for (uint32_t rid = 0; rc == 0 && rid < a->reg_cap; rid++)
        if (a->reg[rid].size)
            rc = check_region(&c, rid);
    if (rc == 0)
        rc = check_classes(&c);
    if (rc == 0)
        rc = check_map(&c);
    if (rc == 0)
        rc = check_nodes(&c);
    if (rc == 0)
        rc = check_totals(&c);
    free(c.seen);
    return rc;
}
