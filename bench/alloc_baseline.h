/* The baseline for `memtrack bench alloc`: what bufalloc-style allocators do.
 * One region, a list of free extents sorted by offset, first fit from the
 * low end, coalescing on free by walking the list to the insertion point.
 * Metadata off-region like mt_alloc. The caller passes the size back to
 * free (an advantage over mt_alloc, which finds it from the offset). */
#ifndef MT_ALLOC_BASELINE_H
#define MT_ALLOC_BASELINE_H

#include <stdint.h>

typedef struct bl_alloc bl_alloc;

/* A region of `size` bytes; offsets and sizes are multiples of `granule`. */
bl_alloc *bl_create(uint64_t size, uint64_t granule);
void bl_destroy(bl_alloc *b);

/* 0 and *offset, or -ENOSPC / -ENOMEM. align: power of two or 0. */
int bl_alloc_block(bl_alloc *b, uint64_t size, uint64_t align, uint64_t *offset);

/* Frees [offset, offset + size) (size as passed to bl_alloc_block). 0 or -ENOMEM. */
int bl_free_block(bl_alloc *b, uint64_t offset, uint64_t size);

/* Host memory it holds for its bookkeeping (its extent array). */
uint64_t bl_metadata_bytes(const bl_alloc *b);

/* Free bytes, largest free extent, number of free extents. */
void bl_stats(const bl_alloc *b, uint64_t *free_bytes, uint64_t *largest, uint64_t *extents);

#endif
