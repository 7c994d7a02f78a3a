/* Memory limits the layer's copies leave room under (budget.h).
 *
 * Limits read, each as (limit, used):
 *  - the process's memory cgroup, version 2 (memory.max and memory.high
 *    against memory.current) or version 1 (the hierarchical limit in
 *    memory.stat against memory.usage_in_bytes); with version 2 also up to
 *    two ancestors that have a limit of their own when the session opens
 *    (version 1's memory.stat already folds the ancestors' limits in);
 *  - the machine: MemTotal against MemTotal - MemAvailable.
 * A cgroup's page cache counts against its limit but is given back before
 * anything is killed: "used" leaves out its file pages (not its tmpfs and
 * shared memory, which cannot be dropped). That matters here: the trace
 * this process writes fills the page cache of the application's cgroup.
 *
 * The descriptors are opened once, when the session opens (an application
 * may sandbox itself later and refuse opens), moved out of the
 * application's numbers and checked with fstat before each read (it may
 * close them and get the numbers back for files of its own: such a
 * descriptor is forgotten, never read or closed, and that limit is no
 * longer watched). The cgroup is the one the process is in when the
 * session opens; a process that moves itself later is still measured
 * against the first one. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../src/common/cgroup.h"
#include "../src/common/clock.h"
#include "../src/common/fdpark.h"
#include "budget.h"
#include "session.h"

#define NO_LIMIT LT_BUDGET_NO_LIMIT
#define MAX_LEVELS 3 /* the process's cgroup and two limited ancestors */
#define RECHECK_NS 2000000ull

typedef struct kept {
    int fd;
    uint64_t dev, ino;
} kept;

/* One cgroup whose limit applies. Version 2: `max`, `high`, `cur`, `stat`.
 * Version 1: `cur` is memory.usage_in_bytes and `stat` gives the limit. */
typedef struct level {
    kept max, high, cur, stat;
    int v1;
    char name[512]; /* for the messages: the cgroup's path */
} level;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_inited;
static _Atomic int g_enabled;
static level g_lv[MAX_LEVELS];
static int g_nlv;
static kept g_meminfo = {.fd = -1};
/* When lt_budget_excess last found nothing to give back (under g_lock). */
static uint64_t g_checked_ns;

static kept keep(const char *path)
{
    kept k = {.fd = -1};
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return k;
    fd = mti_fd_park(fd);
    if (mti_fd_identity(fd, &k.dev, &k.ino) != 0) {
        close(fd);
        return k;
    }
    k.fd = fd;
    return k;
}

/* The file's text from its start, or -1 when the descriptor is gone (or
 * was never opened). */
static ssize_t kept_read(kept *k, char *buf, size_t size)
{
    if (k->fd < 0)
        return -1;
    if (!mti_fd_names(k->fd, k->dev, k->ino)) {
        k->fd = -1; /* the application's now: forgotten, not closed */
        return -1;
    }
    ssize_t n = pread(k->fd, buf, size - 1, 0);
    if (n < 0)
        return -1;
    buf[n] = 0;
    return n;
}

static uint64_t read_value(kept *k, int *ok)
{
    char buf[64];
    if (kept_read(k, buf, sizeof buf) <= 0) {
        *ok = 0;
        return NO_LIMIT;
    }
    *ok = 1;
    return lt_budget_parse_limit(buf);
}

/* ---- finding the cgroup ---------------------------------------------------------- */

/* dir/file in p (PATH_MAX), or -1 when it does not fit. */
static int join(char *p, const char *dir, const char *file)
{
    int n = snprintf(p, PATH_MAX, "%s/%s", dir, file);
    return n > 0 && n < PATH_MAX ? 0 : -1;
}

static int exists(const char *dir, const char *file)
{
    char p[PATH_MAX];
    return join(p, dir, file) == 0 && access(p, R_OK) == 0;
}

static kept keep_in(const char *dir, const char *file)
{
    char p[PATH_MAX];
    return join(p, dir, file) == 0 ? keep(p) : (kept){.fd = -1};
}

static void add_v2_level(const char *dir, const char *name)
{
    level *lv = &g_lv[g_nlv++];
    memset(lv, 0, sizeof *lv);
    lv->max = keep_in(dir, "memory.max");
    lv->high = keep_in(dir, "memory.high");
    lv->cur = keep_in(dir, "memory.current");
    lv->stat = keep_in(dir, "memory.stat");
    snprintf(lv->name, sizeof lv->name, "%s", name);
}

/* A version 2 ancestor whose limit is set now: watched. One without a
 * limit when the session opens is not (each watched level keeps four
 * descriptors in the application). */
static int v2_ancestor_limited(const char *dir)
{
    char p[PATH_MAX], buf[64];
    int limited = 0;
    static const char *const files[] = {"memory.max", "memory.high"};
    for (int i = 0; i < 2 && !limited; i++) {
        int fd = join(p, dir, files[i]) == 0 ? open(p, O_RDONLY | O_CLOEXEC) : -1;
        if (fd < 0)
            continue;
        ssize_t n = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (n > 0) {
            buf[n] = 0;
            limited = lt_budget_parse_limit(buf) != NO_LIMIT;
        }
    }
    return limited;
}

