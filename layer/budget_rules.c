/* The memory budget's arithmetic and the cgroup files' text (budget.h).
 * Pure: tests/test_layer_units.c checks it. */
#include <stdlib.h>
#include <string.h>

#include "budget.h"

uint64_t lt_budget_field(const char *text, const char *key, uint64_t unit)
{
    size_t kl = strlen(key);
    for (const char *p = text; p && *p;) {
        if (strncmp(p, key, kl) == 0 && (p[kl] == ' ' || p[kl] == ':'))
            return strtoull(p + kl + 1, NULL, 10) * unit;
        p = strchr(p, '\n');
        p = p ? p + 1 : NULL;
    }
    return 0;
}

uint64_t lt_budget_parse_limit(const char *s)
{
    if (strncmp(s, "max", 3) == 0)
        return LT_BUDGET_NO_LIMIT;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    /* Version 1 writes "no limit" as a number just under 2^63. */
    return end == s || v >= (1ull << 62) ? LT_BUDGET_NO_LIMIT : (uint64_t)v;
}

uint64_t lt_budget_v1_limit(const char *stat)
{
    uint64_t v = lt_budget_field(stat, "hierarchical_memory_limit", 1);
    return !v || v >= (1ull << 62) ? LT_BUDGET_NO_LIMIT : v;
}

uint64_t lt_budget_cgroup_used(uint64_t current, const char *stat, int v1)
{
    if (!stat)
        return current;
    /* Page cache is dropped before anything is killed, tmpfs and shared
     * memory (counted in it) are not. */
    uint64_t file = lt_budget_field(stat, v1 ? "total_cache" : "file", 1);
    uint64_t shmem = lt_budget_field(stat, v1 ? "total_shmem" : "shmem", 1);
    uint64_t dropped = file > shmem ? file - shmem : 0;
    return current > dropped ? current - dropped : 0;
}

static uint64_t free_of(const lt_budget_limit *l) { return l->limit > l->used ? l->limit - l->used : 0; }

int lt_budget_refuses(const lt_budget_limit *l, size_t n, uint64_t ours, uint64_t bytes, unsigned share)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t f = free_of(&l[i]);
        /* (ours + bytes) <= (free - bytes) / share */
        if (f < bytes || share * (ours + bytes) > f - bytes)
            return (int)i;
    }
    return -1;
}

uint64_t lt_budget_need(const lt_budget_limit *l, size_t n, uint64_t ours, int *which)
{
    uint64_t need = 0;
    *which = -1;
    for (size_t i = 0; i < n; i++) {
        /* Giving back s bytes leaves ours - s and frees s: ours - s <= free
         * + s. Free may be below zero (what the application is about to
         * take counted in): then more than half, at most all of ours. */
        int64_t f = (int64_t)l[i].limit - (int64_t)l[i].used;
        if (l[i].limit == LT_BUDGET_NO_LIMIT || (int64_t)ours <= f)
            continue;
        uint64_t s = (uint64_t)(((int64_t)ours - f + 1) / 2);
        if (s > ours)
            s = ours;
        if (s > need) {
            need = s;
            *which = (int)i;
        }
    }
    return need;
}
