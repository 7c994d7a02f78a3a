/* Behaviours: what real applications do around their writes that the other
 * groups do not: start processes (system, popen, posix_spawn, vfork+exec)
 * and fork while other threads write mapped memory, submit from one thread
 * while another writes the same memory, cancel a thread blocked reading into
 * mapped memory, write with the CPU's less common stores (non-temporal,
 * straddling AVX, rep movsb, atomics), lock all memory, close every
 * descriptor they did not open, run with few descriptors, and use threads
 * that existed before Vulkan did. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "../uring_util.h"
#include "hv.h"

extern char **environ;

/* ---- writer threads ------------------------------------------------------ */

typedef struct writer {
    hv_mem *m;
    VkDeviceSize base, len; /* the writer's region */
    VkDeviceSize chunk, stride; /* each write: `chunk` bytes at `stride` steps */
    uint64_t seed;
    atomic_int *stop;
    long writes;
    pthread_t t;
} writer;

static void *writer_loop(void *p)
{
    writer *w = p;
    VkDeviceSize pos = 0;
    while (!atomic_load(w->stop)) {
        if (pos + w->chunk > w->len)
            pos = (pos + 1) % w->stride;
        hv_write(w->m, w->base + pos, w->chunk, w->seed + (uint64_t)w->writes);
        pos += w->stride;
        w->writes++;
    }
    return NULL;
}

static void writers_start(writer *w, int n, hv_mem *m, VkDeviceSize base, VkDeviceSize each, atomic_int *stop,
                          uint64_t seed)
{
    atomic_store(stop, 0);
    for (int i = 0; i < n; i++) {
        w[i] = (writer){.m = m, .base = base + (VkDeviceSize)i * each, .len = each, .chunk = 700,
                        .stride = 4096 + 333, .seed = seed + (uint64_t)i * 1000003u, .stop = stop};
        if (pthread_create(&w[i].t, NULL, writer_loop, &w[i]) != 0)
            hv_die("pthread_create failed");
    }
}

static void writers_stop(writer *w, int n, atomic_int *stop)
{
    atomic_store(stop, 1);
    for (int i = 0; i < n; i++)
        pthread_join(w[i].t, NULL);
}

/* ---- processes started while threads write -------------------------------- */

static int spawn_writers(hv *h, int argc, char **argv)
{
    (void)argc, (void)argv;
    int rc = hv_init(h, NULL);
    if (rc)
        return rc;
    hv_mem src, rb;
    hv_alloc(h, &src, 4u << 20, HV_SRC);
    hv_alloc(h, &rb, 4u << 20, HV_DST);
    int bad = 0;
    atomic_int stop;
    writer w[2];
    for (int f = 0; f < h->frames && !bad; f++) {
        writers_start(w, 2, &src, 0, 2u << 20, &stop, 100 + (uint64_t)f * 10);
        hv_sleep_ms(5);
        /* system(): a shell, its status */
        int st = system("exit 3");
        bad |= hv_status_is(st, 3, "system()");
        /* popen(): a child's output through a pipe */
        FILE *p = popen("echo hello-from-popen", "r");
        char line[64] = {0};
        if (!p || !fgets(line, sizeof line, p) || strcmp(line, "hello-from-popen\n") != 0) {
            fprintf(stderr, "%s: popen read '%s'\n", hv_argv0, line);
            bad = 1;
        }
        if (p)
            bad |= hv_status_is(pclose(p), 0, "pclose()");
        /* posix_spawn(), with a signal mask and default dispositions set */
        pid_t pid;
        char *sargv[] = {"sh", "-c", "exit 5", NULL};
        posix_spawnattr_t at;
        posix_spawnattr_init(&at);
        sigset_t none, all;
        sigemptyset(&none);
        sigfillset(&all);
        posix_spawnattr_setsigmask(&at, &none);
        posix_spawnattr_setsigdefault(&at, &all);
        posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
        if (posix_spawn(&pid, "/bin/sh", NULL, &at, sargv, environ) != 0) {
            fprintf(stderr, "%s: posix_spawn failed\n", hv_argv0);
            bad = 1;
        } else {
            bad |= hv_wait_status(pid, 5, "posix_spawn");
        }
        posix_spawnattr_destroy(&at);
        /* vfork() + exec */
        pid = vfork();
        if (pid == 0) {
            execl("/bin/sh", "sh", "-c", "exit 7", (char *)NULL);
            _exit(127);
        }
        bad |= hv_wait_status(pid, 7, "vfork+exec");
        /* fork() + exec from a writer-racing main thread */
        pid = fork();
        if (pid == 0) {
            execl("/bin/sh", "sh", "-c", "exit 9", (char *)NULL);
            _exit(127);
        }
        bad |= hv_wait_status(pid, 9, "fork+exec");
        hv_sleep_ms(5);
        writers_stop(w, 2, &stop);
        hv_write(&src, 3u << 20, 100000, 7 + (uint64_t)f);
        bad |= hv_gpu_check(h, &src, &rb, "spawn-writers: GPU copy");
    }
    hv_free(h, &src);
    hv_free(h, &rb);
    hv_fini(h);
    return bad;
}

