/* The capture threads (workers.c): run fn on each of n items, in parallel
 * where the machine has the cores, the caller taking part; returns when
 * every item is done. fn must be safe to run concurrently on distinct items
 * and take no lock of the layer. Any thread. */
#ifndef LT_WORKERS_H
#define LT_WORKERS_H

#include <stddef.h>

typedef void (*lt_work_fn)(void *item);

void lt_workers_run(lt_work_fn fn, void **items, size_t n);
/* Runs fn on each of n items like lt_workers_run, but may be called from
 * anywhere, a job's item included: pool threads that are idle or done with
 * their own items help; the caller runs what nobody took. fn must not share
 * again. */
void lt_workers_share(lt_work_fn fn, void **items, size_t n);
/* Whether the pool has threads besides the caller's (starting it if needed):
 * when not, sharing only adds work. */
int lt_workers_available(void);
/* A forked child: the pool's threads and locks are the parent's. */
void lt_workers_after_fork(void);

#endif
