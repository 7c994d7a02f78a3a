/* Cutting one big diff into slices (slices.h). A slice closes once it holds
 * slice_bytes candidate bytes and the next byte to diff is on a later page;
 * a candidate crossing the mark is split at the next page boundary. */
#include "slices.h"

size_t lt_slices_max(size_t total, size_t slice_bytes)
{
    /* Every slice but the last holds slice_bytes or more. */
    return total / slice_bytes + 1;
}

size_t lt_slices_max_cands(size_t total, size_t nc, size_t slice_bytes)
{
    /* Each slice splits at most one candidate in two. */
    return nc + lt_slices_max(total, slice_bytes);
}

size_t lt_slices_cut(size_t size, const mt_diff_region *c, size_t nc, size_t ps, size_t slice_bytes,
                     lt_slice *out, mt_diff_region *oc)
{
    mt_diff_region whole = {0, size};
    const mt_diff_region *src = nc ? c : &whole;
    size_t nsrc = nc ? nc : 1, ns = 0, no = 0, i = 0, at = src[0].offset;
    if (size == 0)
        return 0;
    while (i < nsrc) {
        lt_slice *sl = &out[ns++];
        sl->base = at & ~(ps - 1);
        sl->first = no;
        size_t bytes = 0, end = sl->base;
        while (i < nsrc && (bytes < slice_bytes || at / ps == (end - 1) / ps)) {
            size_t cend = src[i].offset + src[i].length, stop = cend;
            size_t want = bytes < slice_bytes ? slice_bytes - bytes : 1;
            if (cend - at > want) {
                stop = (at + want + ps - 1) & ~(ps - 1);
                if (stop > cend)
                    stop = cend;
            }
            if (nc)
                oc[no++] = (mt_diff_region){at - sl->base, stop - at};
            bytes += stop - at;
            end = stop;
            if (stop < cend)
                at = stop;
            else if (++i < nsrc)
                at = src[i].offset;
        }
        sl->n = no - sl->first;
        sl->size = end - sl->base;
    }
    return ns;
}
