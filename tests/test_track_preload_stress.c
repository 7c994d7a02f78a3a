/* track + interposer: everything at once, both backends.
 *
 * Writer threads write random bytes of tracked memory (unaligned ranges,
 * pages shared between ranges, untracked gaps) and fault constantly; a
 * collector collects all ranges without pause; a SIGALRM storm (every
 * 50 us) runs a handler that writes tracked memory on whichever thread it
 * interrupts, often memtrack's own fault handler; a churn thread makes
 * "its" pages read-only and writable again (mprotect), writes them, and
 * zeroes them with madvise(DONTNEED); a kernel-writer thread read(2)s a
 * pipe into tracked memory; two looker threads read(2) into untracked
 * memory without pause (every call looks the destination up in the range
 * table: a signal handler's tracked write that interrupts a look-up must
 * never wait for a hook writer that waits for the look-up). At the end the shadow, updated only from
 * reported runs, must equal every tracked byte. Under TSan the handler
 * writes untracked memory (TSan runs handlers with every signal blocked)
 * and the kernel writer is off (TSan cannot see the kernel's writes as
 * atomic and would report the collector's concurrent copy).
 *
 * Usage: test_track_preload_stress [--seed N] */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <sys/time.h>

#include "track_child.h"

#define NPAGES 192
#define NR 12
#define CHURN_EVERY 16 /* pages p with p % CHURN_EVERY == 3 belong to the churn thread */
#ifdef MT_SANITIZER_BUILD
#define WRITES 3000
#define MIN_COLLECTS 30
#else
#define WRITES 80000
#define MIN_COLLECTS 800
#endif

typedef struct rdef {
    size_t off, len;
    mt_range_id id;
} rdef;

static struct {
    mt_tracker *t;
    unsigned char *live, *shadow;
    size_t ps, bytes;
    rdef r[NR];
    int nr;
    _Atomic int writers_left;
    _Atomic long collects;
    _Atomic int stop;
    int pipe_fd[2];
    uint64_t seed;
} g;

static int churn_page(size_t p) { return p % CHURN_EVERY == 3; }

static size_t random_plain_offset(uint64_t *rng)
{
    for (;;) {
        size_t off = (size_t)mt_test_below(rng, g.bytes);
        if (!churn_page(off / g.ps))
            return off;
    }
}

static void *writer(void *arg)
{
    uint64_t rng = g.seed * 13 + (uint64_t)(uintptr_t)arg;
    for (long i = 0; i < WRITES || atomic_load(&g.collects) < MIN_COLLECTS; i++) {
        size_t off = random_plain_offset(&rng);
        __atomic_store_n(&g.live[off], (unsigned char)mt_test_rand(&rng), __ATOMIC_RELAXED);
        if (i % 512 == 511)
            sched_yield();
    }
    atomic_fetch_sub(&g.writers_left, 1);
    return NULL;
}

static void collect_all(void)
{
    mt_dirty_run runs[32];
    long n;
    do {
        n = mt_tracker_collect_all(g.t, runs, 32);
        MT_CHECK_OK(n);
        for (long i = 0; i < n; i++) {
            int k;
            for (k = 0; k < g.nr && g.r[k].id != runs[i].range; k++)
                ;
            MT_CHECK(k < g.nr);
            size_t a = g.r[k].off + runs[i].offset;
            for (size_t x = a; x < a + runs[i].length; x++)
                g.shadow[x] = __atomic_load_n(&g.live[x], __ATOMIC_RELAXED);
        }
    } while (n == 32);
}

static void *collector(void *arg)
{
    (void)arg;
    while (atomic_load(&g.writers_left) > 0) {
        collect_all();
        atomic_fetch_add(&g.collects, 1);
    }
    return NULL;
}

static void *churner(void *arg)
{
    (void)arg;
    uint64_t rng = g.seed ^ 0xc4c4;
    long rounds = 0;
    while (!atomic_load(&g.stop)) {
        size_t p = (size_t)mt_test_below(&rng, NPAGES / CHURN_EVERY) * CHURN_EVERY + 3;
        unsigned char *pg = g.live + p * g.ps;
        switch (mt_test_below(&rng, 3)) {
        case 0:
            MT_CHECK(mprotect(pg, g.ps, PROT_READ) == 0);
            MT_CHECK(mprotect(pg, g.ps, PROT_READ | PROT_WRITE) == 0);
            break;
        case 1:
            MT_CHECK(madvise(pg, g.ps, MADV_DONTNEED) == 0);
            break;
        default:
            break;
        }
        for (int k = 0; k < 8; k++)
            __atomic_store_n(&pg[mt_test_below(&rng, g.ps)], (unsigned char)mt_test_rand(&rng),
                             __ATOMIC_RELAXED);
        rounds++;
    }
    printf("    churn: %ld mprotect/madvise rounds\n", rounds);
    return NULL;
}

static void *kernel_writer(void *arg)
{
    (void)arg;
    uint64_t rng = g.seed ^ 0x77;
    unsigned char buf[512];
    long reads = 0;
    while (!atomic_load(&g.stop)) {
        size_t len = 1 + (size_t)mt_test_below(&rng, sizeof buf);
        size_t off;
        do
            off = random_plain_offset(&rng);
        while (off + len > g.bytes || churn_page((off + len - 1) / g.ps) ||
               (off / g.ps != (off + len - 1) / g.ps && churn_page(off / g.ps + 1)));
        for (size_t i = 0; i < len; i++)
            buf[i] = (unsigned char)mt_test_rand(&rng);
        MT_CHECK_INT_EQ(write(g.pipe_fd[1], buf, len), (long)len);
        MT_CHECK_INT_EQ(read(g.pipe_fd[0], g.live + off, len), (long)len);
        reads++;
    }
    printf("    kernel writer: %ld reads into tracked memory\n", reads);
    return NULL;
}

