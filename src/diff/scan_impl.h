/* The body shared by every compare kernel, instantiated once per file with
 * that file's vector primitives and target attribute. Before including it,
 * a kernel file defines:
 *   MT_SCAN_NAME   the function's name
 *   MT_SCAN_ATTR   its attributes (e.g. the target ISA), put on every
 *                  function here so the primitives inline into them
 *   scan_blk       a type holding 64 bytes of live content (registers)
 *   static uint64_t blk_load(const uint8_t *a, const uint8_t *b, scan_blk *v):
 *                  bit i set <=> a[i] != b[i], for 64 bytes; *v = a[0, 64)
 *   static void blk_store(uint8_t *dst, const scan_blk *v): dst[0, 64) = *v
 *   static int block_equal128(const uint8_t *a, const uint8_t *b):
 *                  1 when the 128 bytes are equal
 * and optionally MT_SCAN_STORE_CHANGED 1 with
 *   static void blk_store_changed(uint8_t *dst, const scan_blk *v, uint64_t m):
 *                  dst[i] = v[i] where bit i of m is set (a masked store);
 *                  the dense loop then uses it instead of a whole-block store
 *                  into the shadow or a spill buffer
 *
 * Invariant: a run starts and ends on a differing byte and holds no stretch
 * of `gap` or more equal bytes (gap 1: exact runs). The run being built (the
 * pending run) is reported when a change gap or more bytes after its end
 * starts the next one; a run is started only while there is room to report
 * it, so the scan can stop cleanly before any run.
 *
 * Clean memory is skipped 128 bytes at a time. Where changes are, with a gap
 * of 32 or more (the default is 32), 64-byte blocks go through a loop without
 * data-dependent branches: with changes scattered at random every such branch
 * is a coin toss, and a mispredicted one costs more than a block's work. The
 * block's change mask gives its run boundaries with bit operations, each is
 * recorded with an unconditional store and a conditional increment, and the
 * block's live content, already in registers, is stored whole into the
 * shadow. Smaller gaps, write-back, the first change of a call, the last
 * runs that fit and the range's tail go through the exact path, a walk of
 * the mask.
 *
 * No software prefetch: both streams are sequential and the hardware
 * prefetcher keeps up; explicit prefetches measured slower (0.72-0.81x over
 * clean memory, 0.95x at 1% changes). */
#include <stddef.h>
#include <stdint.h>

#include "copy.h"
#include "kernel.h"

/* Clean 64-byte blocks in a row after which the dense loop and the exact
 * path hand back to the 128-byte skip: at 1% scattered changes about half
 * the blocks are clean, and leaving too early costs a mispredicted exit and
 * a failed skip each time (measured: 2 about 8% slower than 4 at 1%; 8 no
 * faster there and about 8% slower at 0.1%). */
#define MT_SCAN_CLEAN_RUN 4

/* Fixed for one call. */
typedef struct scan_cfg {
    const uint8_t *live;
    uint8_t *shadow, *wb;
    mt_diff_region *runs;
    size_t max, gap;
    size_t fast_n; /* the dense loop runs while n < fast_n (0: never) */
} scan_cfg;

/* What the scan has found so far. */
typedef struct scan_run {
    size_t n;      /* runs[0, n) are reported */
    size_t ps, pe; /* the pending run [ps, pe), when has == 1 */
    size_t has;
} scan_run;

/* Mask of the first len (< 64) bytes: the head or tail of a range. */
MT_SCAN_ATTR static inline uint64_t scan_tail_mask(const uint8_t *a, const uint8_t *b, size_t len)
{
    uint64_t m = 0;
    for (size_t i = 0; i < len; i++)
        m |= (uint64_t)(a[i] != b[i]) << i;
    return m;
}

