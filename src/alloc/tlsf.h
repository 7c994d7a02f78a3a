/* The TLSF index (size-class lists and their bitmaps) and the node free list:
 * the O(1) pieces every allocate and free goes through, inline.
 *
 * Node 0 (NIL) is never a block, but it is a real node that serves as a sink:
 * list and chain updates write "the neighbour's link" unconditionally, into
 * b[NIL] when there is no neighbour, instead of testing first. Nothing reads
 * the sink's links. Its `free` byte stays 0, so a missing
 * physical neighbour reads as a used one, and its off and size stay
 * UINT64_MAX and 0, the head record of an empty class, so "the next block
 * becomes the head" needs no test either. */
#ifndef MT_ALLOC_TLSF_H
#define MT_ALLOC_TLSF_H

#include "internal.h"

/* Files free block `id` in class list c, and keeps the lower of it and the
 * list's head in front: searches take heads, and preferring low offsets
 * packs allocations towards the start of regions, which keeps large free
 * blocks at their ends (what makes address-ordered first fit fragment so
 * little). One comparison, so still O(1). An empty class's head offset is
 * UINT64_MAX, so an empty list takes the block in front. */
static inline void tlsf_link(mt_alloc *a, uint32_t id, unsigned c)
{
    blk *b = a->b, *x = &b[id];
    tlsf_idx *ix = &a->ix;
    uint32_t h = ix->head[c];
    x->cls = (uint16_t)c;
    if (ix->hd[c].off < x->off) { /* second, behind the lower head */
        uint32_t n = b[h].next_free;
        x->prev_free = h;
        x->next_free = n;
        b[n].prev_free = id; /* the sink when last */
        b[h].next_free = id;
        return;
    }
    x->prev_free = NIL;
    x->next_free = h;
    b[h].prev_free = id;
    ix->head[c] = id;
    ix->hd[c] = (tlsf_head){x->off, x->size};
    /* Already set when the class was not empty: no test needed. */
    ix->sl_map[c / SL_N] |= 1u << (c % SL_N);
    ix->fl_map |= 1ull << (c / SL_N);
}

/* Takes free block `id` off its class list. When it was the head, the next
 * block (or the sink's "empty" record) becomes the head; when the list
 * becomes empty, its bitmap bits go. */
static inline void tlsf_unlink(mt_alloc *a, uint32_t id)
{
    blk *b = a->b;
    const blk *x = &b[id];
    uint32_t prev = x->prev_free, next = x->next_free;
    b[next].prev_free = prev;
    if (prev != NIL) {
        b[prev].next_free = next;
        return;
    }
    tlsf_idx *ix = &a->ix;
    unsigned c = x->cls;
    ix->head[c] = next;
    ix->hd[c] = (tlsf_head){b[next].off, b[next].size};
    if (next == NIL) {
        ix->sl_map[c / SL_N] &= ~(1u << (c % SL_N));
        if (ix->sl_map[c / SL_N] == 0)
            ix->fl_map &= ~(1ull << (c / SL_N));
    }
}


/* tlsf_unlink for the head of class c, known to be: its successor (or the
 * sink's empty record) becomes the head. */
static inline void tlsf_unlink_head(mt_alloc *a, uint32_t id, unsigned c)
{
    blk *b = a->b;
    tlsf_idx *ix = &a->ix;
    uint32_t next = b[id].next_free;
    b[next].prev_free = NIL; /* the sink when it was alone */
    ix->head[c] = next;
    ix->hd[c] = (tlsf_head){b[next].off, b[next].size};
    if (next == NIL) {
        ix->sl_map[c / SL_N] &= ~(1u << (c % SL_N));
        if (ix->sl_map[c / SL_N] == 0)
            ix->fl_map &= ~(1ull << (c / SL_N));
    }
}

/* A free block changed size (and maybe offset): moves it to its new class
 * list, or leaves it where it is when the class did not change (a small
 * piece came off a large block, or joined one). */
static inline __attribute__((always_inline)) void tlsf_refile(mt_alloc *a, uint32_t id)
{
    const blk *x = &a->b[id];
    unsigned c = class_index(x->size);
    if (c != x->cls) {
        tlsf_unlink(a, id);
        tlsf_link(a, id, c);
    } else if (x->prev_free == NIL) {
        a->ix.hd[c] = (tlsf_head){x->off, x->size}; /* a head that changed in place */
    }
}

static inline void tlsf_insert(mt_alloc *a, uint32_t id)
{
    tlsf_link(a, id, class_index(a->b[id].size));
}

/* The smallest non-empty class at or above class index c <= N_CLASSES, or
 * -1: one scan of the second-level bitmap, else one of the first level.
 * sl_map has SL_MAP_N > FL_N words, the extra ones zero, so c == N_CLASSES
 * ("no class is certain to fit") needs no test. */
static inline int tlsf_class_from(const tlsf_idx *ix, unsigned c)
{
    unsigned fl = c / SL_N;
    uint32_t sm = ix->sl_map[fl] & (~0u << (c % SL_N));
    if (sm == 0) {
        uint64_t fm = ix->fl_map & (~0ull << (fl + 1)); /* fl + 1 < 64 */
        if (fm == 0)
            return -1;
        fl = (unsigned)__builtin_ctzll(fm);
        sm = ix->sl_map[fl];
    }
    return (int)(fl * SL_N + (unsigned)__builtin_ctz(sm));
}

/* The smallest non-empty class above class c < N_CLASSES, or N_CLASSES:
 * tlsf_class_from without branches (both bitmap words are read, the
 * answer selected). */
static inline unsigned tlsf_class_after(const tlsf_idx *ix, unsigned c)
{
    unsigned fl = (c + 1) / SL_N;
    uint32_t sm = ix->sl_map[fl] & (~0u << ((c + 1) % SL_N));
    uint64_t fm = ix->fl_map & (~0ull << (fl + 1)); /* fl + 1 < 64 */
    unsigned fl2 = (unsigned)__builtin_ctzll(fm | 1ull << FL_N); /* FL_N: an empty word */
    uint32_t sm2 = ix->sl_map[fl2];
    unsigned in_word = fl * SL_N + (unsigned)__builtin_ctz(sm | 1u << SL_N);
    unsigned later = sm2 ? fl2 * SL_N + (unsigned)__builtin_ctz(sm2) : N_CLASSES;
    return sm ? in_word : later;
}

/* Head of the largest non-empty class, or NIL. */
static inline uint32_t tlsf_top(const tlsf_idx *ix)
{
    if (ix->fl_map == 0)
        return NIL;
    unsigned fl = msb64(ix->fl_map);
    return ix->head[fl * SL_N + 31u - (unsigned)__builtin_clz(ix->sl_map[fl])];
}

/* ---- nodes -------------------------------------------------------------------
 * Callers reserve (mta_node_reserve) before changing anything, so that taking
 * a node never fails halfway through an operation. */

static inline uint32_t node_take(mt_alloc *a)
{
    uint32_t id = a->b_unused;
    a->b_unused = a->b[id].next_free;
    a->b_unused_n--;
    return id;
}

static inline void node_put(mt_alloc *a, uint32_t id)
{
    a->b[id].free = BLK_UNUSED; /* a stale hint (mt_alloc_free_block) finds no block */
    a->b[id].next_free = a->b_unused;
    a->b_unused = id;
    a->b_unused_n++;
}

#endif
