/* Sorted free-list first-fit allocator: the baseline (see alloc_baseline.h).
 * Free extents live in a node array as a doubly linked list in address
 * order; both allocate and free are O(free extents). */
#include "alloc_baseline.h"

#include <errno.h>
#include <stdlib.h>

typedef struct ext {
    uint64_t off, size;
    uint32_t prev, next; /* 0: none; next also links unused nodes */
} ext;

struct bl_alloc {
    ext *e;
    uint32_t cap, unused, head;
    uint64_t granule;
};

static uint32_t node_new(bl_alloc *b)
{
    if (b->unused == 0) {
        uint32_t cap = b->cap ? b->cap * 2 : 256;
        ext *n = realloc(b->e, (size_t)cap * sizeof *n);
        if (!n)
            return 0;
        for (uint32_t i = b->cap ? b->cap : 1; i < cap; i++)
            n[i].next = i + 1 < cap ? i + 1 : 0;
        b->unused = b->cap ? b->cap : 1;
        b->e = n;
        b->cap = cap;
    }
    uint32_t id = b->unused;
    b->unused = b->e[id].next;
    return id;
}

static void node_del(bl_alloc *b, uint32_t id)
{
    ext *x = &b->e[id];
    if (x->prev)
        b->e[x->prev].next = x->next;
    else
        b->head = x->next;
    if (x->next)
        b->e[x->next].prev = x->prev;
    x->next = b->unused;
    b->unused = id;
}

/* Inserts a new extent after `prev` (0: at the head). */
static uint32_t node_insert(bl_alloc *b, uint32_t prev, uint64_t off, uint64_t size)
{
    uint32_t id = node_new(b);
    if (!id)
        return 0;
    ext *x = &b->e[id];
    x->off = off;
    x->size = size;
    x->prev = prev;
    x->next = prev ? b->e[prev].next : b->head;
    if (x->next)
        b->e[x->next].prev = id;
    if (prev)
        b->e[prev].next = id;
    else
        b->head = id;
    return id;
}

bl_alloc *bl_create(uint64_t size, uint64_t granule)
{
    bl_alloc *b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    b->granule = granule;
    if (!node_insert(b, 0, 0, size / granule * granule)) {
        free(b);
        return NULL;
    }
    return b;
}

void bl_destroy(bl_alloc *b)
{
    if (!b)
        return;
    free(b->e);
    free(b);
}

int bl_alloc_block(bl_alloc *b, uint64_t size, uint64_t align, uint64_t *offset)
{
    size = (size + b->granule - 1) / b->granule * b->granule;
    if (align < b->granule)
        align = b->granule;
    for (uint32_t id = b->head; id; id = b->e[id].next) {
        ext *x = &b->e[id];
        uint64_t start = (x->off + align - 1) & ~(align - 1), end = x->off + x->size;
        if (start + size > end)
            continue;
        if (start + size < end) { /* the tail stays free */
            if (start > x->off) {
                if (!node_insert(b, id, start + size, end - start - size))
                    return -ENOMEM;
                x = &b->e[id];
                x->size = start - x->off;
            } else {
                x->off = start + size;
                x->size = end - x->off;
            }
        } else if (start > x->off) {
            x->size = start - x->off;
        } else {
            node_del(b, id);
        }
        *offset = start;
        return 0;
    }
    return -ENOSPC;
}

int bl_free_block(bl_alloc *b, uint64_t off, uint64_t size)
{
    size = (size + b->granule - 1) / b->granule * b->granule;
    uint32_t prev = 0, next = b->head;
    while (next && b->e[next].off < off) {
        prev = next;
        next = b->e[next].next;
    }
    int join_prev = prev && b->e[prev].off + b->e[prev].size == off;
    int join_next = next && off + size == b->e[next].off;
    if (join_prev && join_next) {
        b->e[prev].size += size + b->e[next].size;
        node_del(b, next);
    } else if (join_prev) {
        b->e[prev].size += size;
    } else if (join_next) {
        b->e[next].off = off;
        b->e[next].size += size;
    } else if (!node_insert(b, prev, off, size)) {
        return -ENOMEM;
    }
    return 0;
}

void bl_stats(const bl_alloc *b, uint64_t *free_bytes, uint64_t *largest, uint64_t *extents)
{
    *free_bytes = *largest = *extents = 0;
    for (uint32_t id = b->head; id; id = b->e[id].next) {
        *free_bytes += b->e[id].size;
        if (b->e[id].size > *largest)
            *largest = b->e[id].size;
        (*extents)++;
    }
}

uint64_t bl_metadata_bytes(const bl_alloc *b)
{
    return sizeof *b + (uint64_t)b->cap * sizeof(ext);
}
