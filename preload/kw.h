/* The bracket of a system call in which the kernel writes user memory
 * (kwrite.c explains it): shared by kwrite.c and idem.c. */
#ifndef MTP_KW_H
#define MTP_KW_H

#include <pthread.h>

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

/* Runs `call` bracketed by the hooks when segs hold tracked memory. */
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
        if (!mtp_get_hooks() || (cnt) <= 0 || !(vec)) {                                         \
            rv_ = (call);                                                                       \
        } else {                                                                                \
            mt_kw_segs segs_ = {.iov = (vec), .niov = (size_t)(cnt)};                           \
            rv_ = KW_CALL(&segs_, call);                                                        \
        }                                                                                       \
        rv_;                                                                                    \
    })

#endif
