/* Real protections of tracked pages, derived from the page states.
 *
 * Memtrack never widens or narrows what the application asked for: a page's
 * protection is either the application's (writable, or not tracked any
 * more) or the application's minus PROT_WRITE (armed). Pages the
 * application unmapped are never touched. Async-signal-safe. */
#define _GNU_SOURCE
#include <errno.h>

#include "internal.h"

static int pinned(const mt_pins *pins, uintptr_t page, uintptr_t page_end)
{
    if (!pins)
        return 0;
    if (pins->all)
        return 1;
    for (int i = 0; i < pins->n; i++)
        if (pins->lo[i] < page_end && pins->hi[i] > page)
            return 1;
    return 0;
}

int mti_protect_pages(const mt_range *r, size_t first, size_t n, int mode, uintptr_t base,
                     const mt_pins *pins)
{
    size_t ps = (size_t)1 << r->page_shift;
    size_t end = first + n;
    int err = 0;
    size_t run = first;
    int run_prot = -1;
    for (size_t i = first; i <= end; i++) {
        int prot = -1; /* -1: not part of a run */
        if (i < end) {
            unsigned st = mti_pstate(r, i);
            uintptr_t page = r->span_start + ((uintptr_t)i << r->page_shift);
            if (st & MT_PS_GONE) {
                prot = -1;
            } else if (mode == MT_PROT_ARMED && pinned(pins, page, page + ps)) {
                /* A kernel write is using it: leave it writable, and keep it
                 * reported until that write has ended. */
                mti_bits_set(r->bits, i);
                prot = -1;
            } else {
                prot = mode == MT_PROT_APP ? (int)(st & MT_PS_PROT) : mti_armed_prot(st);
            }
        }
        if (prot != run_prot || i == end) {
            if (run_prot >= 0 && i > run) {
                int rc = mti_sys_mprotect(base + ((uintptr_t)run << r->page_shift),
                                         (i - run) << r->page_shift, run_prot);
                if (rc && !err)
                    err = rc;
            }
            run = i;
            run_prot = prot;
        }
    }
    return err;
}