static void find_cgroup(void)
{
    mti_cgroup *cg = malloc(sizeof *cg);
    if (!cg || mti_cgroup_find(cg) != 0) {
        free(cg);
        return;
    }
    if (cg->v1) {
        if (exists(cg->dir, "memory.usage_in_bytes")) {
            level *lv = &g_lv[g_nlv++];
            memset(lv, 0, sizeof *lv);
            lv->v1 = 1;
            lv->max = lv->high = (kept){.fd = -1};
            lv->cur = keep_in(cg->dir, "memory.usage_in_bytes");
            lv->stat = keep_in(cg->dir, "memory.stat");
            snprintf(lv->name, sizeof lv->name, "%s", cg->name);
        }
    } else {
        /* memory.current exists where the memory controller is on; the
         * root cgroup has none (and no limit). */
        if (exists(cg->dir, "memory.current"))
            add_v2_level(cg->dir, cg->name);
        for (;;) {
            char *slash = strrchr(cg->name, '/'), *dslash = strrchr(cg->dir, '/');
            if (!slash || slash == cg->name || !dslash || g_nlv == MAX_LEVELS)
                break;
            *slash = 0;
            *dslash = 0;
            if (exists(cg->dir, "memory.current") && v2_ancestor_limited(cg->dir))
                add_v2_level(cg->dir, cg->name);
        }
    }
    free(cg);
}

void lt_budget_init(int enabled)
{
    pthread_mutex_lock(&g_lock);
    if (!g_inited) {
        g_inited = 1;
        atomic_store(&g_enabled, enabled);
        if (enabled) {
            find_cgroup();
            g_meminfo = keep("/proc/meminfo");
        }
    }
    pthread_mutex_unlock(&g_lock);
}

void lt_budget_after_fork(void)
{
    pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    memcpy(&g_lock, &m, sizeof m);
    g_checked_ns = 0;
}

/* ---- reading the limits ------------------------------------------------------------ */

typedef struct lim {
    lt_budget_limit l;
    char what[600];
} lim;

/* Every limit that applies now (g_lock held). */
static size_t read_limits(lim *out, size_t max)
{
    size_t n = 0;
    char text[8192];
    for (int i = 0; i < g_nlv && n < max; i++) {
        level *lv = &g_lv[i];
        int ok;
        uint64_t cur = read_value(&lv->cur, &ok);
        if (!ok)
            continue;
        int have_stat = kept_read(&lv->stat, text, sizeof text) > 0;
        uint64_t limit = NO_LIMIT;
        if (lv->v1)
            limit = have_stat ? lt_budget_v1_limit(text) : NO_LIMIT;
        else {
            uint64_t mx = read_value(&lv->max, &ok), hi = read_value(&lv->high, &ok);
            limit = mx < hi ? mx : hi;
        }
        if (limit == NO_LIMIT)
            continue;
        lim *l = &out[n++];
        l->l.limit = limit;
        l->l.used = lt_budget_cgroup_used(cur, have_stat ? text : NULL, lv->v1);
        snprintf(l->what, sizeof l->what, "the memory cgroup %s (%s)", lv->name,
                 lv->v1 ? "version 1" : "version 2");
    }
    if (n < max && kept_read(&g_meminfo, text, sizeof text) > 0) {
        uint64_t total = lt_budget_field(text, "MemTotal", 1024), avail = lt_budget_field(text, "MemAvailable", 1024);
        if (total && avail <= total) {
            lim *l = &out[n++];
            l->l.limit = total;
            l->l.used = total - avail;
            snprintf(l->what, sizeof l->what, "the machine's available memory");
        }
    }
    return n;
}

/* The layer's copies now. Counted by many threads with adds and subtracts
 * that may pass each other (a reference's bytes leave a memory before they
 * enter the cache): a moment's "negative" reads as none. */
static uint64_t ours(void)
{
    uint64_t v = lt_stat_get(LT_ST_EXTRA_BYTES);
    return v >= (1ull << 62) ? 0 : v;
}

static void say(char *why, size_t why_len, const lim *l)
{
    uint64_t f = l->l.limit > l->l.used ? l->l.limit - l->l.used : 0;
    if (why && why_len)
        snprintf(why, why_len, "%s: %llu MiB free of %llu MiB", l->what, (unsigned long long)(f >> 20),
                 (unsigned long long)(l->l.limit >> 20));
}

/* lt_budget_limit's of `l`, for the rules. */
static size_t plain(const lim *l, size_t n, lt_budget_limit *out)
{
    for (size_t i = 0; i < n; i++)
        out[i] = l[i].l;
    return n;
}

int lt_budget_admits(size_t bytes, unsigned share, char *why, size_t why_len)
{
    if (!atomic_load(&g_enabled))
        return 1;
    lim l[MAX_LEVELS + 1];
    lt_budget_limit p[MAX_LEVELS + 1];
    pthread_mutex_lock(&g_lock);
    size_t n = read_limits(l, MAX_LEVELS + 1);
    pthread_mutex_unlock(&g_lock);
    int i = lt_budget_refuses(p, plain(l, n, p), ours(), bytes, share);
    if (i >= 0)
        say(why, why_len, &l[i]);
    return i < 0;
}

size_t lt_budget_excess(uint64_t coming, char *why, size_t why_len)
{
    if (!atomic_load(&g_enabled))
        return 0;
    pthread_mutex_lock(&g_lock);
    /* Only a "nothing to give back" is reused: after a give-back the next
     * call must see what it freed. */
    uint64_t now = mti_now_ns();
    if (!coming && g_checked_ns && now - g_checked_ns < RECHECK_NS) {
        pthread_mutex_unlock(&g_lock);
        return 0;
    }
    lim l[MAX_LEVELS + 1];
    lt_budget_limit p[MAX_LEVELS + 1];
    size_t n = read_limits(l, MAX_LEVELS + 1);
    for (size_t i = 0; i < n; i++)
        l[i].l.used += coming;
    int which;
    uint64_t need = lt_budget_need(p, plain(l, n, p), ours(), &which);
    if (which >= 0)
        say(why, why_len, &l[which]);
    if (!coming)
        g_checked_ns = need ? 0 : now;
    pthread_mutex_unlock(&g_lock);
    return (size_t)need;
}
