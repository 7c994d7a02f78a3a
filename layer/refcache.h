/* Freed reference copies kept for the next memory of the same size
 * (refcache.c). Any thread. */
#ifndef LT_REFCACHE_H
#define LT_REFCACHE_H

#include <stddef.h>

/* A zero-filled reference of `size` bytes, populated, or NULL when none of
 * that size is kept. */
void *lt_refcache_take(size_t size);
/* Hands a reference of `size` bytes back: kept (possibly dropping older
 * ones) or unmapped. */
void lt_refcache_give(void *ref, size_t size);

/* Unmaps every kept reference (memory limits: budget.h); the bytes given
 * back. */
size_t lt_refcache_drop_all(void);

/* A forked child (process.c). */
void lt_refcache_after_fork(void);

#endif
