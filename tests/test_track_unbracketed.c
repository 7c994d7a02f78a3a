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
 *     pages written: the kernel's writes are tracked there;
 *  6. buffers registered with io_uring (IORING_REGISTER_BUFFERS through
 *     syscall()): the kernel writes them through its own mapping of the
 *     pinned pages, which no page table shows, so from then on a uffd range
 *     is reported whole too (MT_TRACK_UNBRACKETED_PINNED, not_protected),
 *     and a READ_FIXED into it reaches a shadow updated from the reports
 *     (before, the collect reported nothing and the write was lost).
 * Needs the interposer (exit 77 without). io_uring refused by the kernel
 * (ENOSYS, EPERM): steps 3-4's reads are skipped, the switch still checked
 * (it happens before the set-up call). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "track_child.h"
#include "track_util.h"
#include "uring_util.h"

#define NP 32

/* One read of len bytes from fd at offset 0 into buf; its result. */
static int ring_read(ur_ring *r, int fd, void *buf, unsigned len)
{
    ur_queue_read(r, fd, buf, len, 0, 0);
    MT_CHECK(ur_enter(r, 1, 1) >= 0);
    uint64_t tag;
    int res;
    MT_CHECK(ur_reap(r, &tag, &res) == 1);
    return res;
}

/* The same through a registered buffer (index 0): IORING_OP_READ_FIXED. */
static int ring_read_fixed(ur_ring *r, int fd, void *buf, unsigned len)
{
    ur_queue_read(r, fd, buf, len, 0, 0);
    unsigned i = (__atomic_load_n(r->sq_tail, __ATOMIC_ACQUIRE) - 1) & *r->sq_mask;
    r->sqes[i].opcode = IORING_OP_READ_FIXED;
    r->sqes[i].buf_index = 0;
    MT_CHECK(ur_enter(r, 1, 1) >= 0);
    uint64_t tag;
    int res;
    MT_CHECK(ur_reap(r, &tag, &res) == 1);
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
    if (!tc_need_interposer())
        return 77;
    mt_tracker *t;
    mt_tracker_opts to = {.backend = MT_TRACK_SIGNAL};
    MT_CHECK_OK(mt_tracker_create(&to, &t));
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
    ur_ring r = {.fd = -1};
    int rc = ur_open(&r, 8);
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

        /* 6. A registered buffer over a uffd range: reported whole from the
         * registration on, and the kernel's write through the pin lands in
         * the shadow. */
        unsigned char *m4 = tu_map(NP * ps);
        mt_range_id id4;
        MT_CHECK_OK(mt_tracker_add(t, m4, NP * ps, &uo, &id4));
        MT_CHECK(collect(t, id4, m4, seen) == 0);
        MT_CHECK(!(mt_track_unbracketed_writers() & MT_TRACK_UNBRACKETED_PINNED));
        unsigned char *shadow4 = malloc(NP * ps);
        MT_CHECK(shadow4 != NULL);
        memcpy(shadow4, m4, NP * ps);
        struct iovec iov = {m4, NP * ps};
        long reg = syscall(SYS_io_uring_register, r.fd, IORING_REGISTER_BUFFERS, &iov, 1);
        MT_CHECK(mt_track_unbracketed_writers() & MT_TRACK_UNBRACKETED_PINNED);
        MT_CHECK_OK(mt_tracker_stats(t, id4, &st));
        MT_CHECK(st.not_protected == 1);
        MT_CHECK(collect(t, id4, m4, seen) == NP);
        if (rc == 0 && reg == 0) {
            MT_CHECK_INT_EQ(ring_read_fixed(&r, fd, m4 + 6 * ps + 3, (unsigned)ps), (int)ps);
            MT_CHECK(m4[6 * ps + 3] == 1 && m4[6 * ps + 4] == 8);
            MT_CHECK(collect(t, id4, m4, seen) == NP && seen[6] && seen[7]);
            for (size_t p = 0; p < NP; p++)
                if (seen[p])
                    memcpy(shadow4 + p * ps, m4 + p * ps, ps);
            MT_CHECK(memcmp(shadow4, m4, NP * ps) == 0);
            MT_CHECK(syscall(SYS_io_uring_register, r.fd, IORING_UNREGISTER_BUFFERS, NULL, 0) == 0);
            printf("  %-58s ok\n", "registered buffer over a uffd range: whole, exact");
        } else {
            printf("  %-58s skipped (io_uring: %s)\n", "a READ_FIXED into a uffd range",
                   rc ? strerror(-rc) : strerror(errno));
        }
        MT_CHECK_OK(mt_tracker_remove(t, id4));
        munmap(m4, NP * ps);
        free(shadow4);
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
