/* mt_track_aliasable: whether memory can change without a write through its
 * own addresses.
 *
 * Why: track sees writes to the tracked addresses only. Memory mapped shared
 * (MAP_SHARED, System V shared memory, a memfd) is also written through its
 * other mappings: a second view in this process, another process, a child
 * after fork; memory backed by a file changes with write(2) to the file,
 * and a private file mapping shows such changes in every page it has not
 * yet copied. None of those touch the tracked page tables, so none is
 * reported (docs/track.md, "Limits"). A user that must not miss them (the
 * coherence module's tracked host buffers) asks here and takes such memory
 * whole instead. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>

#include "internal.h"

static void any_aliasable(void *ctx, uintptr_t lo, uintptr_t hi, unsigned prot)
{
    (void)lo, (void)hi;
    if (prot & (MTI_VMA_SHARED | MTI_VMA_FILE))
        *(int *)ctx = 1;
}

int mt_track_aliasable(const void *addr, size_t len)
{
    if (!addr)
        return -EINVAL;
    if (len == 0)
        return 0;
    uintptr_t a = (uintptr_t)addr;
    uintptr_t b = a + len < a ? UINTPTR_MAX : a + len;
    int found = 0;
    int rc = mti_vma_prot(a, b, any_aliasable, &found);
    return rc < 0 ? rc : found;
}
