/* The bracket of a system call in which the kernel writes user memory
 * (kwrite.c explains it): shared by kwrite.c and idem.c. */
#ifndef MTP_KW_H
#define MTP_KW_H

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/select.h>
#include <unistd.h>

#include "preload.h"

typedef struct kw_ctx {
    const mt_preload_hooks *h;
    int token;
    const mt_kw_segs *segs;
} kw_ctx;

static inline void kw_cleanup(void *p)
{
    kw_ctx *c = p;
    c->h->kw_end(c->token, c->segs);
}

/* Runs `call` bracketed by the hooks whenever a tracker is attached. */
#define KW_CALL(segsp, call)                                                                    \
    ({                                                                                          \
        const mt_preload_hooks *h_ = mtp_get_hooks();                                           \
        int tok_ = h_ ? h_->kw_begin(segsp) : -1;                                               \
        __typeof__(call) r_;                                                                    \
        if (tok_ < 0) {                                                                         \
            r_ = (call);                                                                        \
        } else {                                                                                \
            kw_ctx c_ = {h_, tok_, (segsp)};                                                    \
            pthread_cleanup_push(kw_cleanup, &c_);                                              \
            r_ = (call);                                                                        \
            pthread_cleanup_pop(1); /* kw_end keeps errno */                                    \
        }                                                                                       \
        r_;                                                                                     \
    })

/* Single buffer: the common case, with a fast path when no tracker is attached. */
#define KW_BUF(buf, len, call)                                                                  \
    ({                                                                                          \
        __typeof__(call) rb_;                                                                   \
        if (!mtp_get_hooks() || (len) == 0) {                                                   \
            rb_ = (call);                                                                       \
        } else {                                                                                \
            struct iovec seg_ = {(buf), (len)};                                                 \
            mt_kw_segs segs_ = {.iov = &seg_, .niov = 1};                                       \
            rb_ = KW_CALL(&segs_, call);                                                        \
        }                                                                                       \
        rb_;                                                                                    \
    })

#define KW_IOV(vec, cnt, call)                                                                  \
    ({                                                                                          \
        __typeof__(call) rv_;                                                                   \
        if (!mtp_get_hooks() || (cnt) <= 0 || (cnt) > IOV_MAX || !(vec)) {                      \
            rv_ = (call);                                                                       \
        } else {                                                                                \
            mt_kw_segs segs_ = {.iov = (vec), .niov = (size_t)(cnt)};                           \
            rv_ = KW_CALL(&segs_, call);                                                        \
        }                                                                                       \
        rv_;                                                                                    \
    })

/* Several segments in an array of the caller's. */
#define KW_SEGS(arr, cnt, call)                                                                 \
    ({                                                                                          \
        __typeof__(call) rs_;                                                                   \
        if (!mtp_get_hooks()) {                                                                 \
            rs_ = (call);                                                                       \
        } else {                                                                                \
            mt_kw_segs segs_ = {.iov = (arr), .niov = (cnt)};                                   \
            rs_ = KW_CALL(&segs_, call);                                                        \
        }                                                                                       \
        rs_;                                                                                    \
    })

/* size * n, saturated (a length the kernel will refuse anyway). */
static inline size_t kw_total(size_t size, size_t n)
{
    size_t t;
    return __builtin_mul_overflow(size, n, &t) ? SIZE_MAX : t;
}

/* The length at *p, read without faulting: the application's pointer may be
 * bad, and then its call must fail with EFAULT as it would have, not crash
 * in the wrapper first. Where the read cannot be done at all (a sandbox
 * refusing process_vm_readv) a length larger than any socket address
 * (struct sockaddr_storage is 128 bytes) stands in: a bracket only needs to
 * cover what the kernel will write. */
static inline socklen_t kw_peek_len(const socklen_t *p)
{
    socklen_t v = 0;
    struct iovec mine = {&v, sizeof v}, theirs = {(void *)p, sizeof v};
    int e = errno;
    ssize_t r = REAL(process_vm_readv)(getpid(), &mine, 1, &theirs, 1, 0);
    int fail = errno;
    errno = e;
    if (r == (ssize_t)sizeof v)
        return v;
    return fail == EFAULT ? 0 : 256;
}

/* An address and its length, which the kernel reads, then writes back
 * (accept, getsockopt's value, getsockname): seg filled, and returned. */
static inline struct iovec *kw_addr_iov(struct iovec seg[2], void *addr, socklen_t *len)
{
    seg[0] = (struct iovec){addr, addr && len ? kw_peek_len(len) : 0};
    seg[1] = (struct iovec){len, len ? sizeof *len : 0};
    return seg;
}

/* select's three fd_sets (the kernel writes as many longs as cover n bits)
 * and its timeout (Linux writes the time left). */
static inline void kw_select_segs(struct iovec seg[4], mt_kw_segs *s, int n, fd_set *r, fd_set *w,
                                  fd_set *x, void *t, size_t tlen)
{
    size_t bits = 8 * sizeof(long), len = n > 0 ? ((size_t)n + bits - 1) / bits * sizeof(long) : 0;
    seg[0] = (struct iovec){r, r ? len : 0};
    seg[1] = (struct iovec){w, w ? len : 0};
    seg[2] = (struct iovec){x, x ? len : 0};
    seg[3] = (struct iovec){t, t ? tlen : 0};
    *s = (mt_kw_segs){.iov = seg, .niov = 4};
}

#endif