/* ---- submits racing writes to the same memory ------------------------------ */

/* Region A (the writer's) and region B (what each submit reads) interleave
 * within the same pages: A is the first half of every page, B the second. */
#define RACE_PAGES 256

typedef struct racer {
    hv_mem *m;
    atomic_int *stop;
    long writes;
    pthread_t t;
} racer;

static void *race_writer(void *p)
{
    racer *r = p;
    uint64_t s = 99;
    while (!atomic_load(r->stop)) {
        VkDeviceSize page = hv_rnd(&s) % RACE_PAGES;
        hv_write(r->m, page * 4096 + (hv_rnd(&s) % 1024), 1024, hv_rnd(&s));
        r->writes++;
    }
    return NULL;
}

typedef struct forker {
    hv_mem *m;
    atomic_int *stop;
    int forks, bad;
    pthread_t t;
} forker;

static void *fork_loop(void *p)
{
    forker *f = p;
    while (!atomic_load(f->stop) && !f->bad) {
        pid_t pid = fork();
        if (pid == 0) {
            /* The child writes its copy (both halves) and ends with _exit:
             * the child of a multi-threaded process may only make
             * async-signal-safe calls, and exit() runs destructors whose
             * locks another thread may have held at the fork (with the
             * validation layer loaded, 11 of 20 runs hung or failed
             * without memtrack). fork-child covers exit() from a
             * single-threaded parent. */
            memset(f->m->ptr + (RACE_PAGES + 1) * 4096, 0xee, 8 * 4096);
            memset(f->m->ptr + 7 * 4096, 0xdd, 4096);
            _exit(0);
        }
        if (pid < 0) {
            f->bad = 1;
            break;
        }
        f->bad |= hv_wait_status(pid, 0, "fork from a thread while another writes");
        f->forks++;
    }
    return NULL;
}

static int race_common(hv *h, int forking)
{
    int rc = hv_init(h, NULL);
    if (rc)
        return rc;
    hv_mem src, rb;
    hv_alloc(h, &src, (RACE_PAGES + 16) * 4096, HV_SRC);
    hv_alloc(h, &rb, (RACE_PAGES + 16) * 4096, HV_DST);
    VkBufferCopy regions[RACE_PAGES];
    for (int i = 0; i < RACE_PAGES; i++)
        regions[i] = (VkBufferCopy){.srcOffset = (VkDeviceSize)i * 4096 + 2048,
                                    .dstOffset = (VkDeviceSize)i * 4096 + 2048, .size = 2048};
    int bad = 0;
    atomic_int stop;
    atomic_store(&stop, 0);
    racer r = {.m = &src, .stop = &stop};
    forker fk = {.m = &src, .stop = &stop};
    if (pthread_create(&r.t, NULL, race_writer, &r) != 0)
        hv_die("pthread_create failed");
    if (forking && pthread_create(&fk.t, NULL, fork_loop, &fk) != 0)
        hv_die("pthread_create failed");
    uint64_t s = 5;
    int rounds = h->frames * 10;
    for (int f = 0; f < rounds && !bad && !fk.bad; f++) {
        /* B: a few halves written by this thread, then a submit reading B */
        for (int k = 0; k < 16; k++) {
            VkDeviceSize page = hv_rnd(&s) % RACE_PAGES;
            hv_write(&src, page * 4096 + 2048, 2048, hv_rnd(&s));
        }
        hv_begin(h);
        vkCmdCopyBuffer(h->cmd, src.buf, rb.buf, RACE_PAGES, regions);
        hv_end(h);
        hv_submit_wait(h);
        for (int i = 0; i < RACE_PAGES && !bad; i++)
            if (hv_compare(rb.ptr + i * 4096 + 2048, src.model + i * 4096 + 2048, 2048,
                           forking ? "fork-racing: B halves" : "submit-race: B halves")) {
                fprintf(stderr, "%s: (page %d, round %d)\n", hv_argv0, i, f);
                bad = 1;
            }
    }
    atomic_store(&stop, 1);
    pthread_join(r.t, NULL);
    if (forking) {
        pthread_join(fk.t, NULL);
        bad |= fk.bad;
        if (fk.forks == 0) {
            fprintf(stderr, "%s: no fork happened\n", hv_argv0);
            bad = 1;
        }
        if (src.ptr[(RACE_PAGES + 1) * 4096] == 0xee) {
            fprintf(stderr, "%s: a child's write reached the parent\n", hv_argv0);
            bad = 1;
        }
    }
    bad |= hv_compare(src.ptr, src.model, (size_t)src.size, "racing: the app reads back its writes");
    bad |= hv_gpu_check(h, &src, &rb, "racing: final GPU copy");
    hv_free(h, &src);
    hv_free(h, &rb);
    hv_fini(h);
    return bad;
}

static int submit_race(hv *h, int argc, char **argv)
{
    (void)argc, (void)argv;
    return race_common(h, 0);
}