MT_SCAN_ATTR static inline void scan_init(scan_cfg *c, scan_run *r, const mt_diff_scan *sc)
{
    *c = (scan_cfg){.live = sc->live, .shadow = sc->shadow, .wb = sc->wb, .runs = sc->runs,
                    .max = sc->max, .gap = sc->gap};
    *r = (scan_run){.n = sc->n};
    if (r->n > 0) { /* the caller's last run stays open */
        r->n--;
        r->ps = c->runs[r->n].offset;
        r->pe = r->ps + c->runs[r->n].length;
        r->has = 1;
    }
    /* A dense block reports up to two runs and needs a slot for the pending
     * one after them. Write-back stays on the exact path: its copy of the
     * changed bytes walks the mask with branches anyway, and around it the
     * dense loop measured slower than the exact path (0.75x at 0.1%). */
    c->fast_n = c->gap >= 32 && !c->wb && c->max > 2 ? c->max - 2 : 0;
}

/* Walks mask m of the block at pos (bits past the range's end are 0) run by
 * run, recording runs, and stops at a start it has no room for. Returns how
 * many low bits of m it took: 64 for all, else *stop is the start it left. */
MT_SCAN_ATTR static inline unsigned scan_walk(const scan_cfg *c, scan_run *r, uint64_t m, size_t pos,
                                              size_t *stop)
{
    while (m) {
        unsigned b = (unsigned)__builtin_ctzll(m);
        size_t at = pos + b;
        if (!r->has || at - r->pe >= c->gap) {
            if (r->n + r->has >= c->max) {
                *stop = at;
                return b;
            }
            if (r->has)
                c->runs[r->n++] = (mt_diff_region){r->ps, r->pe - r->ps};
            r->ps = at;
            r->has = 1;
        }
        uint64_t rest = ~m & (~0ull << b);
        unsigned e = rest ? (unsigned)__builtin_ctzll(rest) : 64;
        r->pe = pos + e;
        m = e < 64 ? m & (~0ull << e) : 0;
    }
    return 64;
}

/* Mask of the low `bits` (<= 64) bits. */
MT_SCAN_ATTR static inline uint64_t scan_low(unsigned bits) { return bits < 64 ? (1ull << bits) - 1 : ~0ull; }

/* What scan_exact() leaves to its caller. */
enum { SCAN_SKIP, SCAN_DENSE, SCAN_STOPPED };

/* The exact path for whole blocks, from *ppos until MT_SCAN_CLEAN_RUN clean
 * blocks in a row (SCAN_SKIP), or until a second block with changes when
 * the dense loop can take over (SCAN_DENSE; it cannot with a gap < 32, with
 * write-back, without a pending run, or with runs[] nearly full). An
 * isolated change costs less here than an entry into the dense loop, which
 * only pays off where changes are close. A block taken whole is stored whole
 * into the shadow, as in the dense loop; one it stops in gets only the
 * changes below the stop (SCAN_STOPPED, *stop). */
MT_SCAN_ATTR __attribute__((noinline)) static int scan_exact(const scan_cfg *c, scan_run *rp, size_t *ppos,
                                                             size_t end, size_t *stop)
{
    _Alignas(64) uint8_t spill[64];
    const uint8_t *a = c->live;
    uint8_t *b = c->shadow, *wb = c->wb;
    scan_run r = *rp;
    size_t pos = *ppos;
    unsigned clean = 0, dirty = 0;
    int next = SCAN_SKIP;
    while (end - pos >= 64 && clean < MT_SCAN_CLEAN_RUN) {
        scan_blk v;
        uint64_t m = blk_load(a + pos, b + pos, &v);
        pos += 64;
        if (!m) {
            clean++;
            continue;
        }
        clean = 0;
        unsigned took = scan_walk(c, &r, m, pos - 64, stop);
        if (took == 64) {
            blk_store(b + pos - 64, &v);
        } else {
            blk_store(spill, &v);
            m &= scan_low(took);
            mti_copy_masked(b + pos - 64, spill, m);
        }
        if (wb)
            mti_copy_masked(wb + pos - 64, b + pos - 64, m);
        if (took < 64) {
            next = SCAN_STOPPED;
            break;
        }
        if (++dirty >= 2 && r.has && r.n < c->fast_n) {
            next = SCAN_DENSE;
            break;
        }
    }
    *rp = r;
    *ppos = pos;
    return next;
}

/* The dense loop's selects, as masks the compiler cannot see through: given
 * plain ?: on the same condition, it turns them back into a branch on it,
 * which is what the loop exists to avoid. */
