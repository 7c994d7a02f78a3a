/* Behaviours under resource limits (see hv.h).
 *
 * memory-limit: the application runs in a memory cgroup of its own (a
 * container's or a systemd unit's limit) that leaves it little more than it
 * needs: two 96 MiB memories the device copies between every frame, its
 * models of them, and a heap it grows by 128 MiB over the frames. With a
 * reference copy of each memory (or two copies, in shadow mode) memtrack
 * would take it over its limit and the kernel would kill it; the layer
 * must leave it room (layer/budget.c) and still record every byte.
 * memory-limit-alloc: the same, growing by one 384 MiB device memory that
 * it allocates and fills halfway through (the room must be made before the
 * allocation: the next submit comes too late).
 * Both make their cgroup below their own (version 1 or 2; with version 2
 * below the nearest ancestor that hands the memory controller down where
 * their own cannot), which needs root: skipped (77) where they cannot. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../src/common/cgroup.h"
#include "hv.h"

#define MIB ((size_t)1 << 20)

typedef struct own_cgroup {
    int v1;
    char home[PATH_MAX], dir[PATH_MAX + 32]; /* the cgroup it came from, its own */
} own_cgroup;

static int write_file(const char *dir, const char *file, const char *text)
{
    char p[PATH_MAX + 64];
    snprintf(p, sizeof p, "%s/%s", dir, file);
    int fd = open(p, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = write(fd, text, strlen(text));
    int rc = n == (ssize_t)strlen(text) ? 0 : n < 0 ? -errno : -EIO;
    close(fd);
    return rc;
}

static uint64_t read_u64(const char *dir, const char *file)
{
    char p[PATH_MAX + 64], buf[64] = "";
    snprintf(p, sizeof p, "%s/%s", dir, file);
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    return n > 0 ? strtoull(buf, NULL, 10) : 0;
}

/* Cgroups earlier runs left (a run the kernel killed never left its own):
 * removed where empty. */
static void sweep(const char *parent)
{
    DIR *d = opendir(parent);
    if (!d)
        return;
    for (struct dirent *e; (e = readdir(d));)
        if (strncmp(e->d_name, "mt-hostile-", 11) == 0) {
            char p[PATH_MAX + 300];
            snprintf(p, sizeof p, "%s/%s", parent, e->d_name);
            rmdir(p);
        }
    closedir(d);
}

/* Makes c->dir below `where` and moves this process into it: 0, or -errno
 * (nothing left behind). */
static int make_below(own_cgroup *c, const char *where)
{
    snprintf(c->dir, sizeof c->dir, "%s/mt-hostile-%d", where, (int)getpid());
    if (mkdir(c->dir, 0755) != 0)
        return -errno;
    char p[PATH_MAX + 64], pid[32];
    /* Without the limit file the memory controller is not handed down. */
    snprintf(p, sizeof p, "%s/%s", c->dir, c->v1 ? "memory.limit_in_bytes" : "memory.max");
    snprintf(pid, sizeof pid, "%d", (int)getpid());
    int rc = access(p, W_OK) == 0 ? write_file(c->dir, "cgroup.procs", pid) : -ENOTSUP;
    if (rc)
        rmdir(c->dir);
    return rc;
}

static int contains_memory(const char *dir)
{
    char p[PATH_MAX + 64], buf[512] = "";
    snprintf(p, sizeof p, "%s/cgroup.subtree_control", dir);
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    buf[n > 0 ? n : 0] = 0;
    return strstr(buf, "memory") != NULL;
}

static int enter(own_cgroup *c)
{
    mti_cgroup *cg = malloc(sizeof *cg);
    if (!cg || mti_cgroup_find(cg) != 0) {
        free(cg);
        fprintf(stderr, "%s: no memory cgroup to be found (skipped)\n", hv_argv0);
        return HV_SKIP;
    }
    memset(c, 0, sizeof *c);
    c->v1 = cg->v1;
    snprintf(c->home, sizeof c->home, "%s", cg->dir);
    /* Where the hierarchy is mounted: the directory less the cgroup's path. */
    size_t dl = strlen(cg->dir), nl = strcmp(cg->name, "/") == 0 ? 0 : strlen(cg->name);
    size_t mount_len = dl >= nl ? dl - nl : 0;
    free(cg);
    sweep(c->home);
    if (!c->v1)
        (void)write_file(c->home, "cgroup.subtree_control", "+memory");
    int rc = make_below(c, c->home);
    /* Version 2 hands a controller down only from a cgroup without
     * processes of its own (or the root): where this one has some (a
     * container's, a session's), below the nearest ancestor that does. */
    char where[PATH_MAX];
    snprintf(where, sizeof where, "%s", c->home);
    while (rc && !c->v1) {
        char *slash = strrchr(where, '/');
        if (!slash || (size_t)(slash - where) < mount_len)
            break;
        *slash = 0;
        if (contains_memory(where)) {
            sweep(where);
            rc = make_below(c, where);
        }
    }
    if (rc) {
        fprintf(stderr, "%s: cannot make a memory cgroup of its own below %s: %s (skipped)\n", hv_argv0, c->home,
                strerror(-rc));
        return HV_SKIP;
    }
    return 0;
}

static void leave(own_cgroup *c)
{
    char pid[32];
    snprintf(pid, sizeof pid, "%d", (int)getpid());
    (void)write_file(c->home, "cgroup.procs", pid);
    /* The collection helper memtrack started in it may still be exiting. */
    for (int i = 0; i < 100 && rmdir(c->dir) != 0 && errno == EBUSY; i++)
        hv_sleep_ms(20);
}

static uint64_t usage(const own_cgroup *c)
{
    return read_u64(c->dir, c->v1 ? "memory.usage_in_bytes" : "memory.current");
}

static uint64_t peak(const own_cgroup *c)
{
    return read_u64(c->dir, c->v1 ? "memory.max_usage_in_bytes" : "memory.peak");
}

/* Limits the cgroup to `bytes`, swap included (with swap the kernel would
 * page out instead of killing, and the test would prove nothing). */
static int set_limit(const own_cgroup *c, uint64_t bytes)
{
    char v[32];
    snprintf(v, sizeof v, "%llu", (unsigned long long)bytes);
    if (c->v1) {
        int rc = write_file(c->dir, "memory.limit_in_bytes", v);
        (void)write_file(c->dir, "memory.memsw.limit_in_bytes", v); /* where swap is accounted */
        return rc;
    }
    (void)write_file(c->dir, "memory.swap.max", "0");
    return write_file(c->dir, "memory.max", v);
}

/* Every page of m (and of its model, if `model`) gets a byte of its own
 * for `round`: each round changes every byte, and the trace compresses it
 * well (random bytes would make the compressors fall behind, and the trace
 * writer's queue grow, by amounts that vary with the machine's load). */
static void fill(hv_mem *m, unsigned round, int model)
{
    for (size_t off = 0; off < m->size; off += 4096) {
        size_t n = m->size - off < 4096 ? m->size - off : 4096;
        memset(m->ptr + off, (int)((round * 31 + off / 4096 * 7 + 1) & 0xff), n);
        if (model)
            memcpy(m->model + off, m->ptr + off, n);
    }
}

/* Grows by `growth` bytes toward a limit that leaves `slack` beyond what it
 * needs itself: its heap in steps between frames, or (`by_alloc`) one
 * device memory allocated and filled halfway, as a game loading a level. */
static int limited(hv *h, int by_alloc)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    /* Their shadow memory and quarantine count against the limit too, in
     * amounts this behaviour cannot plan for. */
    fprintf(stderr, "%s: a sanitizer's own memory counts against the limit (skipped)\n", hv_argv0);
    return HV_SKIP;
#endif
    own_cgroup c;
    int rc = enter(&c);
    if (rc)
        return rc;
    rc = hv_init(h, NULL);
    if (rc) {
        leave(&c);
        return rc;
    }
    /* What the application itself adds from here: both memories and their
     * models (4 x 96 MiB, all of it touched) and its growth; and 160 MiB of
     * room for the driver's and the capture's own allocations (memtrack's
     * trace writer and capture threads take 30 to 90 MiB here, the more the
     * further the compressors fall behind: docs/layer.md, "Memory limits").
     * The references (2 x 96 MiB) exceed that room by far:
     *  - heap: 128 MiB in steps. The references take it over its limit
     *    unless given back as it grows.
     *  - alloc: 384 MiB at once. Before it the references fit (384 + 160
     *    - 192 - 90 MiB free, at least their 192); unless they are given
     *    back before the allocation (the next submit is too late), the
     *    kernel kills it as it fills the memory. */
    const size_t mem = 96 * MIB, growth = (by_alloc ? 384 : 128) * MIB, slack = 160 * MIB;
    uint64_t base = usage(&c), limit = base + 4 * mem + growth + slack;
    if (set_limit(&c, limit) != 0) {
        fprintf(stderr, "%s: cannot set the cgroup's limit (skipped)\n", hv_argv0);
        hv_fini(h);
        leave(&c);
        return HV_SKIP;
    }
    if (getenv("HV_VERBOSE"))
        fprintf(stderr, "%s: cgroup %s (v%d): %llu MiB used, limit %llu MiB\n", hv_argv0, c.dir, c.v1 ? 1 : 2,
                (unsigned long long)(base / MIB), (unsigned long long)(limit / MIB));
    hv_mem src, rb, big = {0};
    hv_alloc(h, &src, mem, HV_SRC);
    hv_alloc(h, &rb, mem, HV_DST);
    int steps = h->frames > 6 ? h->frames : 6, bad = 0;
    unsigned char **grown = calloc((size_t)steps, sizeof *grown);
    if (!grown)
        hv_die("out of memory");
    for (int f = 0; f < steps && !bad; f++) {
        /* Every byte of the staging memory changes each frame. */
        fill(&src, (unsigned)f, 1);
        bad |= hv_gpu_check(h, &src, &rb, "memory-limit: GPU copy");
        if (!by_alloc) {
            grown[f] = malloc(growth / (size_t)steps);
            if (!grown[f])
                hv_die("out of memory growing the heap");
            memset(grown[f], 0x5a + f, growth / (size_t)steps);
        } else if (f == steps / 2) {
            /* Filled straight (no model): what it holds is the trace's to
             * check (verify), the device never reads it. */
            hv_alloc(h, &big, growth, HV_SRC);
            fill(&big, 77, 0);
        }
    }
    if (getenv("HV_VERBOSE"))
        fprintf(stderr, "%s: peak %llu MiB above the start, limit %llu MiB above it\n", hv_argv0,
                (unsigned long long)((peak(&c) - base) / MIB), (unsigned long long)((limit - base) / MIB));
    for (int f = 0; f < steps; f++)
        free(grown[f]);
    free(grown);
    if (big.mem)
        hv_free(h, &big);
    hv_free(h, &src);
    hv_free(h, &rb);
    hv_fini(h);
    leave(&c);
    return bad;
}

static int memory_limit(hv *h, int argc, char **argv)
{
    (void)argc, (void)argv;
    return limited(h, 0);
}

static int memory_limit_alloc(hv *h, int argc, char **argv)
{
    (void)argc, (void)argv;
    return limited(h, 1);
}

const hv_behaviour hv_limits_behaviours[] = {
    {"memory-limit", "runs in a memory cgroup that leaves it little more than it needs, and grows its heap "
     "toward the limit (where it can make a cgroup: root)", memory_limit},
    {"memory-limit-alloc", "the same, growing by one large device memory it allocates and fills at once",
     memory_limit_alloc},
    {NULL, NULL, NULL},
};