static int fork_racing(hv *h, int argc, char **argv)
{
    (void)argc, (void)argv;
    return race_common(h, 1);
}

/* ---- a thread cancelled in read() into mapped memory ----------------------- */

typedef struct reader {
    int fd;
    unsigned char *dst;
    size_t len;
    ssize_t got;
} reader;

static void *blocked_reader(void *p)
{
    reader *r = p;
    r->got = read(r->fd, r->dst, r->len);
    return NULL;
}

static void *write_and_exit(void *p)
{
    hv_mem *m = p;
    hv_write(m, 200000, 30000, 4242);
    pthread_exit(NULL);
}

static int cancel_read(hv *h, int argc, char **argv)
{
    (void)argc, (void)argv;
    int rc = hv_init(h, NULL);
    if (rc)
        return rc;
    hv_mem src, rb;
    hv_alloc(h, &src, 1u << 20, HV_SRC);
    hv_alloc(h, &rb, 1u << 20, HV_DST);
    int bad = 0;
    for (int f = 0; f < h->frames && !bad; f++) {
        int pfd[2];
        if (pipe(pfd) != 0)
            hv_die("pipe failed");
        VkDeviceSize off = 4096 * 10 + 100 + (VkDeviceSize)f * 4096;
        reader r = {.fd = pfd[0], .dst = src.ptr + off, .len = 8192};
        pthread_t t;
        pthread_create(&t, NULL, blocked_reader, &r);
        hv_sleep_ms(30);
        pthread_cancel(t);
        void *res;
        pthread_join(t, &res);
        if (res != PTHREAD_CANCELED) {
            fprintf(stderr, "%s: the reader was not cancelled\n", hv_argv0);
            bad = 1;
        }
        /* The same pages: the app's own writes, then a read that completes. */
        hv_write(&src, off, 8192, 11 + (uint64_t)f);
        unsigned char data[6000];
        hv_pattern(data, sizeof data, 77 + (uint64_t)f);
        if (write(pfd[1], data, sizeof data) != (ssize_t)sizeof data)
            hv_die("pipe write failed");
        ssize_t got = read(pfd[0], src.ptr + off + 1000, sizeof data);
        if (got != (ssize_t)sizeof data) {
            fprintf(stderr, "%s: read after the cancel returned %zd (%s)\n", hv_argv0, got,
                    got < 0 ? strerror(errno) : "short");
            bad = 1;
        }
        memcpy(src.model + off + 1000, data, sizeof data);
        close(pfd[0]);
        close(pfd[1]);
        /* A thread that writes and exits at once. */
        pthread_create(&t, NULL, write_and_exit, &src);
        pthread_join(t, NULL);
        bad |= hv_gpu_check(h, &src, &rb, "cancel-read: GPU copy");
    }
    hv_free(h, &src);
    hv_free(h, &rb);
    hv_fini(h);
    return bad;
}

/* ---- the CPU's less common stores ------------------------------------------ */

#if defined(__x86_64__)
__attribute__((target("avx2"))) static void avx2_stores(unsigned char *p, unsigned char *model, size_t page,
                                                         uint64_t seed)
{
    unsigned char v[32];
    hv_pattern(v, 32, seed);
    /* Straddling a page boundary: 16 bytes on each side. */
    unsigned char *at = p + page * 4096 - 16;
    _mm256_storeu_si256((__m256i *)(void *)at, _mm256_loadu_si256((const __m256i *)(const void *)v));
    memcpy(model + page * 4096 - 16, v, 32);
    /* A masked store straddling the next boundary: only lanes in the second page. */
    at = p + (page + 1) * 4096 - 16;
    __m256i mask = _mm256_setr_epi32(0, 0, 0, 0, -1, -1, -1, -1);
    _mm256_maskstore_epi32((int *)(void *)at, mask, _mm256_loadu_si256((const __m256i *)(const void *)v));
    memcpy(model + (page + 1) * 4096, v + 16, 16);
    /* A masked store into a page with an all-zero mask: nothing written. */
    _mm256_maskstore_epi32((int *)(void *)(p + (page + 3) * 4096 + 64), _mm256_setzero_si256(),
                           _mm256_set1_epi32(-1));
    /* Non-temporal 256-bit stores. */
    unsigned char *nt = p + (page + 4) * 4096 + 256;
    for (int i = 0; i < 8; i++) {
        _mm256_stream_si256((__m256i *)(void *)(nt + i * 32), _mm256_loadu_si256((const __m256i *)(const void *)v));
        memcpy(model + (page + 4) * 4096 + 256 + (size_t)i * 32, v, 32);
    }
    _mm_sfence();
}

static int have_avx2(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2");
}
#endif

