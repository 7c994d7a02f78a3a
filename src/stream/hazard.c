/* Lazy read-after-write barriers: see hazard.h for the epoch scheme. */
#include "hazard.h"

#include <errno.h>
#include <stdlib.h>

int mti_hazards_init(mt_hazards *h, uint32_t nresources)
{
    h->written_in = calloc(nresources, sizeof *h->written_in);
    if (!h->written_in)
        return -ENOMEM;
    h->n = nresources;
    h->epoch = 1;
    return 0;
}

void mti_hazards_fini(mt_hazards *h)
{
    free(h->written_in);
    h->written_in = NULL;
}

static int ids_valid(const mt_hazards *h, const uint32_t *ids, uint32_t n)
{
    if (n && !ids)
        return 0;
    for (uint32_t i = 0; i < n; i++)
        if (ids[i] >= h->n)
            return 0;
    return 1;
}

int mti_hazards_check(const mt_hazards *h, const mt_stream_access *acc)
{
    /* Validate everything before answering, so that a bad id writes nothing. */
    if (!ids_valid(h, acc->reads, acc->n_reads) || !ids_valid(h, acc->writes, acc->n_writes))
        return -EINVAL;
    for (uint32_t i = 0; i < acc->n_reads; i++)
        if (h->written_in[acc->reads[i]] == h->epoch)
            return 1;
    return 0;
}

void mti_hazards_note_writes(mt_hazards *h, const mt_stream_access *acc)
{
    for (uint32_t i = 0; i < acc->n_writes; i++)
        h->written_in[acc->writes[i]] = h->epoch;
}
