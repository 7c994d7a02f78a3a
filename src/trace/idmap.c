/* Linear probing over a power-of-two table kept at most half full. */
#include <errno.h>
#include <stdlib.h>

#include "idmap.h"

static size_t slot_of(uint64_t id, size_t cap)
{
    id ^= id >> 33;
    id *= 0xff51afd7ed558ccdull; /* murmur3 finaliser: ids are often sequential */
    id ^= id >> 33;
    return (size_t)id & (cap - 1);
}

long mti_idmap_get(const mt_idmap *m, uint64_t id)
{
    if (m->cap == 0)
        return -1;
    for (size_t s = slot_of(id, m->cap);; s = (s + 1) & (m->cap - 1)) {
        if (m->vals[s] == 0)
            return -1;
        if (m->keys[s] == id)
            return (long)m->vals[s] - 1;
    }
}

static void insert(uint64_t *keys, uint32_t *vals, size_t cap, uint64_t id, uint32_t v)
{
    size_t s = slot_of(id, cap);
    while (vals[s] != 0)
        s = (s + 1) & (cap - 1);
    keys[s] = id;
    vals[s] = v;
}

int mti_idmap_put(mt_idmap *m, uint64_t id, uint32_t index)
{
    if (index == UINT32_MAX)
        return -ENOMEM;
    if (2 * (m->count + 1) > m->cap) {
        size_t cap = m->cap ? 2 * m->cap : 64;
        uint64_t *k = calloc(cap, sizeof *k);
        uint32_t *v = calloc(cap, sizeof *v);
        if (!k || !v) {
            free(k);
            free(v);
            return -ENOMEM;
        }
        for (size_t i = 0; i < m->cap; i++)
            if (m->vals[i])
                insert(k, v, cap, m->keys[i], m->vals[i]);
        free(m->keys);
        free(m->vals);
        m->keys = k;
        m->vals = v;
        m->cap = cap;
    }
    insert(m->keys, m->vals, m->cap, id, index + 1);
    m->count++;
    return 0;
}

void mti_idmap_free(mt_idmap *m)
{
    free(m->keys);
    free(m->vals);
    *m = (mt_idmap){0};
}