static int cpu_stores(hv *h, int argc, char **argv)
{
    (void)argc, (void)argv;
    int rc = hv_init(h, NULL);
    if (rc)
        return rc;
    hv_mem src, rb;
    hv_alloc(h, &src, 4u << 20, HV_SRC);
    hv_alloc(h, &rb, 4u << 20, HV_DST);
    int bad = 0;
    for (int f = 0; f < h->frames && !bad; f++) {
        size_t base = (size_t)f * 64;
#if defined(__x86_64__)
        /* SSE2 non-temporal stores, one per page over 16 pages. */
        for (int i = 0; i < 16; i++) {
            unsigned char v[16];
            hv_pattern(v, 16, 1000 + (uint64_t)(f * 16 + i));
            size_t o = (base + (size_t)i) * 4096 + 48;
            _mm_stream_si128((__m128i *)(void *)(src.ptr + o), _mm_loadu_si128((const __m128i *)(const void *)v));
            memcpy(src.model + o, v, 16);
        }
        /* Non-temporal 4- and 8-byte stores. */
        _mm_stream_si32((int *)(void *)(src.ptr + (base + 17) * 4096 + 8), 0x12345678);
        memcpy(src.model + (base + 17) * 4096 + 8, &(int){0x12345678}, 4);
        _mm_stream_si64((long long *)(void *)(src.ptr + (base + 18) * 4096 + 16), 0x1122334455667788LL);
        memcpy(src.model + (base + 18) * 4096 + 16, &(long long){0x1122334455667788LL}, 8);
        _mm_sfence();
        /* SSE 16-byte store straddling a page boundary. */
        {
            unsigned char v[16];
            hv_pattern(v, 16, 3000 + (uint64_t)f);
            size_t o = (base + 20) * 4096 - 8;
            _mm_storeu_si128((__m128i *)(void *)(src.ptr + o), _mm_loadu_si128((const __m128i *)(const void *)v));
            memcpy(src.model + o, v, 16);
        }
        if (have_avx2())
            avx2_stores(src.ptr, src.model, base + 22, 4000 + (uint64_t)f);
        /* rep movsb / rep stosb over 1 MiB + change, unaligned. */
        {
            size_t o = (2u << 20) + 123 + (size_t)f * 4096, n = (1u << 20) + 77;
            unsigned char *tmp = malloc(n);
            hv_pattern(tmp, n, 5000 + (uint64_t)f);
            unsigned char *d = src.ptr + o;
            const unsigned char *s = tmp;
            size_t c = n;
            __asm__ volatile("rep movsb" : "+D"(d), "+S"(s), "+c"(c) : : "memory");
            memcpy(src.model + o, tmp, n);
            free(tmp);
            d = src.ptr + (base + 40) * 4096 + 5;
            c = 9000;
            __asm__ volatile("rep stosb" : "+D"(d), "+c"(c) : "a"(0xabu) : "memory");
            memset(src.model + (base + 40) * 4096 + 5, 0xab, 9000);
        }
        /* Locked read-modify-writes straddling nothing, one per page. */
        for (int i = 0; i < 8; i++) {
            size_t o = (base + 50 + (size_t)i) * 4096 + 64;
            uint64_t *a = (uint64_t *)(void *)(src.ptr + o);
            uint64_t *m = (uint64_t *)(void *)(src.model + o);
            __atomic_fetch_add(a, 5 + (uint64_t)i, __ATOMIC_SEQ_CST);
            *m += 5 + (uint64_t)i;
            uint64_t exp = *m;
            __atomic_compare_exchange_n(a + 1, &(uint64_t){*(m + 1)}, exp * 3, 0, __ATOMIC_SEQ_CST,
                                        __ATOMIC_SEQ_CST);
            m[1] = exp * 3;
            __atomic_exchange_n((uint32_t *)(void *)(src.ptr + o + 32), 0xdeadbeefu, __ATOMIC_SEQ_CST);
            memcpy(src.model + o + 32, &(uint32_t){0xdeadbeefu}, 4);
        }
        /* A locked RMW split across two pages (a split lock: legal, slow). */
        if (0) {
        }
#else
        hv_write(&src, base * 4096, 4096, 1);
#endif
        bad |= hv_compare(src.ptr, src.model, (size_t)src.size, "cpu-stores: the app reads back its writes");
        bad |= hv_gpu_check(h, &src, &rb, "cpu-stores: GPU copy");
    }
    hv_free(h, &src);
    hv_free(h, &rb);
    hv_fini(h);
    return bad;
}

/* ---- threads that existed before Vulkan ------------------------------------ */

typedef struct early {
    pthread_barrier_t *go, *done;
    hv *h;
    hv_mem *src, *rb;
    int idx, bad;
    atomic_int *quit;
} early;

static void *early_thread(void *p)
{
    early *e = p;
    for (;;) {
        pthread_barrier_wait(e->go);
        if (atomic_load(e->quit))
            return NULL;
        for (int k = 0; k < 20; k++)
            hv_write(e->src, (VkDeviceSize)e->idx * 300000 + (VkDeviceSize)k * 9001, 3000,
                     (uint64_t)(e->idx * 100 + k) + (uint64_t)e->bad);
        pthread_barrier_wait(e->done);
        if (e->idx == 0) /* the first thread also submits and checks */
            e->bad |= hv_gpu_check(e->h, e->src, e->rb, "early-threads: GPU copy from an early thread");
        pthread_barrier_wait(e->done);
    }
}

