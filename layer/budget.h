/* Memory the layer's own copies must leave to the application (budget.c).
 *
 * The diffing modes keep a reference copy of each memory they diff, and
 * shadow mode a second mapping of each window: up to two more copies of
 * everything the application maps. Under a memory limit (a container's or
 * a systemd unit's cgroup, or a machine nearly full) those copies could get
 * the application killed where it would run without memtrack. This module
 * reads the limits and says whether a new copy fits, and how much the
 * copies must give back when the application has grown toward a limit;
 * capture.c then records those memories whole (copy mode, exact) instead.
 * Any thread. */
#ifndef LT_BUDGET_H
#define LT_BUDGET_H

#include <stddef.h>

/* Opens the files it reads (the memory cgroup's and /proc/meminfo) and
 * keeps them, so that checks made inside an application's sandbox open
 * nothing. Called once the session opens; idempotent. `enabled` 0
 * (MEMTRACK_MEMORY_BUDGET=off) makes every check answer "fits". */
void lt_budget_init(int enabled);

/* Whether a new copy that will use up to `bytes` of memory fits beside the
 * layer's others (`ours`: LT_ST_EXTRA_BYTES): under every limit, the
 * copies together with it stay at most 1/`share` of what is left free
 * after it (2 for references, which can be given back later; 4 for shadow
 * mappings, which cannot: the application holds their pointers). When
 * not, `why` (if not NULL) names the limit. */
int lt_budget_admits(size_t bytes, unsigned share, char *why, size_t why_len);

/* Bytes the layer's copies should give back now: 0 while, under every
 * limit, they are at most what is still free. After a "nothing" the
 * limits are read again only 2 ms later (calls in between answer 0); after
 * a give-back, at the next call. `why` as above. */
size_t lt_budget_excess(char *why, size_t why_len);

/* A forked child (process.c): the kept descriptors are shared with the
 * parent, which is fine (reads at an offset), but the rate limit's clock
 * starts afresh. */
void lt_budget_after_fork(void);

#endif
