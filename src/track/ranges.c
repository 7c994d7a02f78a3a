/* Small operations on ranges and a tracker's sorted table of them, shared by
 * the tracker core, collect, both backends and fork. They live below all of
 * those (they call nothing of track's) so that no two of those files need
 * each other. */
#include "internal.h"

void mti_bits_set_range(_Atomic uint64_t *bits, size_t first, size_t n)
{
    size_t end = first + n;
    while (first < end) {
        size_t w = first / 64, b = first % 64;
        size_t take = 64 - b < end - first ? 64 - b : end - first;
        uint64_t mask = take == 64 ? ~0ull : ((1ull << take) - 1) << b;
        atomic_fetch_or_explicit(&bits[w], mask, memory_order_release);
        first += take;
    }
}

uint32_t mti_track_sorted_lower(const mt_tracker *t, uintptr_t addr)
{
    /* Spans of byte-disjoint ranges are sorted too (span_end non-decreasing). */
    uint32_t lo = 0, hi = t->nsorted;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (t->sorted[mid]->span_end <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

void mti_track_share_page(mt_tracker *t, const mt_range *r, uintptr_t page)
{
    for (uint32_t i = mti_track_sorted_lower(t, page);
         i < t->nsorted && t->sorted[i]->span_start <= page; i++) {
        mt_range *o = t->sorted[i];
        if (o != r && o->backend == MT_TRACK_UFFD)
            mti_bits_set(o->bits, mti_page_index(o, page));
    }
}
