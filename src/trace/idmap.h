/* A small open-addressing map from 64-bit ids to array indices, for the
 * replayer's memories and objects. No removal: a destroyed id keeps its slot
 * (its entry is marked dead), so the map grows with distinct ids only, which
 * the file's size bounds. */
#ifndef MT_TRACE_IDMAP_H
#define MT_TRACE_IDMAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct mt_idmap {
    uint64_t *keys;
    uint32_t *vals; /* index + 1; 0 = empty slot */
    size_t cap, count;
} mt_idmap;

/* Index stored for id, or -1. */
long mti_idmap_get(const mt_idmap *m, uint64_t id);
/* Stores id -> index (id not present). Returns 0 or -ENOMEM. */
int mti_idmap_put(mt_idmap *m, uint64_t id, uint32_t index);
void mti_idmap_free(mt_idmap *m);

#endif
