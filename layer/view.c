/* lt_view_readable, lt_view_snapshot: a memory's window as a capture may read it.
 *
 * A capture reads the memory at times the application did not choose (scan
 * and copy read all of it at each submit, guard the pages written, verify
 * hashes it). A page the application, or a layer below ours, made
 * unreadable would fault into their handler on memtrack's thread: an
 * application's guard page reports a hit it never made, and
 * gfxreconstruct's page guard answers a read fault by unprotecting the page
 * and copying the device's bytes over it, which loses whatever another
 * application thread writes to that page in between (the application reads
 * its own write back lost, and the device gets the stale bytes). So where
 * the window has such pages, the capture reads a snapshot taken through
 * /proc/self/mem (mt_track_read_guarded), which touches no protection and
 * calls no handler; elsewhere it reads the memory itself, as before.
 * mt_track_readable answers "all readable" without a system call while the
 * process sets no protection that forbids reads (docs/layer.md). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "layer.h"

enum { NOTED_GUARDED = 1, NOTED_UNKNOWN = 2, NOTED_OOM = 4, NOTED_REFUSED = 8 };

/* Each note once per memory. */
static int first(lt_memory *m, int what)
{
    if (m->view_noted & what)
        return 0;
    m->view_noted |= what;
    return 1;
}

/* The spans a snapshot must hold for a diff over regs (sorted, disjoint):
 * each region widened by the merge gap (a run the diff merges across two
 * regions reads the bytes between them) and to whole pages, then joined.
 * Returns how many, or 0 when there is no memory for them. */
static size_t spans_for(const mt_diff_region *regs, size_t n, size_t size, mt_track_span **out)
{
    mt_track_span *v = malloc((n ? n : 1) * sizeof *v);
    if (!v)
        return 0;
    size_t gap = lt_cfg()->merge_gap ? lt_cfg()->merge_gap : MT_DIFF_DEFAULT_MERGE_GAP;
    size_t ps = (size_t)sysconf(_SC_PAGESIZE), k = 0;
    for (size_t i = 0; i < n; i++) {
        size_t lo = regs[i].offset > gap ? regs[i].offset - gap : 0;
        size_t hi = regs[i].offset + regs[i].length;
        hi = size - hi > gap ? hi + gap : size;
        lo &= ~(ps - 1);
        hi = size - hi > ps ? (hi + ps - 1) & ~(ps - 1) : size;
        if (k && lo <= v[k - 1].offset + v[k - 1].length)
            v[k - 1].length = (hi > v[k - 1].offset + v[k - 1].length ? hi : v[k - 1].offset + v[k - 1].length) -
                              v[k - 1].offset;
        else
            v[k++] = (mt_track_span){lo, hi - lo};
    }
    *out = v;
    return k;
}

int lt_view_readable(lt_memory *m, const unsigned char *p)
{
    size_t len = (size_t)m->map_size;
    int which = p == m->driver_ptr ? 0 : 1;
    /* The cached answer is for one address and length: it survives an
     * unmap and a map again at the same place (drivers usually hand the
     * same address back), since any protection set there since moved the
     * count it was taken at. */
    if (m->view_at[which] != p || m->view_len[which] != len) {
        m->view_at[which] = p;
        m->view_len[which] = len;
        m->view_seen[which] = 0;
    }
    int r = mt_track_readable(p, len, &m->view_seen[which]);
    if (r < 0 && first(m, NOTED_UNKNOWN)) /* the list of mappings could not be read: as before */
        lt_rec_note(m->id, "view-unknown", "memory %llu: which of its pages can be read is unknown (%s): "
                    "read in place", (unsigned long long)m->id, mt_strerror(r));
    return r != 0;
}

/* Whether every region lies inside the union of dev (both sorted, disjoint). */
static int inside(const mt_diff_region *regs, size_t n, const mt_diff_region *dev, size_t ndev)
{
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        while (j < ndev && dev[j].offset + dev[j].length <= regs[i].offset)
            j++;
        if (j == ndev || dev[j].offset > regs[i].offset ||
            dev[j].offset + dev[j].length < regs[i].offset + regs[i].length)
            return 0;
    }
    return 1;
}

const unsigned char *lt_view_snapshot(lt_memory *m, const unsigned char *p, const mt_diff_region *regs, size_t n,
                                      const mt_diff_region *dev, size_t ndev)
{
    size_t len = (size_t)m->map_size;
    if (regs && inside(regs, n, dev, ndev))
        return p; /* only what the device may have written: read in place */
    mt_track_span whole = {0, len}, *spans = &whole;
    size_t ns = 1;
    if (regs && !(ns = spans_for(regs, n, len, &spans)))
        spans = NULL;
    if (m->stage_len < len) {
        lt_view_free(m);
        m->stage = malloc(len);
        if (m->stage) {
            m->stage_len = len;
            lt_stat_add(LT_ST_EXTRA_BYTES, (int64_t)len); /* memory the capture adds (extra_bytes_peak) */
        }
    }
    if (!m->stage || !spans) {
        if (spans != &whole)
            free(spans);
        if (first(m, NOTED_OOM))
            lt_rec_note(m->id, "view-oom", "memory %llu has pages protected against reads, and no memory "
                        "is left for a snapshot of them: read in place (their owner's fault handler "
                        "runs)", (unsigned long long)m->id);
        return p;
    }
    int rc = mt_track_read_guarded(m->stage, p, spans, ns);
    if (spans != &whole)
        free(spans);
    if (rc) {
        if (first(m, NOTED_REFUSED))
            lt_rec_note(m->id, "view-refused", "memory %llu has pages protected against reads, and the "
                        "kernel refused to read them past the protection, or its driver would read them "
                        "at the wrong place (%s): read in place (their owner's fault handler runs)",
                        (unsigned long long)m->id, mt_strerror(rc));
        return p;
    }
    /* Where the device may have written, the bytes behind a protection can
     * be stale: a layer below that protects its copy of the memory fills it
     * from the device's memory on a read fault (gfxreconstruct's page
     * guard). There the capture reads in place, as the application would,
     * and the layer's handler runs. */
    for (size_t i = 0; i < ndev; i++)
        if (dev[i].offset < len)
            memcpy(m->stage + dev[i].offset, p + dev[i].offset,
                   dev[i].length < len - dev[i].offset ? dev[i].length : len - dev[i].offset);
    if (first(m, NOTED_GUARDED))
        lt_rec_note(m->id, "view-guarded", "memory %llu has pages protected against reads (by the "
                    "application or a layer below): captures read them through /proc/self/mem, "
                    "never faulting into their handler, except where the device may have written",
                    (unsigned long long)m->id);
    return m->stage;
}

void lt_view_free(lt_memory *m)
{
    if (m->stage)
        lt_stat_add(LT_ST_EXTRA_BYTES, -(int64_t)m->stage_len);
    free(m->stage);
    m->stage = NULL;
    m->stage_len = 0;
}
