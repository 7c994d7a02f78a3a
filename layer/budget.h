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
#include <stdint.h>

/* Opens the files it reads (the memory cgroup's and /proc/meminfo) and
 * keeps them, so that checks made inside an application's sandbox open
 * nothing. Called once the session opens; idempotent. `enabled` 0
 * (MEMTRACK_MEMORY_BUDGET=off) makes every check answer "fits". */
void lt_budget_init(int enabled);

/* Whether a new copy that will use up to `bytes` of memory fits beside the
 * layer's others (`ours`: LT_ST_EXTRA_BYTES): under every limit, the
 * copies together with it stay at most 1/`share` of what is left free
 * after it (2 for references, which can be given back later; 8 for shadow
 * mappings, which cannot: the application holds their pointers). When
 * not, `why` (if not NULL) names the limit. */
int lt_budget_admits(size_t bytes, unsigned share, char *why, size_t why_len);

/* Bytes the layer's copies should give back now: 0 while, under every
 * limit, they are at most what is still free. `coming`: bytes the
 * application is about to take (a device memory it allocates in host
 * memory), counted as used already. After a "nothing" with coming 0 the
 * limits are read again only 2 ms later (such calls in between answer 0);
 * after a give-back, or with coming > 0, at once. `why` as above. */
size_t lt_budget_excess(uint64_t coming, char *why, size_t why_len);

/* A forked child (process.c): the kept descriptors are shared with the
 * parent, which is fine (reads at an offset), but the rate limit's clock
 * starts afresh. */
void lt_budget_after_fork(void);

/* ---- the rules and the files' text (budget_rules.c, pure) ---- */

#define LT_BUDGET_NO_LIMIT UINT64_MAX

typedef struct lt_budget_limit {
    uint64_t limit, used;
} lt_budget_limit;

/* The first limit under which a new copy of `bytes` does not fit beside
 * `ours` (lt_budget_admits' rule), or -1. */
int lt_budget_refuses(const lt_budget_limit *l, size_t n, uint64_t ours, uint64_t bytes, unsigned share);
/* What `ours` must give back (lt_budget_excess' rule), and in *which the
 * limit that asks the most (-1: none). */
uint64_t lt_budget_need(const lt_budget_limit *l, size_t n, uint64_t ours, int *which);

/* `key`'s value in a "key value" or "Key: value" per line text (memory.stat,
 * /proc/meminfo), times `unit`; 0 when absent. */
uint64_t lt_budget_field(const char *text, const char *key, uint64_t unit);
/* A version 2 limit file's value: a number, or LT_BUDGET_NO_LIMIT for "max"
 * (and for version 1's near-2^63 "no limit"). */
uint64_t lt_budget_parse_limit(const char *text);
/* Version 1's limit from memory.stat (its ancestors' folded in). */
uint64_t lt_budget_v1_limit(const char *stat);
/* A cgroup's usage less the page cache it can drop (memory.stat's text;
 * NULL: none known). */
uint64_t lt_budget_cgroup_used(uint64_t current, const char *stat, int v1);

#endif
