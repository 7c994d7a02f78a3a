/* The cached page size (see page.h). */
#include "page.h"

#include <stdatomic.h>
#include <unistd.h>

size_t mti_page_size(void)
{
    /* relaxed: every thread computes the same value; a race only repeats
     * the sysconf call. */
    static _Atomic size_t cached;
    size_t ps = atomic_load_explicit(&cached, memory_order_relaxed);
    if (!ps) {
        ps = (size_t)sysconf(_SC_PAGESIZE);
        atomic_store_explicit(&cached, ps, memory_order_relaxed);
    }
    return ps;
}