static int early_threads(hv *h, int argc, char **argv)
{
    (void)argc, (void)argv;
    pthread_barrier_t go, done;
    pthread_barrier_init(&go, NULL, 4);
    pthread_barrier_init(&done, NULL, 4);
    atomic_int quit;
    atomic_store(&quit, 0);
    early e[3];
    pthread_t t[3];
    hv_mem src, rb;
    /* Threads first, one with every signal blocked: no Vulkan yet. */
    for (int i = 0; i < 3; i++) {
        e[i] = (early){.go = &go, .done = &done, .h = h, .src = &src, .rb = &rb, .idx = i, .quit = &quit};
        sigset_t all, old;
        sigfillset(&all);
        if (i == 2)
            pthread_sigmask(SIG_BLOCK, &all, &old);
        pthread_create(&t[i], NULL, early_thread, &e[i]);
        if (i == 2)
            pthread_sigmask(SIG_SETMASK, &old, NULL);
    }
    int rc = hv_init(h, NULL);
    if (rc)
        return rc;
    hv_alloc(h, &src, 1u << 20, HV_SRC);
    hv_alloc(h, &rb, 1u << 20, HV_DST);
    int bad = 0;
    for (int f = 0; f < h->frames; f++) {
        pthread_barrier_wait(&go);
        pthread_barrier_wait(&done);
        pthread_barrier_wait(&done);
    }
    atomic_store(&quit, 1);
    pthread_barrier_wait(&go);
    for (int i = 0; i < 3; i++) {
        pthread_join(t[i], NULL);
        bad |= e[i].bad;
    }
    bad |= hv_gpu_check(h, &src, &rb, "early-threads: GPU copy from main");
    hv_free(h, &src);
    hv_free(h, &rb);
    hv_fini(h);
    return bad;
}

/* ---- memory locked, descriptors scarce or closed ---------------------------- */

static int mlock_all(hv *h, int argc, char **argv)
{
    int flags = MCL_CURRENT | MCL_FUTURE;
    if (argc > 1 && strcmp(argv[1], "onfault") == 0)
        flags |= MCL_ONFAULT;
    /* With a small RLIMIT_MEMLOCK (an unprivileged user's 8 MiB; root's
     * CAP_IPC_LOCK ignores it) mlockall succeeds and every later mapping
     * past the limit fails: Vulkan itself cannot start, with or without a
     * capture. */
    struct rlimit ml;
    if (geteuid() != 0 && getrlimit(RLIMIT_MEMLOCK, &ml) == 0 && ml.rlim_cur != RLIM_INFINITY &&
        ml.rlim_cur < (1ull << 30)) {
        fprintf(stderr, "%s: RLIMIT_MEMLOCK is %llu bytes: too little to lock a Vulkan process\n", hv_argv0,
                (unsigned long long)ml.rlim_cur);
        return HV_SKIP;
    }
    if (mlockall(flags) != 0) {
        fprintf(stderr, "%s: mlockall: %s\n", hv_argv0, strerror(errno));
        return HV_SKIP;
    }
    int rc = hv_init(h, NULL);
    if (rc)
        return rc;
    int bad = hv_frames_of_work(h, 10, "mlock-all: GPU copy");
    hv_fini(h);
    return bad;
}

/* Counts the descriptors that can still be opened (up to 4096). */
static int free_fds(void)
{
    int fds[4096], n = 0;
    while (n < 4096 && (fds[n] = open("/dev/null", O_RDONLY)) >= 0)
        n++;
    for (int i = 0; i < n; i++)
        close(fds[i]);
    return n;
}

/* Calls visit(fd, what it refers to, arg) for each open descriptor but the
 * listing's own. */
static void each_fd(void (*visit)(int fd, const char *target, void *arg), void *arg)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *de;
    while (d && (de = readdir(d))) {
        char path[300], target[256];
        if (de->d_name[0] == '.' || atoi(de->d_name) == dirfd(d))
            continue;
        snprintf(path, sizeof path, "/proc/self/fd/%s", de->d_name);
        ssize_t n = readlink(path, target, sizeof target - 1);
        target[n > 0 ? n : 0] = '\0';
        visit(atoi(de->d_name), target, arg);
    }
    if (d)
        closedir(d);
}

static void print_fd(int fd, const char *target, void *devnull)
{
    if (strcmp(target, "/dev/null") == 0)
        ++*(int *)devnull;
    else
        fprintf(stderr, "few-fds: fd %d -> %s\n", fd, target);
}

/* few-fds failing: what the descriptors are (the held /dev/null ones
 * counted, the rest by target), so that a failure says who used them. */
static int g_fds_dump;
static void dump_fds(void)
{
    if (!g_fds_dump)
        return;
    int devnull = 0;
    each_fd(print_fd, &devnull);
    fprintf(stderr, "few-fds: and %d on /dev/null\n", devnull);
}

