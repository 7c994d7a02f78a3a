/* Validity runs: which locations hold the latest content of each range of a
 * root buffer.
 *
 * A sorted array of (start, mask) with neighbours of different masks. This
 * is the seed's "latest version + version of each instance", per range:
 * an instance is at the latest version over a range exactly when its bit is
 * in the range's mask, and that bit test is the only question the planner
 * asks about versions. Most buffers have one run (valid everywhere it was
 * used since the last write) or a few, so the array stays inline and lookups
 * are a binary search over a handful of entries. Updates split at most two
 * runs and merge what became equal, so the array never grows past twice the
 * number of distinct ranges ever written. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

void mti_coh_runs_init(coh_runs *r, coh_run *inl, uint64_t size, uint64_t mask)
{
    r->v = inl;
    r->cap = COH_RUNS_INLINE;
    r->n = 1;
    r->size = size;
    r->v[0] = (coh_run){0, mask};
}

void mti_coh_runs_free(coh_runs *r)
{
    if (r->cap != COH_RUNS_INLINE)
        free(r->v);
    r->v = NULL;
    r->n = 0;
    r->cap = 0;
}

int mti_coh_runs_grow(coh_runs *r, uint32_t extra)
{
    if (r->n + extra <= r->cap)
        return 0;
    /* A buffer leaving its inline storage is being cut by ranges: start at
     * 32 runs (512 bytes), which most never outgrow, rather than doubling
     * through 4, 8 and 16 (a malloc, copy and free each, on the planner's
     * path). Line-aligned: the binary search touches fewer lines. */
    uint64_t cap = r->cap == COH_RUNS_INLINE ? 32 : r->cap;
    while (cap < (uint64_t)r->n + extra)
        cap *= 2;
    if (cap > UINT32_MAX)
        return -ENOMEM;
    coh_run *v = aligned_alloc(64, cap * sizeof *v);
    if (!v)
        return -ENOMEM;
    memcpy(v, r->v, r->n * sizeof *v);
    if (r->cap != COH_RUNS_INLINE)
        free(r->v);
    r->v = v;
    r->cap = (uint32_t)cap;
    return 0;
}

/* Makes `off` (0 < off < size) a run boundary; returns the index of the run
 * starting there. Needs one free entry. */
static uint32_t split_at(coh_runs *r, uint64_t off)
{
    uint32_t k = mti_coh_runs_find(r, off);
    if (r->v[k].start == off)
        return k;
    memmove(&r->v[k + 2], &r->v[k + 1], (r->n - k - 1) * sizeof *r->v);
    r->v[k + 1] = (coh_run){off, r->v[k].mask};
    r->n++;
    return k + 1;
}

/* Merges equal neighbours among runs [lo, hi] (indices clamped). */
static void merge_window(coh_runs *r, uint32_t lo, uint32_t hi)
{
    if (hi >= r->n)
        hi = r->n - 1;
    if (lo >= hi)
        return;
    uint32_t w = lo;
    for (uint32_t i = lo + 1; i <= hi; i++)
        if (r->v[i].mask != r->v[w].mask)
            r->v[++w] = r->v[i];
    uint32_t removed = hi - w;
    if (!removed)
        return;
    memmove(&r->v[w + 1], &r->v[hi + 1], (r->n - hi - 1) * sizeof *r->v);
    r->n -= removed;
}

/* The general update: split, apply, merge (any window size). */
static void update_split(coh_runs *r, uint64_t a, uint64_t b, uint64_t and_mask, uint64_t or_mask)
{
    uint32_t i = a > 0 ? split_at(r, a) : 0;
    uint32_t j = b < r->size ? split_at(r, b) : r->n; /* first run not updated */
    for (uint32_t k = i; k < j; k++)
        r->v[k].mask = (r->v[k].mask & and_mask) | or_mask;
    merge_window(r, i > 0 ? i - 1 : 0, j);
}

#define UPDATE_WINDOW 32

