/* Lazy read-after-write barriers (HardDoom's INTERLOCK issued "as late as
 * possible").
 *
 * Barriers are numbered by an epoch; a resource remembers the epoch of its
 * last write. A read needs a barrier exactly when the resource was written in
 * the current epoch (since the last barrier). A barrier is epoch++: one
 * increment clears every pending hazard at once, in O(1), with no list of
 * dirty resources to walk. Epochs start at 1 so that 0 means "never written". */
#ifndef MT_STREAM_HAZARD_H
#define MT_STREAM_HAZARD_H

#include <stdint.h>

#include "memtrack/stream.h"

typedef struct mt_hazards {
    uint64_t *written_in; /* per resource: epoch of its last write, 0 = never */
    uint32_t n;
    uint64_t epoch;
} mt_hazards;

int mti_hazards_init(mt_hazards *h, uint32_t nresources);
void mti_hazards_fini(mt_hazards *h);

/* -EINVAL when a resource id is out of range, 1 when one of the reads needs
 * a barrier first, 0 otherwise. Looks only: nothing changes. */
int mti_hazards_check(const mt_hazards *h, const mt_stream_access *acc);

/* Records the command's writes (after it was written to the ring). */
void mti_hazards_note_writes(mt_hazards *h, const mt_stream_access *acc);

/* A barrier went out: every pending hazard is gone. */
static inline void mti_hazards_clear(mt_hazards *h)
{
    h->epoch++;
}

#endif