static int few_fds(hv *h, int argc, char **argv)
{
    (void)argc, (void)argv;
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = 64;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
        hv_die("setrlimit: %s", strerror(errno));
    /* Use all but 24 descriptors, as a busy server would. */
    int before = free_fds();
    int hold[64], nhold = 0;
    while (nhold < before - 24)
        hold[nhold++] = open("/dev/null", O_RDONLY);
    /* hv_die exits: then the list is printed at exit, after the driver's
     * destructors may have closed its own descriptors. */
    g_fds_dump = 1;
    atexit(dump_fds);
    int rc = hv_init(h, NULL);
    if (rc) {
        dump_fds();
        g_fds_dump = 0;
        return rc;
    }
    int bad = hv_frames_of_work(h, 20, "few-fds: GPU copy");
    if (bad)
        dump_fds();
    g_fds_dump = 0;
    hv_fini(h);
    for (int i = 0; i < nhold; i++)
        close(hold[i]);
    return bad;
}

/* Is the descriptor one of memtrack's (its trace, a userfaultfd, pagemap,
 * the collection helper's pidfd or shared memory)? This application opens
 * none of these itself. */
static int memtrack_fd(const char *target)
{
    size_t n = strlen(target);
    return (n > 7 && strcmp(target + n - 7, ".mtrace") == 0) || strstr(target, "userfaultfd") ||
           strstr(target, "pagemap") || strstr(target, "[pidfd]") || strstr(target, "memtrack");
}

/* Where fd-numbers wants memtrack's descriptors: at or above `floor`. */
struct fd_floor {
    int floor;
    const char *name;
    int bad;
};

/* One of memtrack's descriptors below the floor: said. */
static void below_floor(int fd, const char *target, void *arg)
{
    struct fd_floor *f = arg;
    if (fd < f->floor && memtrack_fd(target)) {
        fprintf(stderr, "%s: %s: descriptor %d (%s) is memtrack's, below %d\n", hv_argv0, f->name, fd,
                target, f->floor);
        f->bad = 1;
    }
}

/* The kernel gives the lowest free descriptor number, below the soft
 * RLIMIT_NOFILE, and applications count on both: a daemon closes 0 and
 * expects its next open() to be 0; a server sizes its connections to its
 * limit. With a soft limit of 64 (under the hard one) and descriptor 0
 * closed before Vulkan starts, none of memtrack's own descriptors may sit
 * below 64: not on 0 (where the trace file landed before they were moved),
 * and not in the budget (NVIDIA's driver, which takes 0 itself, needs two
 * descriptors per allocation). What the application opens next is then
 * what it would get without memtrack.
 * `hard` (fd-numbers-hard): soft and hard limit both 128, as a service
 * manager or container may set them; nothing can sit above the limit, so
 * memtrack's descriptors must be in its top eighth (112 and up), leaving
 * the low numbers, 0 first, to the application. */
static int fd_numbers_at(hv *h, int hard)
{
    const char *name = hard ? "fd-numbers-hard" : "fd-numbers";
    rlim_t lim = hard ? 128 : 64;
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_max < lim || (!hard && rl.rlim_max == lim)) {
        fprintf(stderr, "%s: %s: hard RLIMIT_NOFILE %llu leaves no room: skipped\n", hv_argv0, name,
                (unsigned long long)rl.rlim_max);
        return HV_SKIP;
    }
    rl.rlim_cur = lim;
    if (hard)
        rl.rlim_max = lim;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
        hv_die("setrlimit: %s", strerror(errno));
    close(0);
    int rc = hv_init(h, NULL);
    if (rc)
        return rc;
    struct fd_floor f = {hard ? (int)(lim - lim / 8) : (int)lim, name, 0};
    f.bad = hv_frames_of_work(h, 10, hard ? "fd-numbers-hard: GPU copy" : "fd-numbers: GPU copy");
    each_fd(below_floor, &f);
    hv_fini(h);
    return f.bad;
}

static int fd_numbers(hv *h, int argc, char **argv)
{
    (void)argc, (void)argv;
    return fd_numbers_at(h, 0);
}

static int fd_numbers_hard(hv *h, int argc, char **argv)
{
    (void)argc, (void)argv;
    return fd_numbers_at(h, 1);
}

/* Closes every descriptor but 0-2 before Vulkan (as daemons and
 * sandboxed helpers do at start), then opens its own files: nothing but the
 * application may write them. Also dup2()s onto high numbers. */