/* Runs [from, to) become the k runs of `with` (one memmove; the room for a
 * longer result was made by the caller). Inlined: both callers are on the
 * planner's per-argument path, where a call measured +22 instructions/arg. */
static inline __attribute__((always_inline)) void splice(coh_runs *r, uint32_t from, uint32_t to, const coh_run *with, uint32_t k)
{
    /* The runs after the window move by a few places: a loop (in the
     * direction that does not overwrite what it still reads) costs less
     * than a call to memmove for the handful of runs a buffer has. */
    uint32_t tail = r->n - to;
    coh_run *dst = &r->v[from + k], *src = &r->v[to];
    if (k < to - from)
        for (uint32_t j = 0; j < tail; j++)
            dst[j] = src[j];
    else if (k > to - from)
        for (uint32_t j = tail; j-- > 0;)
            dst[j] = src[j];
    for (uint32_t j = 0; j < k; j++)
        r->v[from + j] = with[j];
    r->n = r->n - (to - from) + k;
}

/* mask := m over [a, b) (a write): the runs it covers become one, so the
 * result is the runs before it, at most one run cut at a, the new run, at
 * most one cut at b and the runs after, merged at both seams; one memmove. */
static void set_range(coh_runs *r, uint64_t a, uint64_t b, uint64_t m, uint32_t i0)
{
    uint32_t i1 = i0;
    while (i1 + 1 < r->n && r->v[i1 + 1].start < b) /* the few runs it covers */
        i1++;
    uint64_t tail_mask = r->v[i1].mask;
    int cut_tail = b < mti_coh_run_end(r, i1); /* [b, end of i1) keeps tail_mask */
    /* Runs kept before: [0, keep), the new run merging into v[keep - 1]. */
    uint32_t keep = r->v[i0].start < a ? i0 + 1 : i0;
    int merge_prev = keep > 0 && r->v[keep - 1].mask == m;
    /* Runs kept after: [after, n), a cut tail entering as one more. */
    uint32_t after = i1 + 1;
    int tail = cut_tail && tail_mask != m;
    uint64_t last = tail ? tail_mask : m; /* the mask before v[after] */
    if (after < r->n && r->v[after].mask == last)
        after++; /* equal to what precedes it: merged away */
    coh_run mid[2];
    uint32_t k = 0;
    if (!merge_prev)
        mid[k++] = (coh_run){a, m};
    if (tail)
        mid[k++] = (coh_run){b, tail_mask};
    splice(r, keep, after, mid, k);
}

void mti_coh_runs_update(coh_runs *r, uint64_t a, uint64_t b, uint64_t and_mask, uint64_t or_mask)
{
    mti_coh_runs_update_at(r, a, b, and_mask, or_mask, COH_NO_HINT);
}

