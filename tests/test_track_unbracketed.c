/* track + interposer: kernel writes nobody brackets (io_uring, Linux AIO).
 *
 * A read through io_uring completes in the kernel with no call of the
 * application around it that the interposer could bracket, so with the
 * signal backend it would meet a write-protected page and fail with EFAULT.
 * The interposer reports the set-up of such a facility, and from then on
 * track protects no signal range: existing ones are opened, later ones are
 * never armed, and every collect reports every live page (exact).
 *
 * Checked, in this order (the switch is for the life of the process):
 *  1. before: a signal range is protected and reports only written pages;
 *     getrandom() into it works (bracketed like read(), also when called
 *     through syscall()) and is reported;
 *  2. io_uring_setup through libc's syscall(): the tracker says so
 *     (mt_track_unbracketed_writers), the range is writable again (also in
 *     /proc/self/maps), its stats say not protected, a page the application
 *     made read-only itself stays read-only;
 *  3. an io_uring read into the range succeeds, each collect reports every
 *     page, and a shadow updated from the reports equals the memory;
 *  4. a signal range added afterwards is never protected;
 *  5. a uffd range (where the kernel has uffd-wp) still reports only the
 *     pages written: the kernel's writes are tracked there.
 * Needs the interposer (exit 77 without). io_uring refused by the kernel
 * (ENOSYS, EPERM): steps 3-4's reads are skipped, the switch still checked
 * (it happens before the set-up call). */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/io_uring.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "track_child.h"
#include "track_util.h"

#define NP 32

typedef struct ring {
    int fd;
    unsigned *sq_tail, *sq_mask, *sq_array, *cq_head, *cq_tail, *cq_mask;
    struct io_uring_sqe *sqes;
    struct io_uring_cqe *cqes;
} ring;

/* io_uring_setup through libc's syscall(), which the interposer sees.
 * 0, or -errno from the kernel. */
static int ring_open(ring *r)
{
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    r->fd = (int)syscall(SYS_io_uring_setup, 8, &p);
    if (r->fd < 0)
        return -errno;
    size_t sq_len = p.sq_off.array + p.sq_entries * sizeof(unsigned);
    size_t cq_len = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
    int single = (p.features & IORING_FEAT_SINGLE_MMAP) != 0;
    if (single)
        sq_len = cq_len = sq_len > cq_len ? sq_len : cq_len;
    char *sq = mmap(NULL, sq_len, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, IORING_OFF_SQ_RING);
    char *cq = single ? sq
                      : mmap(NULL, cq_len, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd,
                             IORING_OFF_CQ_RING);
    r->sqes = mmap(NULL, p.sq_entries * sizeof *r->sqes, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd,
                   IORING_OFF_SQES);
    MT_CHECK(sq != MAP_FAILED && cq != MAP_FAILED && r->sqes != MAP_FAILED);
    r->sq_tail = (unsigned *)(sq + p.sq_off.tail);
    r->sq_mask = (unsigned *)(sq + p.sq_off.ring_mask);
    r->sq_array = (unsigned *)(sq + p.sq_off.array);
    r->cq_head = (unsigned *)(cq + p.cq_off.head);
    r->cq_tail = (unsigned *)(cq + p.cq_off.tail);
    r->cq_mask = (unsigned *)(cq + p.cq_off.ring_mask);
    r->cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
    return 0;
}

/* One read of len bytes from fd at offset 0 into buf; its result. */
static int ring_read(ring *r, int fd, void *buf, unsigned len)
{
    unsigned t = __atomic_load_n(r->sq_tail, __ATOMIC_ACQUIRE), i = t & *r->sq_mask;
    struct io_uring_sqe *e = &r->sqes[i];
    memset(e, 0, sizeof *e);
    e->opcode = IORING_OP_READ;
    e->fd = fd;
    e->addr = (uint64_t)(uintptr_t)buf;
    e->len = len;
    r->sq_array[i] = i;
    __atomic_store_n(r->sq_tail, t + 1, __ATOMIC_RELEASE);
    MT_CHECK(syscall(SYS_io_uring_enter, r->fd, 1, 1, IORING_ENTER_GETEVENTS, NULL, 0) >= 0);
    unsigned h = __atomic_load_n(r->cq_head, __ATOMIC_RELAXED);
    MT_CHECK(h != __atomic_load_n(r->cq_tail, __ATOMIC_ACQUIRE));
    int res = r->cqes[h & *r->cq_mask].res;
    __atomic_store_n(r->cq_head, h + 1, __ATOMIC_RELEASE);
    return res;
}

static size_t collect(mt_tracker *t, mt_range_id id, unsigned char *base, unsigned char *seen)
{
    memset(seen, 0, NP);
    return tu_collect_into(t, id, (uintptr_t)base, (uintptr_t)base, seen, NP);
}

/* A file of 3 pages of known bytes, unlinked. */
static int pattern_file(void)
{
    char path[] = "/tmp/mt_unbracketed_XXXXXX";
    int fd = mkstemp(path);
    MT_CHECK(fd >= 0);
    unlink(path);
    size_t ps = tu_page();
    unsigned char *b = malloc(3 * ps);
    MT_CHECK(b != NULL);
    for (size_t i = 0; i < 3 * ps; i++)
        b[i] = (unsigned char)(i * 7 + 1);
    MT_CHECK(write(fd, b, 3 * ps) == (ssize_t)(3 * ps));
    free(b);
    return fd;
}

