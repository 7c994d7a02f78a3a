/* A bare io_uring for tests (raw system calls, no liburing): set up through
 * libc's syscall(), which the interposer sees, and used for reads only. */
#ifndef MT_URING_UTIL_H
#define MT_URING_UTIL_H

#include <errno.h>
#include <linux/io_uring.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef struct ur_ring {
    int fd;
    unsigned *sq_tail, *sq_mask, *sq_array, *cq_head, *cq_tail, *cq_mask;
    struct io_uring_sqe *sqes;
    struct io_uring_cqe *cqes;
} ur_ring;

/* 0, or -errno when the kernel refused io_uring_setup (r->fd is then -1).
 * A ring that does not map fails the test (abort). */
static inline int ur_open(ur_ring *r, unsigned entries)
{
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    r->fd = (int)syscall(SYS_io_uring_setup, entries, &p);
    if (r->fd < 0)
        return -errno;
    size_t sq_len = p.sq_off.array + p.sq_entries * sizeof(unsigned);
    size_t cq_len = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
    int single = (p.features & IORING_FEAT_SINGLE_MMAP) != 0;
    if (single)
        sq_len = cq_len = sq_len > cq_len ? sq_len : cq_len;
    char *sq = mmap(NULL, sq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd,
                    IORING_OFF_SQ_RING);
    char *cq = single ? sq
                      : mmap(NULL, cq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd,
                             IORING_OFF_CQ_RING);
    r->sqes = mmap(NULL, p.sq_entries * sizeof *r->sqes, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_SQES);
    if (sq == MAP_FAILED || cq == MAP_FAILED || r->sqes == MAP_FAILED) {
        fprintf(stderr, "io_uring mmap: %s\n", strerror(errno));
        abort();
    }
    r->sq_tail = (unsigned *)(sq + p.sq_off.tail);
    r->sq_mask = (unsigned *)(sq + p.sq_off.ring_mask);
    r->sq_array = (unsigned *)(sq + p.sq_off.array);
    r->cq_head = (unsigned *)(cq + p.cq_off.head);
    r->cq_tail = (unsigned *)(cq + p.cq_off.tail);
    r->cq_mask = (unsigned *)(cq + p.cq_off.ring_mask);
    r->cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
    return 0;
}

/* Queues a read of len bytes at file offset off into buf; user_data = tag. */
static inline void ur_queue_read(ur_ring *r, int fd, void *buf, unsigned len, uint64_t off,
                                 uint64_t tag)
{
    unsigned t = __atomic_load_n(r->sq_tail, __ATOMIC_ACQUIRE), i = t & *r->sq_mask;
    struct io_uring_sqe *e = &r->sqes[i];
    memset(e, 0, sizeof *e);
    e->opcode = IORING_OP_READ;
    e->fd = fd;
    e->addr = (uint64_t)(uintptr_t)buf;
    e->len = len;
    e->off = off;
    e->user_data = tag;
    r->sq_array[i] = i;
    __atomic_store_n(r->sq_tail, t + 1, __ATOMIC_RELEASE);
}

/* Submits `submit` queued entries and waits for `wait` completions: the
 * system call's result (-1 and errno on failure). */
static inline long ur_enter(ur_ring *r, unsigned submit, unsigned wait)
{
    return syscall(SYS_io_uring_enter, r->fd, submit, wait, IORING_ENTER_GETEVENTS, NULL, 0);
}

/* Takes one completion: 1 and its tag and result, or 0 when none is there. */
static inline int ur_reap(ur_ring *r, uint64_t *tag, int *res)
{
    unsigned h = __atomic_load_n(r->cq_head, __ATOMIC_RELAXED);
    if (h == __atomic_load_n(r->cq_tail, __ATOMIC_ACQUIRE))
        return 0;
    const struct io_uring_cqe *c = &r->cqes[h & *r->cq_mask];
    *tag = c->user_data;
    *res = c->res;
    __atomic_store_n(r->cq_head, h + 1, __ATOMIC_RELEASE);
    return 1;
}

#endif
