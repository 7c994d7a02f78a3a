/* Allocator of the simulated device's address range (offsets into its
 * memory). A first-fit allocator over a sorted array of live blocks, with its
 * metadata on the host side like any device-memory allocator: it stands in
 * for memtrack's `alloc` module until that lands, behind the four calls in
 * sim_internal.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"

typedef struct blk {
    uint64_t off, len;
} blk;

struct mt_sim_heap {
    pthread_mutex_t lock;
    uint64_t size;
    blk *b; /* live blocks sorted by offset */
    size_t n, cap;
};

int mt_sim_heap_create(size_t size, mt_sim_heap **out)
{
    mt_sim_heap *h = calloc(1, sizeof *h);
    if (!h)
        return -ENOMEM;
    pthread_mutex_init(&h->lock, NULL);
    h->size = size;
    *out = h;
    return 0;
}

void mt_sim_heap_destroy(mt_sim_heap *h)
{
    if (!h)
        return;
    pthread_mutex_destroy(&h->lock);
    free(h->b);
    free(h);
}

/* Under lock: first gap that holds `size` bytes at `align`; index to insert at. */
static int find_gap(const mt_sim_heap *h, uint64_t size, uint64_t align, uint64_t *off, size_t *at)
{
    uint64_t start = 0;
    for (size_t i = 0; i <= h->n; i++) {
        uint64_t end = i < h->n ? h->b[i].off : h->size;
        uint64_t a = (start + align - 1) & ~(align - 1);
        if (a >= start && a <= end && end - a >= size) {
            *off = a;
            *at = i;
            return 0;
        }
        if (i < h->n)
            start = h->b[i].off + h->b[i].len;
    }
    return -ENOMEM;
}

int mt_sim_heap_alloc(mt_sim_heap *h, size_t size, size_t align, uint64_t *off)
{
    if (!size || (align & (align - 1)) || size > h->size)
        return -EINVAL;
    pthread_mutex_lock(&h->lock);
    size_t at;
    int rc = find_gap(h, size, align, off, &at);
    if (!rc && h->n == h->cap) {
        size_t cap = h->cap ? 2 * h->cap : 16;
        blk *b = realloc(h->b, cap * sizeof *b);
        if (b) {
            h->b = b;
            h->cap = cap;
        } else {
            rc = -ENOMEM;
        }
    }
    if (!rc) {
        memmove(&h->b[at + 1], &h->b[at], (h->n - at) * sizeof *h->b);
        h->b[at] = (blk){*off, size};
        h->n++;
    }
    pthread_mutex_unlock(&h->lock);
    return rc;
}

int mt_sim_heap_free(mt_sim_heap *h, uint64_t off)
{
    pthread_mutex_lock(&h->lock);
    size_t lo = 0, hi = h->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (h->b[mid].off < off)
            lo = mid + 1;
        else
            hi = mid;
    }
    int rc = -EINVAL;
    if (lo < h->n && h->b[lo].off == off) {
        memmove(&h->b[lo], &h->b[lo + 1], (h->n - lo - 1) * sizeof *h->b);
        h->n--;
        rc = 0;
    }
    pthread_mutex_unlock(&h->lock);
    return rc;
}
