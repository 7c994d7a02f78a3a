/* Handle -> pointer map: open addressing with linear probing. Vulkan handles
 * are never 0, which marks an empty slot; UINT64_MAX marks a deleted one. */
#include <errno.h>
#include <stdlib.h>

#include "layer.h"

#define EMPTY 0ull
#define DELETED UINT64_MAX

static size_t slot_of(uint64_t key, size_t cap)
{
    key ^= key >> 33; /* handles are often pointers: mix the low bits */
    key *= 0xff51afd7ed558ccdull;
    key ^= key >> 33;
    return (size_t)key & (cap - 1);
}

void *lt_map_get(const lt_map *m, uint64_t key)
{
    if (!m->cap || key == EMPTY || key == DELETED)
        return NULL;
    for (size_t i = slot_of(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
        if (m->keys[i] == key)
            return m->vals[i];
        if (m->keys[i] == EMPTY)
            return NULL;
    }
}

static int grow(lt_map *m)
{
    size_t ncap = m->cap ? m->cap * 2 : 64;
    /* Rehash into a table sized for the live entries only: drops tombstones. */
    while (m->live * 2 >= ncap)
        ncap *= 2;
    uint64_t *keys = calloc(ncap, sizeof *keys);
    void **vals = calloc(ncap, sizeof *vals);
    if (!keys || !vals) {
        free(keys);
        free(vals);
        return -ENOMEM;
    }
    for (size_t i = 0; i < m->cap; i++) {
        uint64_t k = m->keys[i];
        if (k == EMPTY || k == DELETED)
            continue;
        size_t j = slot_of(k, ncap);
        while (keys[j] != EMPTY)
            j = (j + 1) & (ncap - 1);
        keys[j] = k;
        vals[j] = m->vals[i];
    }
    free(m->keys);
    free(m->vals);
    m->keys = keys;
    m->vals = vals;
    m->cap = ncap;
    m->used = m->live;
    return 0;
}

int lt_map_put(lt_map *m, uint64_t key, void *val)
{
    if (key == EMPTY || key == DELETED)
        return -EINVAL;
    if ((m->used + 1) * 4 >= m->cap * 3 && grow(m) != 0)
        return -ENOMEM;
    size_t tomb = SIZE_MAX;
    for (size_t i = slot_of(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
        if (m->keys[i] == key) {
            m->vals[i] = val;
            return 0;
        }
        if (m->keys[i] == DELETED && tomb == SIZE_MAX)
            tomb = i;
        if (m->keys[i] == EMPTY) {
            if (tomb != SIZE_MAX)
                i = tomb;
            else
                m->used++;
            m->keys[i] = key;
            m->vals[i] = val;
            m->live++;
            return 0;
        }
    }
}

void *lt_map_del(lt_map *m, uint64_t key)
{
    if (!m->cap || key == EMPTY || key == DELETED)
        return NULL;
    for (size_t i = slot_of(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
        if (m->keys[i] == key) {
            void *v = m->vals[i];
            m->keys[i] = DELETED;
            m->vals[i] = NULL;
            m->live--;
            return v;
        }
        if (m->keys[i] == EMPTY)
            return NULL;
    }
}

void lt_map_each(const lt_map *m, void (*fn)(void *val, void *arg), void *arg)
{
    for (size_t i = 0; i < m->cap; i++)
        if (m->keys[i] != EMPTY && m->keys[i] != DELETED)
            fn(m->vals[i], arg);
}

void lt_map_free(lt_map *m)
{
    free(m->keys);
    free(m->vals);
    m->keys = NULL;
    m->vals = NULL;
    m->cap = m->used = m->live = 0;
}