static int close_all_fds(hv *h, int argc, char **argv)
{
    int how = argc > 1 ? atoi(argv[1]) : 0;
    if (how == 0) {
#ifdef SYS_close_range
        if (syscall(SYS_close_range, 3u, ~0u, 0u) != 0)
#endif
            for (int fd = 3; fd < 1024; fd++)
                close(fd);
    } else {
        DIR *d = opendir("/proc/self/fd");
        int fds[256], n = 0;
        struct dirent *de;
        while (d && (de = readdir(d)) && n < 256)
            if (de->d_name[0] != '.' && atoi(de->d_name) > 2 && atoi(de->d_name) != dirfd(d))
                fds[n++] = atoi(de->d_name);
        if (d)
            closedir(d);
        for (int i = 0; i < n; i++)
            close(fds[i]);
    }
    char path[] = "/tmp/memtrack-hostile-fds-XXXXXX";
    int fd[8];
    for (int i = 0; i < 8; i++)
        fd[i] = open("/dev/null", O_RDONLY);
    int mine = mkstemp(path);
    unlink(path);
    int rc = hv_init(h, NULL);
    if (rc)
        return rc;
    int bad = hv_frames_of_work(h, 30, "close-all-fds: GPU copy");
    hv_fini(h);
    struct stat st;
    if (fstat(mine, &st) != 0 || st.st_size != 0) {
        fprintf(stderr, "%s: close-all-fds: the app's own file (fd %d) holds %lld bytes it never wrote\n",
                hv_argv0, mine, (long long)st.st_size);
        bad = 1;
    }
    off_t pos = lseek(mine, 0, SEEK_CUR);
    if (pos != 0) {
        fprintf(stderr, "%s: close-all-fds: the app's own file offset moved to %lld\n", hv_argv0, (long long)pos);
        bad = 1;
    }
    for (int i = 0; i < 8; i++)
        close(fd[i]);
    close(mine);
    return bad;
}


/* ---- exit() while other threads write and submit ---------------------------- */

typedef struct busy {
    hv *h;
    hv_mem *src, *rb;
    atomic_int *started;
} busy;

static void *busy_writer(void *p)
{
    busy *b = p;
    uint64_t s = 17;
    for (long i = 0;; i++) {
        /* New pages keep coming: each write may fault. The first half only:
         * the submits read the second (a device read of bytes the host is
         * writing would be the application's race). */
        VkDeviceSize off = (hv_rnd(&s) % (b->src->size / 2 / 4096)) * 4096 + 8;
        b->src->ptr[off] = (unsigned char)i;
        if (i == 1000)
            atomic_fetch_add(b->started, 1);
    }
    return NULL;
}

/* Submits copies until it has made a few after the writers started. */
static void *busy_submitter(void *p)
{
    busy *b = p;
    for (long i = 0; i < 8; i++) {
        hv_begin(b->h);
        VkDeviceSize half = b->src->size / 2;
        VkBufferCopy c = {.srcOffset = half, .dstOffset = half, .size = half};
        vkCmdCopyBuffer(b->h->cmd, b->src->buf, b->rb->buf, 1, &c);
        hv_end(b->h);
        hv_submit_wait(b->h);
        if (i == 3)
            atomic_fetch_add(b->started, 1);
    }
    return NULL;
}

/* argv[1]: exit (default) or quick_exit. */
static int exit_racing(hv *h, int argc, char **argv)
{
    const char *how = argc > 1 ? argv[1] : "exit";
    int rc = hv_init(h, NULL);
    if (rc)
        return rc;
    static hv_mem src, rb;
    hv_alloc(h, &src, 8u << 20, HV_SRC);
    hv_alloc(h, &rb, 8u << 20, HV_DST);
    /* A check first: the app works. */
    hv_write(&src, 0, 100000, 1);
    if (hv_gpu_check(h, &src, &rb, "exit-racing: GPU copy"))
        return 1;
    static atomic_int started;
    static busy b;
    b = (busy){.h = h, .src = &src, .rb = &rb, .started = &started};
    /* Only the mapping is written while exit runs: a thread inside a Vulkan
     * call while exit() runs the loader's and the layers' destructors is the
     * application's race (it crashes without memtrack too, one run in
     * three with the validation layer), so the submits end first. */
    pthread_t t[3];
    pthread_create(&t[0], NULL, busy_writer, &b);
    pthread_create(&t[1], NULL, busy_writer, &b);
    pthread_create(&t[2], NULL, busy_submitter, &b);
    while (atomic_load(&started) < 3)
        hv_sleep_ms(1);
    pthread_join(t[2], NULL);
    printf("%s: exit-racing: ok, ending with %s while 2 threads write\n", hv_argv0, how);
    fflush(stdout);
    if (strcmp(how, "quick_exit") == 0)
        quick_exit(0);
    exit(0);
}


/* ---- io_uring with registered (fixed) buffers in the mapping ----------------
 * IORING_REGISTER_BUFFERS pins the pages once; IORING_OP_READ_FIXED then
 * copies into them through the kernel's own mapping of the pinned pages,
 * without touching the application's page tables (as RDMA and other
 * long-term pins do). Registered once, read into every frame. */

static int ring_read_fixed(ur_ring *r, int fd, void *buf, unsigned len, uint64_t off)
{
    unsigned t = __atomic_load_n(r->sq_tail, __ATOMIC_ACQUIRE), i = t & *r->sq_mask;
    struct io_uring_sqe *e = &r->sqes[i];
    memset(e, 0, sizeof *e);
    e->opcode = IORING_OP_READ_FIXED;
    e->fd = fd;
    e->addr = (uint64_t)(uintptr_t)buf;
    e->len = len;
    e->off = off;
    e->buf_index = 0;
    e->user_data = 1;
    r->sq_array[i] = i;
    __atomic_store_n(r->sq_tail, t + 1, __ATOMIC_RELEASE);
    if (ur_enter(r, 1, 1) < 0)
        hv_die("io_uring_enter: %s", strerror(errno));
    uint64_t tag;
    int res;
    while (!ur_reap(r, &tag, &res))
        if (ur_enter(r, 0, 1) < 0 && errno != EINTR)
            hv_die("io_uring_enter: %s", strerror(errno));
    if (res == (int)len)
        return 0;
    fprintf(stderr, "%s: io_uring READ_FIXED returned %d (%s), expected %u\n", hv_argv0, res,
            res < 0 ? strerror(-res) : "short", len);
    return 1;
}

