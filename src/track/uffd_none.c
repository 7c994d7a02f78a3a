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
