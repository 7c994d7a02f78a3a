/* uffd backend stubs for platforms without userfaultfd: every call reports
 * MT_EUNSUPPORTED, so `auto` ranges use the signal backend. */
#include "internal.h"

int mti_uffd_open(mt_tracker *t) { (void)t; return MT_EUNSUPPORTED; }
void mti_uffd_close(mt_tracker *t) { (void)t; }
int mti_uffd_arm_range(mt_tracker *t, mt_range *r) { (void)t; (void)r; return MT_EUNSUPPORTED; }
void mti_uffd_disarm_range(mt_tracker *t, mt_range *r) { (void)t; (void)r; }
int mti_uffd_scan(mt_tracker *t, uintptr_t start, uintptr_t end, unsigned page_shift, uint64_t *out)
{
    (void)t; (void)start; (void)end; (void)page_shift; (void)out;
    return MT_EUNSUPPORTED;
}
int mti_uffd_probe(void) { return 0; }
int mti_uffd_unprotect(mt_tracker *t, uintptr_t start, uintptr_t end)
{
    (void)t; (void)start; (void)end;
    return MT_EUNSUPPORTED;
}
int mti_uffd_peek(mt_tracker *t, uintptr_t start, uintptr_t end)
{
    (void)t; (void)start; (void)end;
    return MT_EUNSUPPORTED;
}

/* No userfaultfd: no collection helper either. */
int mti_helper_start(mt_tracker *t, unsigned threads)
{
    (void)t; (void)threads;
    return MT_EUNSUPPORTED;
}
void mti_helper_stop(mt_tracker *t) { (void)t; }
void mti_helper_fork_child(mt_tracker *t) { (void)t; }
int mti_helper_status(const mt_tracker *t) { (void)t; return 0; }
long mti_helper_post(mt_tracker *t, mt_range *const *rs, size_t n)
{
    (void)t; (void)rs; (void)n;
    return 0;
}
int mti_helper_take(mt_tracker *t, mt_range *r, size_t win, uint64_t *out, size_t nwords)
{
    (void)t; (void)r; (void)win; (void)out; (void)nwords;
    return 0;
}
int mti_helper_pending(const mt_range *r, size_t win) { (void)r; (void)win; return 0; }
void mti_helper_drop_range(mt_tracker *t, mt_range *r) { (void)t; (void)r; }

/* No /proc/self/maps to read: ranges keep the protection they are given
 * (read-write when none is). */
int mti_vma_prot(uintptr_t start, uintptr_t end, mti_vma_fn fn, void *ctx)
{
    (void)start; (void)end; (void)fn; (void)ctx;
    return MT_EUNSUPPORTED;
}

int mti_vma_at(uintptr_t addr, uint64_t *file_off, char *name, size_t cap)
{
    (void)addr; (void)file_off; (void)name; (void)cap;
    return MT_EUNSUPPORTED;
}

/* No /proc to keep open. */
void mti_procfd_warm(void) {}
void mti_procfd_fork_child(void) {}

/* No list of mappings: nothing can be said about the memory. */
int mt_track_aliasable(const void *addr, size_t len)
{
    (void)addr; (void)len;
    return MT_EUNSUPPORTED;
}
int mti_uffd_kept(const mt_tracker *t) { (void)t; return 0; }
