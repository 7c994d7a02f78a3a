/* The application's own memory calls on what may be tracked memory:
 * mprotect, munmap, mremap, madvise, and mmap with MAP_FIXED (which replaces
 * whatever was mapped there). With a tracker attached they go to track's
 * hooks, which make the real call themselves, ordered with the tracker's
 * state (track/hooks.c): the application's protection is kept per page,
 * pages zeroed behind the tracker's back are reported, unmapped pages are
 * never touched again. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>

#include "preload.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

MTP_EXPORT int mprotect(void *addr, size_t len, int prot)
{
    const mt_preload_hooks *h = mtp_get_hooks();
    return h ? h->mprotect(addr, len, prot) : REAL(mprotect)(addr, len, prot);
}

MTP_EXPORT int munmap(void *addr, size_t len)
{
    const mt_preload_hooks *h = mtp_get_hooks();
    return h ? h->munmap(addr, len) : REAL(munmap)(addr, len);
}

MTP_EXPORT int madvise(void *addr, size_t len, int advice)
{
    const mt_preload_hooks *h = mtp_get_hooks();
    return h ? h->madvise(addr, len, advice) : REAL(madvise)(addr, len, advice);
}

MTP_EXPORT void *mremap(void *old, size_t old_len, size_t new_len, int flags, ...)
{
    void *new_addr = NULL;
    if (flags & MREMAP_FIXED) {
        va_list ap;
        va_start(ap, flags);
        new_addr = va_arg(ap, void *);
        va_end(ap);
    }
    const mt_preload_hooks *h = mtp_get_hooks();
    if (h)
        return h->mremap(old, old_len, new_len, flags, new_addr);
    return REAL(mremap)(old, old_len, new_len, flags, new_addr);
}

static int replaces(int flags)
{
    return (flags & MAP_FIXED) && !(flags & MAP_FIXED_NOREPLACE);
}

MTP_EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    const mt_preload_hooks *h = mtp_get_hooks();
    if (h && replaces(flags))
        return h->mmap_fixed(addr, len, prot, flags, fd, off);
    return REAL(mmap)(addr, len, prot, flags, fd, off);
}

MTP_EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off64_t off)
{
    const mt_preload_hooks *h = mtp_get_hooks();
    if (h && replaces(flags))
        return h->mmap_fixed(addr, len, prot, flags, fd, (off_t)off);
    return REAL(mmap64)(addr, len, prot, flags, fd, off);
}
