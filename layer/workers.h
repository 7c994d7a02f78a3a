/* The capture threads (workers.c): run fn on each of n items, in parallel
 * where the machine has the cores, the caller taking part; returns when
 * every item is done. fn must be safe to run concurrently on distinct items
 * and take no lock of the layer. Any thread. */
#ifndef LT_WORKERS_H
#define LT_WORKERS_H

#include <stddef.h>

typedef void (*lt_work_fn)(void *item);

void lt_workers_run(lt_work_fn fn, void **items, size_t n);
/* A forked child: the pool's threads and locks are the parent's. */
void lt_workers_after_fork(void);

#endif
