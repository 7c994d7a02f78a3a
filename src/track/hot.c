/* Hot pages (MT_RANGE_HOT_PAGES): a page written in HOT_STREAK consecutive
 * collect passes stops being re-armed. It stays writable and is reported by
 * every pass whether written or not (the caller diffs it), so a memory
 * rewritten every frame costs no fault per page per frame. Every HOT_PROBE
 * passes a hot page is re-armed once (staggered by groups of 64 pages, so a
 * frame faults on 1/HOT_PROBE of them): if it faults before the next pass it
 * stays hot, else it is cold again.
 *
 * Why this never loses a write: a hot page is reported by every pass, so a
 * write to it at any time is reported by the pass it happens in or the next
 * one, as for a cold page. What a hot page gives up is only the knowledge
 * of whether it was written (mt_tracker_peek answers "written").
 *
 * Pages the range shares with other memory (a partial page at either end)
 * never become hot: leaving them writable would hide the neighbour's writes
 * from its own tracking. State is a hint kept with relaxed atomics:
 * concurrent collects of one range may misjudge a page's heat, never its
 * reporting. */
#include "internal.h"

#define HOT_STREAK 3u
#define HOT_PROBE 16u
#define HEAT_LAST 0xffu  /* low byte of the pass that last reported the page */
#define HEAT_STREAK_SHIFT 8
#define HEAT_STREAK_MAX 15u
#define HEAT_HOT 0x8000u

static int eligible(const mt_range *r, size_t p)
{
    if (p == 0 && r->start != r->span_start)
        return 0;
    return !(p == r->npages - 1 && r->end != r->span_end);
}

void mti_hot_add_window(mt_range *r, size_t w0, size_t nw, uint64_t *local, uint32_t pass)
{
    for (size_t i = 0; i < nw; i++) {
        uint64_t hot = atomic_load_explicit(&r->hot[w0 + i], memory_order_relaxed);
        for (uint64_t x = hot; x; x &= x - 1) {
            size_t p = (w0 + i) * 64 + (size_t)__builtin_ctzll(x);
            unsigned h = atomic_load_explicit(&r->heat[p], memory_order_relaxed);
            if ((h & HEAT_LAST) != (pass & HEAT_LAST))
                continue;
            /* Reported earlier in this pass (the caller's array filled up
             * and it called again): not again, or a pass of hot pages would
             * never end. The bit makes the next pass report it whatever
             * becomes of the page meanwhile. */
            hot &= ~(1ull << (p % 64));
            local[i] &= ~(1ull << (p % 64));
            mti_bits_set(r->bits, p);
        }
        local[i] |= hot;
    }
}

int mti_hot_keep(mt_range *r, size_t p, uint32_t pass)
{
    unsigned h = atomic_load_explicit(&r->heat[p], memory_order_relaxed);
    unsigned last = h & HEAT_LAST, streak = (h >> HEAT_STREAK_SHIFT) & HEAT_STREAK_MAX;
    if (last == ((pass - 1) & HEAT_LAST))
        streak = streak < HEAT_STREAK_MAX ? streak + 1 : HEAT_STREAK_MAX;
    else if (last != (pass & HEAT_LAST) || streak == 0)
        streak = 1;
    int probe = (pass + (uint32_t)(p >> 6)) % HOT_PROBE == 0;
    int keep = streak >= HOT_STREAK && !probe && eligible(r, p);
    atomic_store_explicit(&r->heat[p],
                          (uint16_t)((pass & HEAT_LAST) | streak << HEAT_STREAK_SHIFT | (keep ? HEAT_HOT : 0)),
                          memory_order_relaxed);
    uint64_t bit = 1ull << (p % 64);
    if (keep)
        atomic_fetch_or_explicit(&r->hot[p / 64], bit, memory_order_relaxed);
    else if (h & HEAT_HOT)
        atomic_fetch_and_explicit(&r->hot[p / 64], ~bit, memory_order_relaxed);
    return keep;
}

int mti_hot_any(const mt_range *r, size_t first, size_t last)
{
    if (!r->hot)
        return 0;
    for (size_t p = first; p <= last; p++)
        if (atomic_load_explicit(&r->hot[p / 64], memory_order_relaxed) >> (p % 64) & 1)
            return 1;
    return 0;
}

uint32_t mti_hot_pass_begin(mt_range *r, uint64_t sweep)
{
    /* A later call of the collect_all sweep that already visited r goes on
     * with r's pass. Its first visit starts one, whichever call of the
     * sweep reaches r first: a sweep whose first calls were filled by the
     * ranges before r must still report r's hot pages. */
    if (sweep) {
        if (atomic_exchange_explicit(&r->sweep_seen, sweep, memory_order_relaxed) == sweep)
            return atomic_load_explicit(&r->pass, memory_order_relaxed);
    }
    if (atomic_load_explicit(&r->pass_open, memory_order_relaxed))
        return atomic_load_explicit(&r->pass, memory_order_relaxed);
    return atomic_fetch_add_explicit(&r->pass, 1, memory_order_relaxed) + 1;
}

void mti_hot_pass_end(mt_range *r, int full)
{
    atomic_store_explicit(&r->pass_open, full, memory_order_relaxed);
}

size_t mti_hot_count(const mt_range *r)
{
    size_t n = 0;
    for (size_t i = 0; r->hot && i < r->nwords; i++)
        n += (size_t)__builtin_popcountll(atomic_load_explicit(&r->hot[i], memory_order_relaxed));
    return n;
}