static void *looker(void *arg)
{
    (void)arg;
    int fd = open("/dev/zero", O_RDONLY | O_CLOEXEC);
    MT_CHECK(fd >= 0);
    char buf[16];
    while (!atomic_load(&g.stop))
        MT_CHECK_INT_EQ(read(fd, buf, 1), 1);
    close(fd);
    return NULL;
}

static unsigned char g_untracked[NPAGES * 4096];
static _Atomic unsigned g_alarms;

static void on_alarm(int sig)
{
    (void)sig;
    unsigned k = atomic_fetch_add(&g_alarms, 1);
    size_t off = ((size_t)k * 7919) % g.bytes;
    if (churn_page(off / g.ps))
        off = (off + g.ps) % g.bytes;
    unsigned char *dst = TC_TSAN ? g_untracked : g.live;
    __atomic_store_n(&dst[off], (unsigned char)(k | 1), __ATOMIC_RELAXED);
}

static void layout(uint64_t *rng)
{
    size_t pos = (size_t)mt_test_below(rng, 300);
    g.nr = 0;
    while (g.nr < NR && pos < g.bytes - 64) {
        size_t len = 1 + (size_t)mt_test_below(rng, 30 * g.ps);
        if (pos + len > g.bytes)
            len = g.bytes - pos;
        g.r[g.nr].off = pos;
        g.r[g.nr].len = len;
        g.nr++;
        pos += len;
        if (mt_test_below(rng, 2))
            pos += (size_t)mt_test_below(rng, g.ps); /* a gap, often inside a page */
    }
}

static void run(mt_track_backend be, int nthreads)
{
    memset(&g.r, 0, sizeof g.r);
    g.ps = tu_page();
    g.bytes = NPAGES * g.ps;
    g.live = tu_map(g.bytes);
    g.shadow = calloc(g.bytes, 1);
    MT_CHECK(g.shadow != NULL);
    atomic_store(&g.stop, 0);
    atomic_store(&g.collects, 0);
    uint64_t rng = g.seed;
    layout(&rng);
    mt_tracker_opts o = {.backend = be};
    MT_CHECK_OK(mt_tracker_create(&o, &g.t));
    for (int k = 0; k < g.nr; k++)
        MT_CHECK_OK(mt_tracker_add(g.t, g.live + g.r[k].off, g.r[k].len, NULL, &g.r[k].id));
    MT_CHECK(pipe(g.pipe_fd) == 0);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigfillset(&sa.sa_mask); /* with the interposer, blocking SIGSEGV here is fine */
    sa.sa_flags = SA_RESTART;
    MT_CHECK(sigaction(SIGALRM, &sa, NULL) == 0);
    struct itimerval it = {{0, 50}, {0, 50}};
    MT_CHECK(setitimer(ITIMER_REAL, &it, NULL) == 0);

    atomic_store(&g.writers_left, nthreads);
    pthread_t w[8], col, ch, kw, lk[2];
    pthread_create(&col, NULL, collector, NULL);
    pthread_create(&ch, NULL, churner, NULL);
    for (int i = 0; i < 2; i++)
        pthread_create(&lk[i], NULL, looker, NULL);
    if (!TC_TSAN)
        pthread_create(&kw, NULL, kernel_writer, NULL);
    for (int i = 0; i < nthreads; i++)
        pthread_create(&w[i], NULL, writer, (void *)(uintptr_t)(i + 1));
    for (int i = 0; i < nthreads; i++)
        pthread_join(w[i], NULL);
    pthread_join(col, NULL);
    atomic_store(&g.stop, 1);
    pthread_join(ch, NULL);
    for (int i = 0; i < 2; i++)
        pthread_join(lk[i], NULL);
    if (!TC_TSAN)
        pthread_join(kw, NULL);
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    signal(SIGALRM, SIG_IGN);
    collect_all();

    size_t checked = 0;
    for (int k = 0; k < g.nr; k++) {
        for (size_t x = g.r[k].off; x < g.r[k].off + g.r[k].len; x++)
            if (g.shadow[x] != g.live[x]) {
                fprintf(stderr, "lost write: range %d byte %zu (page %zu%s)\n", k, x, x / g.ps,
                        churn_page(x / g.ps) ? ", churned" : "");
                MT_CHECK(0);
            }
        checked += g.r[k].len;
    }
    printf("  %-6s threads=%d ranges=%d collects=%ld alarms=%u: %zu bytes exact\n", mt_track_backend_name(be),
           nthreads, g.nr, atomic_load(&g.collects), atomic_load(&g_alarms), checked);
    mt_tracker_destroy(g.t);
    close(g.pipe_fd[0]);
    close(g.pipe_fd[1]);
    munmap(g.live, g.bytes);
    free(g.shadow);
}

int main(int argc, char **argv)
{
    g.seed = mt_test_seed(argc, argv);
    if (!tc_need_interposer())
        return 77;
    mt_track_backend be[2];
    int nb = tu_backends(be);
    for (int i = 0; i < nb; i++) {
        run(be[i], 2);
        g.seed++;
        run(be[i], 4);
        g.seed++;
    }
    puts("track preload stress: ok");
    return 0;
}
