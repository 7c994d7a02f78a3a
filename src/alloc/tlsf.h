/* The TLSF index (size-class lists and their bitmaps) and the node free list:
 * the O(1) pieces every allocate and free goes through, inline.
 *
 * Node 0 (NIL) is never a block, but it is a real node that serves as a sink:
 * list updates write "the neighbour's link" unconditionally, into b[NIL]
 * when there is no neighbour, instead of testing first. Nothing reads the
 * sink's links. Its off and size stay UINT64_MAX and 0: as an empty class's
 * head (ix->head[c] == NIL) it is a block no request fits and that no
 * offset is below, so searches read heads without testing for one. */
#ifndef MT_ALLOC_TLSF_H
#define MT_ALLOC_TLSF_H

#include "internal.h"

/* Class c got its first block. There is no summary word over the bitmap
 * words: keeping it cost two more read-modify-writes on every change of a
 * class head, and the searches that need a later word (a few in a hundred)
 * step over at most CLS_WORDS words. */
static inline void tlsf_mark(tlsf_idx *ix, unsigned c) { ix->cls_map[c / 64] |= 1ull << (c % 64); }

/* Files free block `id` in class list c, and keeps the lower of it and the
 * list's head in front: searches take heads, and preferring low offsets
 * packs allocations towards the start of regions, which keeps large free
 * blocks at their ends (what makes address-ordered first fit fragment so
 * little). One comparison, so still O(1). An empty class's head offset is
 * UINT64_MAX, so an empty list takes the block in front. */
static inline void tlsf_link(mt_alloc *a, uint32_t id, unsigned c)
{
    blk *b = a->b, *x = NODE(b, id);
    tlsf_idx *ix = &a->ix;
    uint32_t h = ix->head[c];
    blk *hx = NODE(b, h);
    if (hx->off < x->off) { /* second, behind the lower head */
        uint32_t n = hx->next_free;
        x->prev_free = h;
        x->next_free = n;
        NODE(b, n)->prev_free = id; /* the sink when last */
        hx->next_free = id;
        return;
    }
    x->prev_free = NIL;
    x->next_free = h;
    hx->prev_free = id; /* the sink when the class was empty */
    ix->head[c] = id;
    tlsf_mark(ix, c); /* idempotent: cheaper than the test, whose outcome is random */
}

/* Takes the head `id` of class c off its list: its successor (or the
 * sink, "empty") becomes the head. */
static inline void tlsf_unlink_head(mt_alloc *a, uint32_t id, unsigned c)
{
    blk *b = a->b;
    tlsf_idx *ix = &a->ix;
    uint32_t next = NODE(b, id)->next_free;
    NODE(b, next)->prev_free = NIL; /* the sink when it was alone */
    ix->head[c] = next;
    /* Whether the class is now empty is a coin toss for the branch
     * predictor (with 16 classes per power of two, one head removal in
     * three empties its class): the bits are cleared without a branch. */
    ix->cls_map[c / 64] &= ~((uint64_t)(next == NIL) << (c % 64));
}

/* Takes free block `id`, of `size` granules as filed, off its class list. */
static inline void tlsf_unlink(mt_alloc *a, uint32_t id, uint64_t size)
{
    blk *b = a->b;
    const blk *x = NODE(b, id);
    uint32_t prev = x->prev_free, next = x->next_free;
    if (prev != NIL) {
        NODE(b, next)->prev_free = prev;
        NODE(b, prev)->next_free = next;
        return;
    }
    tlsf_unlink_head(a, id, class_index(size));
}

static inline void tlsf_insert(mt_alloc *a, uint32_t id)
{
    tlsf_link(a, id, class_index(NODE(a->b, id)->size));
}

/* The smallest non-empty class at or above class index c <= N_CLASSES, or
 * -1: the rest of c's bitmap word, else the first non-empty word after it
 * (at most CLS_WORDS - 1 more reads). Bit N_CLASSES is never set, so c ==
 * N_CLASSES ("no class is certain to fit") needs no test. */
static inline int tlsf_class_from(const tlsf_idx *ix, unsigned c)
{
    unsigned w = c / 64;
    uint64_t m = ix->cls_map[w] & (~0ull << (c % 64));
    while (m == 0) {
        if (++w == CLS_WORDS)
            return -1;
        m = ix->cls_map[w];
    }
    return (int)(w * 64 + (unsigned)__builtin_ctzll(m));
}

/* Head of the largest non-empty class, or NIL. */
static inline uint32_t tlsf_top(const tlsf_idx *ix)
{
    for (unsigned w = CLS_WORDS; w-- > 0;)
        if (ix->cls_map[w])
            return ix->head[w * 64 + msb64(ix->cls_map[w])];
    return NIL;
}

/* ---- nodes -------------------------------------------------------------------
 * Callers reserve (mti_alloc_node_reserve) before changing anything, so that taking
 * a node never fails halfway through an operation. */

/* Takes an unused node off its list; the caller counts it (node_take). */
static inline uint32_t node_take_uncounted(mt_alloc *a)
{
    uint32_t id = a->b_unused;
    a->b_unused = NODE(a->b, id)->next_free;
    return id;
}

static inline uint32_t node_take(mt_alloc *a)
{
    a->b_unused_n--;
    return node_take_uncounted(a);
}

/* Puts back a node that reads as no used block (a free block's: its size
 * word has no SZ_USED), so that a stale hint (mt_alloc_free_block) finds
 * nothing there, without a store. */
static inline void node_put(mt_alloc *a, uint32_t id)
{
    NODE(a->b, id)->next_free = a->b_unused;
    a->b_unused = id;
    a->b_unused_n++;
}

/* Puts back a used block's or a sentinel's node, marked unused. */
static inline void node_put_used(mt_alloc *a, uint32_t id)
{
    NODE(a->b, id)->size = 0;
    node_put(a, id);
}

#endif
