/* track + interposer: the application's own memory calls on tracked memory.
 *
 * For each backend, with a shadow updated only from reported runs compared
 * with live memory after every step, and the real protection of pages read
 * from /proc/self/maps:
 *  - mprotect: the application's protection is kept per page; a page it
 *    made read-only (or PROT_NONE) faults into its own handler (child) and
 *    is never re-protected wider or narrower by collect; PROT_EXEC is kept;
 *    writes after it makes a page writable again are reported;
 *  - madvise: DONTNEED, FREE (anonymous), REMOVE (shared memory) zero pages
 *    without a write: reported; POPULATE_WRITE works as without tracking;
 *  - munmap, mmap(MAP_FIXED) over tracked memory, mremap (move, shrink,
 *    DONTUNMAP): the pages are gone for the tracker (stats, MT_EUNMAPPED
 *    after the live pages are drained), a new mapping at the same address
 *    is the application's (its own faults reach its handler), moved pages
 *    are writable at their new address;
 *  - writes through /proc/self/mem (also into a page the application made
 *    read-only) and process_vm_writev to itself: reported;
 *  - pages protected before the range was added (a layer below the caller
 *    with a page guard of its own, as gfxreconstruct's capture layer): their
 *    write faults reach the guard's handler, which makes them writable with
 *    mprotect; the writes are reported; collect and remove keep the guard's
 *    protection.
 * Needs the interposer (exit 77 without). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <setjmp.h>
#include <sys/uio.h>

#include "track_child.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#ifndef MREMAP_DONTUNMAP
#define MREMAP_DONTUNMAP 4
#endif

#define NP 16

static mt_track_backend g_be;
static size_t g_ps;

typedef struct env {
    mt_tracker *t;
    mt_range_id id;
    unsigned char *m; /* NP pages, tracked from byte 0 */
    unsigned char shadow[NP * 65536];
    tc_shadow s;
} env;

static void setup(env *e)
{
    mt_tracker_opts o = {.backend = g_be};
    MT_CHECK_OK(mt_tracker_create(&o, &e->t));
    e->m = tu_map(NP * g_ps);
    for (size_t i = 0; i < NP * g_ps; i++)
        e->m[i] = (unsigned char)(i * 7);
    MT_CHECK_OK(mt_tracker_add(e->t, e->m, NP * g_ps, NULL, &e->id));
    memcpy(e->shadow, e->m, NP * g_ps);
    e->s = (tc_shadow){e->m, e->shadow, NP * g_ps};
}

/* Drains and compares; returns the pages reported. */
static long sync_check(env *e)
{
    long pages = tc_drain(e->t, e->id, e->m, &e->s);
    MT_CHECK(pages >= 0);
    MT_CHECK_MEM_EQ(e->shadow, e->m, NP * g_ps);
    return pages;
}

static unsigned char *page(env *e, size_t p) { return e->m + p * g_ps; }

/* The real protection a tracked page with application protection `app`
 * has right after a collect. */
static int armed(int app)
{
    if (g_be == MT_TRACK_UFFD || !(app & PROT_WRITE))
        return app;
    return (app & ~PROT_WRITE) | PROT_READ;
}

static sigjmp_buf g_jmp;
static volatile sig_atomic_t g_calls, g_code;
static volatile uintptr_t g_addr;

static void own(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)uc;
    g_calls++;
    g_addr = (uintptr_t)si->si_addr;
    g_code = si->si_code;
    siglongjmp(g_jmp, 1);
}

static void install_segv(void (*fn)(int, siginfo_t *, void *))
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = fn;
    sa.sa_flags = SA_SIGINFO;
    MT_CHECK(sigaction(SIGSEGV, &sa, NULL) == 0);
}

static void install_own(void) { install_segv(own); }

static int write_faults(volatile unsigned char *p, unsigned char v)
{
    int before = g_calls;
    if (sigsetjmp(g_jmp, 1) == 0)
        *p = v;
    return g_calls - before;
}