MT_SCAN_ATTR static inline size_t scan_opaque(size_t x)
{
    __asm__("" : "+r"(x));
    return x;
}

/* mask (all ones or zero) ? a : b */
MT_SCAN_ATTR static inline uintptr_t scan_pick(uintptr_t mask, uintptr_t a, uintptr_t b)
{
    return b ^ ((a ^ b) & mask);
}

#ifndef MT_SCAN_STORE_CHANGED
#define MT_SCAN_STORE_CHANGED 0
#endif

/* Stores a dense-loop block into the shadow: only its changed bytes where
 * the kernel can (a clean block then stores nothing), else the whole block,
 * redirected to `spill` when it is clean so its shadow line stays clean. */
MT_SCAN_ATTR static inline void scan_store_dense(uint8_t *shadow, uint8_t *spill, const scan_blk *v,
                                                 uint64_t m, size_t dirty)
{
#if MT_SCAN_STORE_CHANGED
    (void)spill, (void)dirty;
    blk_store_changed(shadow, v, m);
#else
    (void)m;
    blk_store((uint8_t *)scan_pick(dirty, (uintptr_t)shadow, (uintptr_t)spill), v);
#endif
}

/* The runs of one block with changes (m != 0) at pos, given the pending
 * run *r (its start recorded, its end *pe so far) and room up to r[2].
 * While the dense loop runs, a run's length field holds its end instead;
 * scan_dense() converts them on the way out. A boundary, the end of one run
 * and the start of the next, is recorded with two stores into r[0].length
 * and r[1].offset and a step of r by 0 or 1 (0: the stores land in pending
 * or free slots and are overwritten later). A block holds at most two run
 * starts:
 *  - its first change, unless it is less than gap after the pending run;
 *  - the change after a stretch of gap or more equal bytes inside the block.
 *    Such a stretch lies between two changes, so within bytes [1, 62], and
 *    being 32 bytes or longer it covers bytes 31 and 32: it can only be the
 *    stretch around them, measured by counting zero bits from bit 31 down
 *    and from bit 32 up (a sentinel bit makes either count 32 when no change
 *    lies that way, which then rules the stretch out). */
MT_SCAN_ATTR static inline mt_diff_region *scan_wide(mt_diff_region *r, size_t gap, size_t *pe, uint64_t m,
                                                     size_t pos)
{
    size_t first = pos + (unsigned)__builtin_ctzll(m);
    r[0].length = *pe;
    r[1].offset = first;
    r += first - *pe >= gap;

    size_t down = (unsigned)__builtin_clzll(m << 32 | 1ull << 31);
    size_t up = (unsigned)__builtin_ctzll(m >> 32 | 1ull << 32);
    r[0].length = pos + 32 - down;
    r[1].offset = pos + 32 + up;
    r += (down + up >= gap) & (((down | up) & 32) == 0);

    *pe = pos + 64 - (unsigned)__builtin_clzll(m);
    return r;
}

/* Blocks per stretch of the dense loop: masks of a stretch are kept in
 * registers' reach (128 bytes on the stack), and the walk over its blocks
 * with changes ends with one mispredicted exit per stretch. */
#define MT_SCAN_STRETCH 16

/* Dense blocks from *pos while there is a pending run, room for two runs per
 * block and 64 bytes left, a stretch of MT_SCAN_STRETCH blocks at a time,
 * until a stretch ends with MT_SCAN_CLEAN_RUN clean blocks. Two passes per
 * stretch. The first compares every block, stores it (scan_store_dense) and
 * keeps its mask, plus a bit per block with changes; it has no branch on the
 * data. The second visits only the blocks with changes, by counting the
 * bits (at 1% scattered changes about half the blocks are clean, and a clean
 * block changes no run: it only lengthens the distance from the pending
 * run's end, which the next change measures from its position anyway).
 * The earlier single pass spent the boundary work on clean blocks too:
 * about 80 instructions per block, which bound it below the memory's speed
 * (docs/diff.md). Not inlined: on its own, the loop gets the registers it
 * needs for its state. */
