/* Allocator of the simulated device's address range: one memtrack `alloc`
 * region covering the whole range, offsets into device memory, with its
 * metadata in host memory beside the region as alloc keeps it (the device
 * memory itself is never touched by allocation). An mt_alloc serves one
 * thread at a time and mt_sim_alloc/free may be called from any, hence the
 * mutex. The sim sees only the four calls in sim_internal.h. */
#include <errno.h>
#include <stdlib.h>

#include "memtrack/alloc.h"
#include "sim_internal.h"

struct mt_sim_heap {
    pthread_mutex_t lock;
    mt_alloc *a;
    uint32_t region;
};

int mti_sim_heap_create(size_t size, mt_sim_heap **out)
{
    mt_sim_heap *h = calloc(1, sizeof *h);
    if (!h)
        return -ENOMEM;
    /* 8-byte granule: the smallest device write (STORE) is 8 bytes. */
    mt_alloc_opts o = {.min_align = 8};
    int rc = mt_alloc_create(&o, &h->a);
    if (!rc && (rc = mt_alloc_add_region(h->a, size, NULL, &h->region)) != 0)
        mt_alloc_destroy(h->a);
    if (rc) {
        free(h);
        return rc;
    }
    pthread_mutex_init(&h->lock, NULL);
    *out = h;
    return 0;
}

void mti_sim_heap_destroy(mt_sim_heap *h)
{
    if (!h)
        return;
    mt_alloc_destroy(h->a);
    pthread_mutex_destroy(&h->lock);
    free(h);
}

int mti_sim_heap_alloc(mt_sim_heap *h, size_t size, size_t align, uint64_t *off)
{
    mt_alloc_block b;
    pthread_mutex_lock(&h->lock);
    int rc = mt_alloc_allocate(h->a, size, align, MT_ALLOC_LINEAR, &b);
    pthread_mutex_unlock(&h->lock);
    if (!rc)
        *off = b.offset;
    return rc;
}

int mti_sim_heap_free(mt_sim_heap *h, uint64_t off)
{
    pthread_mutex_lock(&h->lock);
    int rc = mt_alloc_free(h->a, h->region, off);
    pthread_mutex_unlock(&h->lock);
    return rc;
}