static int read_faults(volatile unsigned char *p)
{
    int before = g_calls;
    if (sigsetjmp(g_jmp, 1) == 0) {
        volatile unsigned char x = *p;
        (void)x;
    }
    return g_calls - before;
}

/* ---- mprotect ---- */

static void case_mprotect(void)
{
    env e;
    setup(&e);
    install_own();
    page(&e, 2)[0] = 1; /* dirty, not collected yet */
    MT_CHECK(mprotect(page(&e, 3), 2 * g_ps, PROT_READ) == 0);
    MT_CHECK_INT_EQ(tc_real_prot(page(&e, 3)), PROT_READ);
    /* The application's own read-only page: its own fault, its handler. */
    MT_CHECK_INT_EQ(write_faults(page(&e, 3) + 5, 9), 1);
    MT_CHECK_UINT_EQ(g_addr, (uintptr_t)page(&e, 3) + 5);
    MT_CHECK_INT_EQ(g_code, SEGV_ACCERR);
    MT_CHECK_INT_EQ(page(&e, 3)[5], (unsigned char)(3 * g_ps + 5) * 7);
    sync_check(&e);
    /* Collect re-armed page 2 and left the application's pages as they are. */
    MT_CHECK_INT_EQ(tc_real_prot(page(&e, 3)), PROT_READ);
    MT_CHECK_INT_EQ(tc_real_prot(page(&e, 4)), PROT_READ);
    MT_CHECK_INT_EQ(tc_real_prot(page(&e, 2)), armed(PROT_READ | PROT_WRITE));
    MT_CHECK_INT_EQ(write_faults(page(&e, 4), 1), 1); /* still its own */
    /* PROT_NONE: reads fault too, and collect never makes it readable. */
    MT_CHECK(mprotect(page(&e, 6), g_ps, PROT_NONE) == 0);
    page(&e, 7)[1] = 2;
    MT_CHECK_INT_EQ(tc_drain(e.t, e.id, e.m, &e.s), 1); /* (no compare: page 6 is unreadable) */
    MT_CHECK_INT_EQ(tc_real_prot(page(&e, 6)), PROT_NONE);
    MT_CHECK_INT_EQ(read_faults(page(&e, 6) + 1), 1);
    /* Writable again: tracked again, exactly. */
    MT_CHECK(mprotect(page(&e, 3), 2 * g_ps, PROT_READ | PROT_WRITE) == 0);
    MT_CHECK(mprotect(page(&e, 6), g_ps, PROT_READ | PROT_WRITE) == 0);
    MT_CHECK_INT_EQ(write_faults(page(&e, 3) + 1, 3), 0);
    MT_CHECK_INT_EQ(write_faults(page(&e, 6) + 1, 4), 0);
    sync_check(&e);
    MT_CHECK_INT_EQ(tc_real_prot(page(&e, 3)), armed(PROT_READ | PROT_WRITE));
    page(&e, 3)[2] = 5;
    page(&e, 4)[2] = 5;
    MT_CHECK(sync_check(&e) >= 2);
    /* PROT_EXEC is kept through arming. */
    MT_CHECK(mprotect(page(&e, 9), g_ps, PROT_READ | PROT_WRITE | PROT_EXEC) == 0);
    page(&e, 9)[0] = 6;
    sync_check(&e);
    MT_CHECK_INT_EQ(tc_real_prot(page(&e, 9)), armed(PROT_READ | PROT_WRITE | PROT_EXEC));
    page(&e, 9)[1] = 7;
    MT_CHECK_INT_EQ(tc_real_prot(page(&e, 9)), PROT_READ | PROT_WRITE | PROT_EXEC);
    sync_check(&e);
    /* Removing the range restores the application's protections. */
    MT_CHECK(mprotect(page(&e, 10), g_ps, PROT_READ) == 0);
    MT_CHECK_OK(mt_tracker_remove(e.t, e.id));
    MT_CHECK_INT_EQ(tc_real_prot(page(&e, 10)), PROT_READ);
    MT_CHECK_INT_EQ(tc_real_prot(page(&e, 9)), PROT_READ | PROT_WRITE | PROT_EXEC);
    MT_CHECK_INT_EQ(tc_real_prot(page(&e, 11)), PROT_READ | PROT_WRITE);
    mt_range_stats st;
    (void)st;
}