void mti_coh_runs_update_at(coh_runs *r, uint64_t a, uint64_t b, uint64_t and_mask,
                            uint64_t or_mask, uint32_t hint)
{
    if (a >= b)
        return;
    /* Whole buffer, one run: the common case costs two stores. */
    if (r->n == 1 && a == 0 && b >= r->size) {
        r->v[0].mask = (r->v[0].mask & and_mask) | or_mask;
        return;
    }
    uint32_t i0 = mti_coh_runs_find_from(r, a, hint), i1 = i0;
    if (!and_mask) {
        set_range(r, a, b, or_mask, i0);
        return;
    }
    /* One pass over the runs i0..i1 that overlap [a, b): their new runs,
     * merged with each other and with the run before them, go to `out`,
     * then replace them (the run after them dropped when it merges too). A
     * window too large for `out` takes the split-and-merge path. */
    coh_run out[UPDATE_WINDOW];
    uint32_t k = 0;
    int have_prev = i0 > 0, changed = 0;
    uint64_t prev = have_prev ? r->v[i0 - 1].mask : 0;
#define EMIT(st, msk)                                                        \
    do {                                                                     \
        uint64_t m_ = (msk);                                                 \
        if (k ? out[k - 1].mask != m_ : !(have_prev && prev == m_))          \
            out[k++] = (coh_run){(st), m_};                                  \
    } while (0)
    if (r->v[i0].start < a)
        EMIT(r->v[i0].start, r->v[i0].mask);
    for (;;) {
        if (k + 3 > UPDATE_WINDOW) {
            update_split(r, a, b, and_mask, or_mask);
            return;
        }
        uint64_t m = r->v[i1].mask, nm = (m & and_mask) | or_mask;
        changed |= nm != m;
        EMIT(r->v[i1].start > a ? r->v[i1].start : a, nm);
        if (i1 + 1 >= r->n || r->v[i1 + 1].start >= b)
            break;
        i1++;
    }
    if (!changed) /* a read of a range valid there already: no split */
        return;
    if (mti_coh_run_end(r, i1) > b)
        EMIT(b, r->v[i1].mask);
#undef EMIT
    uint32_t old_end = i1 + 1; /* first run kept after the window */
    if (old_end < r->n) {
        uint64_t last = k ? out[k - 1].mask : prev;
        if ((k || have_prev) && last == r->v[old_end].mask)
            old_end++; /* it merges into the window's last run */
    }
    splice(r, i0, old_end, out, k);
}

void mti_coh_runs_set_at(coh_runs *r, uint64_t a, uint64_t b, uint64_t m, uint32_t hint)
{
    if (a >= b)
        return;
    if (r->n == 1 && a == 0 && b >= r->size) {
        r->v[0].mask = m;
        return;
    }
    set_range(r, a, b, m, mti_coh_runs_find_from(r, a, hint));
}

void mti_coh_runs_mark_at(coh_runs *r, uint64_t a, uint64_t b, uint64_t bit, uint32_t hint)
{
    if (a >= b)
        return;
    coh_run *v = r->v;
    uint32_t n = r->n;
    if (n == 1 && a == 0 && b >= r->size) {
        v[0].mask |= bit;
        return;
    }
    uint32_t i0 = mti_coh_runs_find_from(r, a, hint), i1 = i0;
    while (i1 + 1 < n && v[i1 + 1].start < b) /* the few runs it covers */
        i1++;
    if (i1 - i0 + 3 > UPDATE_WINDOW) {
        update_split(r, a, b, ~0ull, bit);
        return;
    }
    /* The window's new runs go to `out`, each only when its mask differs
     * from the one before it (`last`), then replace runs [from, old_end).
     * A run cut at a stays where it is, its part from a on entering as a
     * new run; before the first run, a mask no run of the window can have
     * (the complement of its new mask). */
    coh_run out[UPDATE_WINDOW];
    uint32_t k = 0, from = i0, j = i0;
    uint64_t m0 = v[i0].mask, last, changed = 0;
    if (v[i0].start < a) {
        last = m0;
        from = j = i0 + 1;
        changed = ~m0 & bit;
        if (changed) {
            out[k++] = (coh_run){a, m0 | bit};
            last = m0 | bit;
        }
    } else
        last = i0 ? v[i0 - 1].mask : ~(m0 | bit);
    for (; j <= i1; j++) {
        uint64_t m = v[j].mask, nm = m | bit;
        changed |= ~m & bit;
        if (nm != last) {
            out[k++] = (coh_run){v[j].start, nm};
            last = nm;
        }
    }
    if (!changed) /* valid there already: nothing to split or merge */
        return;
    uint64_t m1 = v[i1].mask;
    if (!(m1 & bit) && b < mti_coh_run_end(r, i1)) { /* [b, end) keeps its mask */
        out[k++] = (coh_run){b, m1};
        last = m1;
    }
    uint32_t old_end = i1 + 1; /* first run kept after the window */
    if (old_end < n && v[old_end].mask == last)
        old_end++; /* it merges into the window's last run */
    splice(r, from, old_end, out, k);
}

