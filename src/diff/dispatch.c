/* Runtime choice of the compare kernel: the best one the CPU runs, unless
 * $MT_DIFF_ISA names another (benchmarks) or a test forced one. */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "kernel.h"

/* Every thread that finds it NULL computes the same answer, so a race only
 * repeats the choice. Release/acquire: the pointer is published after the
 * kernel descriptor (static const, but the pairing keeps TSan's model exact). */
static _Atomic(const mt_diff_kernel *) g_kernel;

static const mt_diff_kernel *find(const char *name)
{
    const mt_diff_kernel *k[8];
    size_t n = mti_diff_kernels_available(k, 8);
    for (size_t i = 0; i < n; i++)
        if (strcmp(k[i]->name, name) == 0)
            return k[i];
    return NULL;
}

static const mt_diff_kernel *choose(void)
{
    const char *env = getenv("MT_DIFF_ISA");
    const mt_diff_kernel *k = env && *env ? find(env) : NULL;
    if (k)
        return k;
    const mt_diff_kernel *all[8];
    size_t n = mti_diff_kernels_available(all, 8);
    return all[n - 1]; /* best last; never empty */
}

const mt_diff_kernel *mti_diff_kernel_get(void)
{
    const mt_diff_kernel *k = atomic_load_explicit(&g_kernel, memory_order_acquire);
    if (!k) {
        k = choose();
        atomic_store_explicit(&g_kernel, k, memory_order_release);
    }
    return k;
}

int mti_diff_kernel_force(const char *name)
{
    const mt_diff_kernel *k = find(name);
    if (!k)
        return -ENOTSUP;
    atomic_store_explicit(&g_kernel, k, memory_order_release);
    return 0;
}

const char *mt_diff_isa(void) { return mti_diff_kernel_get()->name; }