/* ---- madvise ---- */

static void case_madvise(void)
{
    env e;
    setup(&e);
    page(&e, 1)[0] = 1;
    sync_check(&e);
    MT_CHECK(madvise(page(&e, 0), 3 * g_ps, MADV_DONTNEED) == 0);
    MT_CHECK_INT_EQ(page(&e, 1)[0], 0);
    MT_CHECK(sync_check(&e) >= 3);
    MT_CHECK(madvise(page(&e, 4), 2 * g_ps, MADV_FREE) == 0);
    /* Lazily freed pages may be zeroed at any time: reported now, zero now. */
    MT_CHECK(sync_check(&e) >= 2);
    MT_CHECK_INT_EQ(page(&e, 4)[100], 0);
    page(&e, 4)[100] = 3; /* writes after it are tracked as usual */
    MT_CHECK_INT_EQ(sync_check(&e), 1);
    /* POPULATE_WRITE succeeds as on untracked memory. */
    unsigned char *plain = tu_map(2 * g_ps);
    int want = madvise(plain, 2 * g_ps, MADV_POPULATE_WRITE);
    int werr = errno;
    int got = madvise(page(&e, 8), 2 * g_ps, MADV_POPULATE_WRITE);
    MT_CHECK_INT_EQ(got, want);
    if (got)
        MT_CHECK_INT_EQ(errno, werr);
    sync_check(&e);
    munmap(plain, 2 * g_ps);
    /* MADV_REMOVE punches a hole in shared memory: zeroes, no fault. */
    int fd = memfd_create("mt_appmem", 0);
    MT_CHECK(fd >= 0);
    MT_CHECK(ftruncate(fd, (off_t)(4 * g_ps)) == 0);
    unsigned char *sh = mmap(NULL, 4 * g_ps, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    MT_CHECK(sh != MAP_FAILED);
    memset(sh, 0x77, 4 * g_ps);
    mt_range_id sid;
    if (mt_tracker_add(e.t, sh, 4 * g_ps, NULL, &sid) == 0) {
        unsigned char sshadow[4 * 65536];
        memcpy(sshadow, sh, 4 * g_ps);
        tc_shadow ss = {sh, sshadow, 4 * g_ps};
        MT_CHECK(madvise(sh + g_ps, 2 * g_ps, MADV_REMOVE) == 0);
        MT_CHECK_INT_EQ(sh[g_ps], 0);
        MT_CHECK_INT_EQ(tc_drain(e.t, sid, sh, &ss), 2);
        MT_CHECK_MEM_EQ(sshadow, sh, 4 * g_ps);
        MT_CHECK_OK(mt_tracker_remove(e.t, sid));
    }
    munmap(sh, 4 * g_ps);
    close(fd);
}

/* ---- munmap, MAP_FIXED, mremap ---- */

static void case_munmap(void)
{
    env e;
    setup(&e);
    install_own();
    page(&e, 1)[0] = 1;  /* dirty, live */
    page(&e, 5)[0] = 1;  /* dirty, about to be unmapped */
    MT_CHECK(munmap(page(&e, 4), 4 * g_ps) == 0);
    mt_range_stats st;
    MT_CHECK_OK(mt_tracker_stats(e.t, e.id, &st));
    MT_CHECK_INT_EQ(st.unmapped, 1);
    MT_CHECK_UINT_EQ(st.unmapped_pages, 4);
    /* The live dirty page first, then the news. */
    mt_dirty_run runs[8];
    long n = mt_tracker_collect(e.t, e.id, runs, 8);
    MT_CHECK_INT_EQ(n, 1);
    MT_CHECK_UINT_EQ(runs[0].offset, g_ps);
    MT_CHECK_ERR(mt_tracker_collect(e.t, e.id, runs, 8), MT_EUNMAPPED);
    page(&e, 2)[0] = 2; /* live pages are still tracked */
    n = mt_tracker_collect(e.t, e.id, runs, 8);
    MT_CHECK_INT_EQ(n, 1);
    MT_CHECK_UINT_EQ(runs[0].offset, 2 * g_ps);
    /* Someone maps read-only memory there: its faults are its own. */
    unsigned char *fresh = mmap(page(&e, 4), g_ps, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    MT_CHECK(fresh == page(&e, 4));
    MT_CHECK_INT_EQ(write_faults(fresh + 8, 1), 1);
    MT_CHECK_UINT_EQ(g_addr, (uintptr_t)fresh + 8);
    /* ... and the tracker leaves it alone, on collect and on remove. */
    MT_CHECK_ERR(mt_tracker_collect(e.t, e.id, runs, 8), MT_EUNMAPPED);
    MT_CHECK_OK(mt_tracker_remove(e.t, e.id));
    MT_CHECK_INT_EQ(tc_real_prot(fresh), PROT_READ);
    MT_CHECK_INT_EQ(tc_real_prot(page(&e, 5)), -1);
}

static void case_map_fixed(void)
{
    env e;
    setup(&e);
    unsigned char *p = mmap(page(&e, 2), 2 * g_ps, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    MT_CHECK(p == page(&e, 2));
    p[0] = 1; /* the application's new memory: no fault, not ours */
    mt_range_stats st;
    MT_CHECK_OK(mt_tracker_stats(e.t, e.id, &st));
    MT_CHECK_UINT_EQ(st.unmapped_pages, 2);
    mt_dirty_run runs[8];
    MT_CHECK_ERR(mt_tracker_collect(e.t, e.id, runs, 8), MT_EUNMAPPED);
    MT_CHECK_INT_EQ(tc_real_prot(p), PROT_READ | PROT_WRITE);
    MT_CHECK_OK(mt_tracker_remove(e.t, e.id));
    MT_CHECK_INT_EQ(tc_real_prot(p), PROT_READ | PROT_WRITE);
}

static void case_mremap(void)
{
    env e;
    setup(&e);
    /* A spot for the moved pages. */
    unsigned char *dst = mmap(NULL, 4 * g_ps, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    MT_CHECK(dst != MAP_FAILED);
    page(&e, 3)[0] = 0x42;
    unsigned char *moved = mremap(page(&e, 2), 3 * g_ps, 3 * g_ps, MREMAP_MAYMOVE | MREMAP_FIXED, dst);
    MT_CHECK(moved == dst);
    MT_CHECK_INT_EQ(moved[g_ps], 0x42);
    moved[5] = 1; /* writable where it went, no crash */
    moved[2 * g_ps] = 2;
    MT_CHECK_INT_EQ(tc_real_prot(moved), PROT_READ | PROT_WRITE);
    mt_range_stats st;
    MT_CHECK_OK(mt_tracker_stats(e.t, e.id, &st));
    MT_CHECK_UINT_EQ(st.unmapped_pages, 3);
    /* Shrink in place: the tail is gone. */
    page(&e, 0)[0] = 3;
    unsigned char *same = mremap(e.m, NP * g_ps, NP * g_ps - 2 * g_ps, 0);
    MT_CHECK(same == e.m);
    MT_CHECK_OK(mt_tracker_stats(e.t, e.id, &st));
    MT_CHECK_UINT_EQ(st.unmapped_pages, 5);
    mt_dirty_run runs[8];
    long n = mt_tracker_collect(e.t, e.id, runs, 8);
    MT_CHECK_INT_EQ(n, 1); /* page 0, live */
    MT_CHECK_UINT_EQ(runs[0].offset, 0);
    MT_CHECK_ERR(mt_tracker_collect(e.t, e.id, runs, 8), MT_EUNMAPPED);
    MT_CHECK_OK(mt_tracker_remove(e.t, e.id));
    munmap(dst, 4 * g_ps);

    /* DONTUNMAP: the old pages stay, emptied: reported. */
    env f;
    setup(&f);
    unsigned char *copy = mremap(page(&f, 8), 2 * g_ps, 2 * g_ps, MREMAP_MAYMOVE | MREMAP_DONTUNMAP);
    if (copy != MAP_FAILED) {
        MT_CHECK_INT_EQ(copy[1], (unsigned char)(8 * g_ps + 1) * 7);
        copy[1] = 9; /* the copy is the application's, writable */
        MT_CHECK_INT_EQ(page(&f, 8)[1], 0);
        MT_CHECK(sync_check(&f) >= 2);
        page(&f, 8)[3] = 4; /* still tracked at the old place */
        MT_CHECK_INT_EQ(sync_check(&f), 1);
        munmap(copy, 2 * g_ps);
    } else {
        printf("    (MREMAP_DONTUNMAP unsupported: %s)\n", strerror(errno));
    }
}

/* ---- writes that bypass protections ---- */

static void case_bypass(void)
{
    env e;
    setup(&e);
    install_own();
    int fd = open("/proc/self/mem", O_RDWR);
    MT_CHECK(fd >= 0);
    unsigned char v[6000];
    memset(v, 0x5c, sizeof v);
    MT_CHECK_INT_EQ(pwrite(fd, v, 3000, (off_t)(uintptr_t)(page(&e, 2) + 4000)), 3000);
    MT_CHECK_INT_EQ(page(&e, 3)[100], 0x5c);
    MT_CHECK_INT_EQ(sync_check(&e), 2);
    /* write() at the file position, through a dup()ed descriptor */
    int fd2 = dup(fd);
    MT_CHECK(lseek(fd2, (off_t)(uintptr_t)page(&e, 6), SEEK_SET) >= 0);
    MT_CHECK_INT_EQ(write(fd2, v, 10), 10);
    MT_CHECK_INT_EQ(sync_check(&e), 1);
    /* Into a page the application made read-only: the kernel forces it. */
    MT_CHECK(mprotect(page(&e, 9), g_ps, PROT_READ) == 0);
    struct iovec iv = {v, 20};
    MT_CHECK_INT_EQ(pwritev(fd, &iv, 1, (off_t)(uintptr_t)page(&e, 9)), 20);
    MT_CHECK_INT_EQ(page(&e, 9)[19], 0x5c);
    MT_CHECK_INT_EQ(sync_check(&e), 1);
    MT_CHECK_INT_EQ(write_faults(page(&e, 9), 1), 1); /* still the application's read-only page */
    close(fd2);
    close(fd);
    /* process_vm_writev to ourselves: no EFAULT on armed pages. */
    struct iovec local = {v, 5000}, remote = {page(&e, 12) + 10, 5000};
    MT_CHECK_INT_EQ(process_vm_writev(getpid(), &local, 1, &remote, 1, 0), 5000);
    MT_CHECK_INT_EQ(page(&e, 13)[0], 0x5c);
    MT_CHECK_INT_EQ(sync_check(&e), 2);
}

/* ---- protected before tracking ---- */

/* A page guard below the caller: on a write fault into its pages it notes
 * the page and makes it writable, as gfxreconstruct's page guard does. */
static unsigned char *g_guard;
static volatile sig_atomic_t g_guard_faults;

static void guard_handler(int sig, siginfo_t *si, void *uc)
{
    (void)sig, (void)uc;
    uintptr_t a = (uintptr_t)si->si_addr & ~(uintptr_t)(g_ps - 1);
    if (a < (uintptr_t)g_guard || a >= (uintptr_t)g_guard + NP * g_ps)
        _exit(3); /* not the guard's: the test's own bug */
    g_guard_faults++;
    if (mprotect((void *)a, g_ps, PROT_READ | PROT_WRITE) != 0)
        _exit(4);
}

static void case_guarded_before(void)
{
    unsigned char *m = tu_map(NP * g_ps);
    g_guard = m;
    for (size_t i = 0; i < NP * g_ps; i++)
        m[i] = (unsigned char)(i * 3);
    install_segv(guard_handler);
    /* The guard protects pages 2-5 and 9 before anything tracks them. */
    MT_CHECK(mprotect(m + 2 * g_ps, 4 * g_ps, PROT_READ) == 0);
    MT_CHECK(mprotect(m + 9 * g_ps, g_ps, PROT_READ) == 0);
    mt_tracker *t;
    mt_tracker_opts o = {.backend = g_be};
    MT_CHECK_OK(mt_tracker_create(&o, &t));
    mt_range_id id;
    MT_CHECK_OK(mt_tracker_add(t, m, NP * g_ps, NULL, &id));
    unsigned char shadow[NP * 65536];
    memcpy(shadow, m, NP * g_ps);
    tc_shadow s = {m, shadow, NP * g_ps};
    MT_CHECK_INT_EQ(tc_real_prot(m + 3 * g_ps), PROT_READ);
    /* Writes through a volatile pointer: the compiler must not move them
     * past the reads of the fault count. */
    volatile unsigned char *w = m;
    /* The guard's own pages: its handler sees each first write. */
    w[3 * g_ps + 1] = 0xa1;
    w[9 * g_ps + 7] = 0xa2;
    MT_CHECK_INT_EQ(g_guard_faults, 2);
    w[3 * g_ps + 2] = 0xa3; /* writable now: no second fault */
    MT_CHECK_INT_EQ(g_guard_faults, 2);
    w[7 * g_ps] = 0xa4; /* memtrack's page: not the guard's */
    MT_CHECK_INT_EQ(g_guard_faults, 2);
    /* memtrack saw all three pages written. */
    MT_CHECK_INT_EQ(tc_drain(t, id, m, &s), 3);
    MT_CHECK_MEM_EQ(shadow, m, NP * g_ps);
    /* Collect left the guard's unwritten pages as the guard set them. */
    MT_CHECK_INT_EQ(tc_real_prot(m + 4 * g_ps), PROT_READ);
    /* The guard protects again after its own pass (with the interposer
     * seeing it); the next write is its again. */
    MT_CHECK(mprotect(m + 3 * g_ps, g_ps, PROT_READ) == 0);
    w[3 * g_ps + 5] = 0xa5;
    MT_CHECK_INT_EQ(g_guard_faults, 3);
    MT_CHECK_INT_EQ(tc_drain(t, id, m, &s), 1);
    MT_CHECK_MEM_EQ(shadow, m, NP * g_ps);
    /* Remove gives back the guard's protection, not read-write. */
    MT_CHECK(mprotect(m + 3 * g_ps, g_ps, PROT_READ) == 0);
    MT_CHECK_OK(mt_tracker_remove(t, id));
    MT_CHECK_INT_EQ(tc_real_prot(m + 3 * g_ps), PROT_READ);
    MT_CHECK_INT_EQ(tc_real_prot(m + 5 * g_ps), PROT_READ);
    MT_CHECK_INT_EQ(tc_real_prot(m + 7 * g_ps), PROT_READ | PROT_WRITE);
    mt_tracker_destroy(t);
}

int main(void)
{
    g_ps = tu_page();
    if (!tc_need_interposer())
        return 77;
    mt_track_backend be[2];
    int nb = tu_backends(be);
    for (int i = 0; i < nb; i++) {
        g_be = be[i];
        printf(" backend %s\n", mt_track_backend_name(g_be));
        tc_expect_exit0("mprotect: application's protection per page", case_mprotect);
        tc_expect_exit0("madvise DONTNEED/FREE/REMOVE/POPULATE_WRITE", case_madvise);
        tc_expect_exit0("munmap, then someone else's mapping there", case_munmap);
        tc_expect_exit0("mmap(MAP_FIXED) over tracked pages", case_map_fixed);
        tc_expect_exit0("mremap: move, shrink, DONTUNMAP", case_mremap);
        tc_expect_exit0("/proc/self/mem and process_vm_writev", case_bypass);
        tc_expect_exit0("pages a layer below protected before the range was added", case_guarded_before);
    }
    puts("track application memory calls: ok");
    return 0;
}