static int uring_fixed(hv *h, int argc, char **argv)
{
    (void)argc, (void)argv;
    int rc = hv_init(h, NULL);
    if (rc)
        return rc;
    /* The file: a pattern, 3 MiB. */
    char path[] = "/tmp/memtrack-hostile-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        hv_die("mkstemp: %s", strerror(errno));
    unlink(path);
    size_t flen = 3u << 20;
    unsigned char *file = malloc(flen);
    hv_pattern(file, flen, 77);
    if (write(fd, file, flen) != (ssize_t)flen)
        hv_die("write: %s", strerror(errno));
    hv_mem src, rb;
    hv_alloc(h, &src, 4u << 20, HV_SRC);
    hv_alloc(h, &rb, 4u << 20, HV_DST);
    ur_ring r = {.fd = -1};
    rc = ur_open(&r, 8);
    if (rc) {
        fprintf(stderr, "%s: io_uring not available here (%s): skipped\n", hv_argv0, strerror(-rc));
        return HV_SKIP;
    }
    int bad = 0;
    /* A first frame: every page written and captured once. */
    hv_write(&src, 0, src.size, 1);
    bad |= hv_gpu_check(h, &src, &rb, "uring-fixed: GPU copy before the registration");
    struct iovec iov = {src.ptr, (size_t)src.size};
    if (syscall(SYS_io_uring_register, r.fd, IORING_REGISTER_BUFFERS, &iov, 1) != 0) {
        fprintf(stderr, "%s: IORING_REGISTER_BUFFERS: %s: skipped\n", hv_argv0, strerror(errno));
        return HV_SKIP;
    }
    bad |= hv_gpu_check(h, &src, &rb, "uring-fixed: GPU copy after the registration");
    for (int f = 0; f < h->frames && !bad; f++) {
        /* Only the kernel writes this frame: pages the capture has seen unchanged since. */
        size_t at = 8192 * 3 + 100 + (size_t)f * 40000, len = 100000 + (size_t)f * 4096;
        uint64_t foff = (uint64_t)f * 12345;
        bad |= ring_read_fixed(&r, fd, src.ptr + at, (unsigned)len, foff);
        memcpy(src.model + at, file + foff, len);
        bad |= hv_compare(src.ptr + at, src.model + at, len, "uring-fixed: the app reads back the read");
        bad |= hv_gpu_check(h, &src, &rb, "uring-fixed: GPU copy of what READ_FIXED read");
    }
    syscall(SYS_io_uring_register, r.fd, IORING_UNREGISTER_BUFFERS, NULL, 0);
    close(r.fd);
    close(fd);
    free(file);
    hv_free(h, &src);
    hv_free(h, &rb);
    hv_fini(h);
    return bad;
}

const hv_behaviour hv_explore_behaviours[] = {
    {"spawn-writers", "system/popen/posix_spawn/vfork+exec/fork+exec while two threads write", spawn_writers},
    {"submit-race", "a thread writes half-pages while another submits reading the other halves", submit_race},
    {"fork-racing", "submit-race, and a third thread forks; children write their copy", fork_racing},
    {"cancel-read", "a thread cancelled in read() into the mapping; a thread exits after writing", cancel_read},
    {"cpu-stores", "non-temporal, straddling SSE/AVX2, masked, rep movsb/stosb and atomic stores", cpu_stores},
    {"early-threads", "threads created before the instance write, submit and check", early_threads},
    {"mlock-all", "mlockall(MCL_CURRENT|MCL_FUTURE [|MCL_ONFAULT with 'onfault']) before Vulkan", mlock_all},
    {"few-fds", "RLIMIT_NOFILE 64 with all but 24 descriptors in use", few_fds},
    {"close-all-fds", "closes every inherited descriptor (close_range; '1': by /proc/self/fd) first",
     close_all_fds},
    {"fd-numbers", "RLIMIT_NOFILE 64 and fd 0 closed before Vulkan: memtrack's descriptors stay above 64",
     fd_numbers},
    {"fd-numbers-hard", "soft = hard RLIMIT_NOFILE 128, fd 0 closed: memtrack's descriptors in 112-127",
     fd_numbers_hard},
    {"exit-racing", "exit() (or quick_exit) while two threads write, right after a third submitted",
     exit_racing},
    {"uring-fixed", "io_uring READ_FIXED into a registered buffer over the mapping, every frame",
     uring_fixed},
    {NULL, NULL, NULL},
};