MT_SCAN_ATTR __attribute__((noinline)) static void scan_dense(const scan_cfg *c, scan_run *rp, size_t *ppos,
                                                              size_t end)
{
    _Alignas(64) uint8_t spill[64];
    uint64_t masks[MT_SCAN_STRETCH];
    const uint8_t *a = c->live;
    uint8_t *b = c->shadow;
    size_t gap = c->gap, pos = *ppos, pe = rp->pe;
    mt_diff_region *first = c->runs + rp->n, *r = first;
    /* Each block takes at most two slots: one bound for room and range. */
    size_t blocks = (c->fast_n - rp->n + 1) / 2, left = (end - pos) / 64;
    size_t budget = blocks < left ? blocks : left;
    r->offset = rp->ps;
    while (budget > 0) {
        size_t nb = budget < MT_SCAN_STRETCH ? budget : MT_SCAN_STRETCH;
        uint32_t dirty = 0;
        for (size_t j = 0; j < nb; j++) {
            scan_blk v;
            uint64_t m = blk_load(a + pos + 64 * j, b + pos + 64 * j, &v);
            scan_store_dense(b + pos + 64 * j, spill, &v, m, scan_opaque(0 - (size_t)(m != 0)));
            masks[j] = m;
            dirty |= (uint32_t)(m != 0) << j;
        }
        for (uint32_t bits = dirty; bits; bits &= bits - 1) {
            unsigned j = (unsigned)__builtin_ctz(bits);
            r = scan_wide(r, gap, &pe, masks[j], pos + 64 * (size_t)j);
        }
        pos += 64 * nb;
        budget -= nb;
        if (nb >= MT_SCAN_CLEAN_RUN && (dirty >> (nb - MT_SCAN_CLEAN_RUN)) == 0)
            break; /* clean memory again: back to the 128-byte skip */
    }
    for (mt_diff_region *q = first; q < r; q++)
        q->length -= q->offset;
    *rp = (scan_run){(size_t)(r - c->runs), r->offset, pe, 1};
    *ppos = pos;
}

/* Fewer than 64 bytes at pos, compared byte by byte: the head before the
 * first shadow cache line and the tail. Their changes are copied from the
 * live memory, which may hold newer values by now; they are reported either
 * way. Returns 1 when the scan stopped (*stop). */
MT_SCAN_ATTR static int scan_bytes(const scan_cfg *c, scan_run *r, size_t pos, size_t len, size_t *stop)
{
    uint64_t m = scan_tail_mask(c->live + pos, c->shadow + pos, len);
    unsigned took = scan_walk(c, r, m, pos, stop);
    m &= scan_low(took);
    mti_copy_masked(c->shadow + pos, c->live + pos, m);
    if (c->wb)
        mti_copy_masked(c->wb + pos, c->shadow + pos, m);
    return took < 64;
}

MT_SCAN_ATTR size_t MT_SCAN_NAME(mt_diff_scan *sc, size_t pos, size_t end)
{
    scan_cfg c;
    scan_run r;
    scan_init(&c, &r, sc);
    const uint8_t *a = c.live, *b = c.shadow;
    size_t stop = end;
    /* Blocks on the shadow's cache lines: a block stored whole into the
     * shadow then makes one line dirty, not parts of two (a clean line made
     * dirty costs a write to memory for nothing). */
    size_t head = (size_t)(0 - (uintptr_t)(b + pos)) & 63;
    if (head && end - pos > head) {
        if (scan_bytes(&c, &r, pos, head, &stop))
            goto done;
        pos += head;
    }
    while (pos < end) {
        while (end - pos >= 128 && block_equal128(a + pos, b + pos))
            pos += 128;
        if (end - pos >= 64) {
            int next = scan_exact(&c, &r, &pos, end, &stop);
            if (next == SCAN_STOPPED)
                break;
            if (next == SCAN_DENSE && end - pos >= 64)
                scan_dense(&c, &r, &pos, end);
            continue;
        }
        if (scan_bytes(&c, &r, pos, end - pos, &stop))
            break;
        pos = end;
    }
done:
    if (r.has)
        c.runs[r.n++] = (mt_diff_region){r.ps, r.pe - r.ps};
    sc->n = r.n;
    return stop;
}
