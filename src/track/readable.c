/* mt_track_readable and mt_track_read_guarded: reading memory that someone
 * else may guard against reads.
 *
 * Why: a capture reads the application's mapped memory at times the
 * application did not choose (scan and copy read all of it at each submit).
 * A page made unreadable (PROT_NONE) by the application, or by a layer
 * below memtrack (gfxreconstruct's page guard hands up a shadow of PROT_NONE
 * pages and copies the device's bytes in on a read fault), would fault into
 * their handler on a thread of memtrack's: the application's guard-page
 * handler sees a fault it never caused, and gfxreconstruct's read path
 * (unprotect, then copy the device memory over the page) overwrites a write
 * that another application thread makes to the same page in between, which
 * the application then reads back lost. Such pages are read through
 * /proc/self/mem instead, which the kernel serves past the protection
 * (FOLL_FORCE, as a debugger reads) without any fault or handler.
 *
 * Knowing which pages are unreadable costs a look at the kernel's list of
 * mappings (vmaprot.c). With the interposer attached, every mprotect,
 * mmap(MAP_FIXED) and mremap of the process passes through track's hooks,
 * which count the ones that can take reads away (g_epoch): while the count
 * has not moved since an all-readable answer, the answer stands, with no
 * system call. Without the interposer the first all-readable answer stands
 * for the caller's memory from then on (docs/track.md). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

/* Starts at 1: a caller's cache of 0 means "never asked". */
static _Atomic uint64_t g_epoch = 1;
/* The cache value of an all-readable answer without the interposer. */
#define TRUSTED_WITHOUT_HOOKS UINT64_MAX

void mti_readable_note(int prot)
{
    /* After the real call: a reader that loaded the count before it either
     * saw the new protection or sees the count move at its next look. */
    if (!(prot & PROT_READ))
        atomic_fetch_add_explicit(&g_epoch, 1, memory_order_seq_cst);
}

static void any_unreadable(void *ctx, uintptr_t lo, uintptr_t hi, unsigned prot)
{
    (void)lo, (void)hi;
    if (!(prot & PROT_READ))
        *(int *)ctx = 1;
}

int mt_track_readable(const void *addr, size_t len, uint64_t *seen)
{
    if (!addr || !seen)
        return -EINVAL;
    if (len == 0)
        return 1;
    /* Not mti_preload_link(): without the interposer it looks it up again
     * at every call. Attached when a tracker was created; until then the
     * answer is taken as without it, and looked at again once attached. */
    int hooked = mti_sys_attached();
    uint64_t e = atomic_load_explicit(&g_epoch, memory_order_seq_cst);
    if (*seen == (hooked ? e : TRUSTED_WITHOUT_HOOKS))
        return 1;
    uintptr_t a = (uintptr_t)addr;
    uintptr_t b = a + len < a ? UINTPTR_MAX : a + len;
    uintptr_t pm = (uintptr_t)mti_page_size() - 1;
    uintptr_t hi = b > UINTPTR_MAX - pm ? UINTPTR_MAX & ~pm : (b + pm) & ~pm;
    int unreadable = 0;
    int rc = mti_vma_prot(a & ~pm, hi, any_unreadable, &unreadable);
    if (rc < 0)
        return rc;
    if (unreadable)
        return 0;
    *seen = hooked ? e : TRUSTED_WITHOUT_HOOKS;
    return 1;
}

int mt_track_read_guarded(void *dst, const void *src, const mt_track_span *spans, size_t n)
{
    if (!dst || !src || (!spans && n))
        return -EINVAL;
    /* A driver that reads such a mapping at the wrong place would hand back
     * other pages' bytes without an error: refuse instead. One look at the
     * list of mappings over all the spans. */
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    for (size_t i = 0; i < n; i++)
        if (spans[i].length) {
            uintptr_t a = (uintptr_t)src + spans[i].offset;
            lo = a < lo ? a : lo;
            hi = a + spans[i].length > hi ? a + spans[i].length : hi;
        }
    if (lo < hi && mti_vma_misread(lo, hi) > 0)
        return MT_EUNSUPPORTED;
    /* Kept open for the process (procfd.c: a sandboxed application may
     * refuse opens; a fork child gets its own). System calls go past libc's
     * wrappers, as in vmaprot.c (the interposer watches the application's
     * own use of /proc/self/mem). */
    int priv, fd = mti_procfd_get(MTI_PROCFD_MEM, &priv);
    if (fd < 0)
        return fd;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        size_t done = 0, len = spans[i].length;
        char *to = (char *)dst + spans[i].offset;
        uintptr_t from = (uintptr_t)src + spans[i].offset;
        while (done < len) {
            ssize_t got = syscall(SYS_pread64, fd, to + done, len - done, (off_t)(from + done));
            if (got < 0 && errno == EINTR)
                continue;
            if (got <= 0) { /* not readable that way (device memory, or /proc/self/mem restricted) */
                rc = got < 0 ? -errno : -EIO;
                break;
            }
            done += (size_t)got;
        }
    }
    mti_procfd_put(fd, priv);
    return rc;
}