int mti_coh_runs_set_many(coh_runs *r, const coh_range *rg, size_t n, uint64_t mask)
{
    if (!n)
        return 0;
    if (n == 1) {
        if (mti_coh_runs_reserve(r, 2))
            return -ENOMEM;
        mti_coh_runs_update(r, rg[0].a, rg[0].b, 0, mask);
        return 0;
    }
    /* Rebuild the window of runs the ranges touch into a scratch array, then
     * splice it in: O(window + n) however many ranges there are. */
    uint32_t i0 = mti_coh_runs_find(r, rg[0].a);
    uint32_t i1 = mti_coh_runs_find(r, rg[n - 1].b - 1);
    size_t cap = (size_t)(i1 - i0 + 1) + 2 * n + 1;
    coh_run *out = malloc(cap * sizeof *out);
    if (!out)
        return -ENOMEM;
    size_t k = 0;
#define EMIT(st, m)                                                  \
    do {                                                             \
        uint64_t m_ = (m);                                           \
        if (!(k && out[k - 1].mask == m_))                           \
            out[k++] = (coh_run){(st), m_};                          \
    } while (0)
    uint32_t i = i0;
    uint64_t pos = r->v[i0].start;
    for (size_t q = 0; q < n; q++) {
        while (pos < rg[q].a) {
            uint64_t end = mti_coh_run_end(r, i);
            EMIT(pos, r->v[i].mask);
            if (end <= rg[q].a) {
                pos = end;
                i++;
            } else
                pos = rg[q].a;
        }
        EMIT(rg[q].a, mask);
        pos = rg[q].b;
        while (i <= i1 && mti_coh_run_end(r, i) <= pos)
            i++;
    }
    while (i <= i1) {
        uint64_t end = mti_coh_run_end(r, i);
        if (pos < end)
            EMIT(pos, r->v[i].mask);
        pos = end;
        i++;
    }
#undef EMIT
    uint32_t old = i1 - i0 + 1;
    if (k > old && mti_coh_runs_reserve(r, (uint32_t)(k - old))) {
        free(out);
        return -ENOMEM;
    }
    memmove(&r->v[i0 + k], &r->v[i1 + 1], (r->n - i1 - 1) * sizeof *r->v);
    memcpy(&r->v[i0], out, k * sizeof *out);
    r->n = r->n - old + (uint32_t)k;
    free(out);
    merge_window(r, i0 > 0 ? i0 - 1 : 0, i0 + (uint32_t)k);
    return 0;
}

void mti_coh_runs_masks(const coh_runs *r, uint64_t a, uint64_t b, uint64_t *all, uint64_t *any)
{
    uint64_t and_m = ~0ull, or_m = 0;
    for (uint32_t k = mti_coh_runs_find(r, a); k < r->n && r->v[k].start < b; k++) {
        and_m &= r->v[k].mask;
        or_m |= r->v[k].mask;
    }
    if (all)
        *all = and_m;
    if (any)
        *any = or_m;
}

uint64_t mti_coh_runs_lost(const coh_runs *r, uint64_t a, uint64_t b)
{
    uint64_t lost = 0;
    for (uint32_t k = mti_coh_runs_find(r, a); k < r->n && r->v[k].start < b; k++) {
        if (r->v[k].mask)
            continue;
        uint64_t s = r->v[k].start > a ? r->v[k].start : a;
        uint64_t e = mti_coh_run_end(r, k) < b ? mti_coh_run_end(r, k) : b;
        lost += e - s;
    }
    return lost;
}

int mti_coh_runs_check(const coh_runs *r)
{
    if (r->n == 0 || r->n > r->cap || r->v[0].start != 0)
        return 0;
    for (uint32_t k = 1; k < r->n; k++)
        if (r->v[k].start <= r->v[k - 1].start || r->v[k].start >= r->size ||
            r->v[k].mask == r->v[k - 1].mask)
            return 0;
    return 1;
}