int main(void)
{
    mt_tracker *t;
    mt_tracker_opts to = {.backend = MT_TRACK_SIGNAL};
    MT_CHECK_OK(mt_tracker_create(&to, &t));
    if (!tc_preloaded()) {
        mt_tracker_destroy(t);
        printf("SKIP: needs the interposer (LD_PRELOAD=libmemtrack_preload.so)\n");
        return 77;
    }
    size_t ps = tu_page();
    unsigned char seen[NP];
    unsigned char *m = tu_map(NP * ps);
    mt_range_id id;
    mt_range_opts ro = {.backend = MT_TRACK_SIGNAL};
    MT_CHECK_OK(mt_tracker_add(t, m, NP * ps, &ro, &id));
    MT_CHECK(collect(t, id, m, seen) == 0);

    /* 1. Protected: one write, one page; getrandom is bracketed. */
    MT_CHECK_UINT_EQ(mt_track_unbracketed_writers(), 0);
    MT_CHECK(tc_real_prot(m) == PROT_READ);
    m[3 * ps + 5] = 1;
    MT_CHECK(collect(t, id, m, seen) == 1 && seen[3]);
    MT_CHECK(getrandom(m + 7 * ps + 100, 2 * ps, 0) == (ssize_t)(2 * ps));
    MT_CHECK(collect(t, id, m, seen) == 3 && seen[7] && seen[8] && seen[9]);
    MT_CHECK(syscall(SYS_getrandom, m + 13 * ps + 9, 64, 0) == 64); /* through syscall() too */
    MT_CHECK(collect(t, id, m, seen) == 1 && seen[13]);
    /* A page the application protects itself stays its own. */
    MT_CHECK(mprotect(m + 20 * ps, ps, PROT_READ) == 0);
    MT_CHECK(collect(t, id, m, seen) == 0);
    printf("  %-58s ok\n", "before: written pages only, getrandom bracketed");

    /* 2. The set-up is reported before it happens, whatever the kernel says. */
    ring r = {.fd = -1};
    int rc = ring_open(&r);
    MT_CHECK(mt_track_unbracketed_writers() & MT_TRACK_UNBRACKETED_URING);
    MT_CHECK(tc_real_prot(m) == (PROT_READ | PROT_WRITE));
    MT_CHECK(tc_real_prot(m + 20 * ps) == PROT_READ);
    mt_range_stats st;
    MT_CHECK_OK(mt_tracker_stats(t, id, &st));
    MT_CHECK(st.not_protected == 1);
    /* Every live page, on every collect. */
    MT_CHECK(collect(t, id, m, seen) == NP);
    MT_CHECK(collect(t, id, m, seen) == NP);
    printf("  %-58s ok\n", "io_uring_setup: the range is opened, reported whole");

    /* 3. The kernel's write lands; the shadow follows the reports. */
    unsigned char *shadow = malloc(NP * ps);
    MT_CHECK(shadow != NULL);
    memcpy(shadow, m, NP * ps);
    int fd = pattern_file();
    if (rc == 0) {
        MT_CHECK_INT_EQ(ring_read(&r, fd, m + 11 * ps + 9, (unsigned)(2 * ps)), (int)(2 * ps));
        MT_CHECK(m[11 * ps + 9] == 1 && m[11 * ps + 10] == 8);
        m[30 * ps] = 42;
        MT_CHECK(collect(t, id, m, seen) == NP);
        for (size_t p = 0; p < NP; p++)
            if (seen[p])
                memcpy(shadow + p * ps, m + p * ps, ps);
        MT_CHECK(memcmp(shadow, m, NP * ps) == 0);
        printf("  %-58s ok\n", "an io_uring read into the range, exact");
    } else {
        printf("  %-58s skipped (io_uring: %s)\n", "an io_uring read into the range", strerror(-rc));
    }

    /* 4. A later signal range is never protected. */
    unsigned char *m2 = tu_map(NP * ps);
    mt_range_id id2;
    MT_CHECK_OK(mt_tracker_add(t, m2, NP * ps, &ro, &id2));
    MT_CHECK(tc_real_prot(m2) == (PROT_READ | PROT_WRITE));
    if (rc == 0)
        MT_CHECK_INT_EQ(ring_read(&r, fd, m2 + 2 * ps, (unsigned)ps), (int)ps);
    MT_CHECK(collect(t, id2, m2, seen) == NP);
    printf("  %-58s ok\n", "a range added afterwards: never protected");

    /* 5. uffd keeps tracking pages (the kernel's writes fault there). */
    if (mt_track_backend_available(MT_TRACK_UFFD) == 1) {
        unsigned char *m3 = tu_map(NP * ps);
        mt_range_id id3;
        mt_range_opts uo = {.backend = MT_TRACK_UFFD};
        MT_CHECK_OK(mt_tracker_add(t, m3, NP * ps, &uo, &id3));
        MT_CHECK(collect(t, id3, m3, seen) == 0);
        if (rc == 0)
            MT_CHECK_INT_EQ(ring_read(&r, fd, m3 + 4 * ps, (unsigned)ps), (int)ps);
        else
            m3[4 * ps] = 1;
        MT_CHECK(collect(t, id3, m3, seen) == 1 && seen[4]);
        MT_CHECK_OK(mt_tracker_remove(t, id3));
        munmap(m3, NP * ps);
        printf("  %-58s ok\n", "uffd range: still the written pages only");
    }

    if (r.fd >= 0)
        close(r.fd);
    close(fd);
    free(shadow);
    MT_CHECK_OK(mt_tracker_remove(t, id));
    MT_CHECK_OK(mt_tracker_remove(t, id2));
    mt_tracker_destroy(t);
    munmap(m, NP * ps);
    munmap(m2, NP * ps);
    puts("track unbracketed kernel writers (interposer): ok");
    return 0;
}
