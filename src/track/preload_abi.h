/* The versioned interface between track (libmemtrack, often linked statically
 * and privately into the Vulkan layer) and the interposer
 * libmemtrack_preload.so (preload/).
 *
 * The interposer exports one symbol, MT_PRELOAD_ENTRY, returning an
 * mt_preload_api. Track finds it with dlsym(RTLD_DEFAULT, ...) when a tracker
 * is created, takes the *real* libc functions from it (so that track's own
 * sigaction/mmap/munmap are never mistaken for the application's), and hands
 * it an mt_preload_hooks table. From then on the interposer routes the
 * application's calls that matter to tracking through the hooks; before
 * (and in processes without a tracker) every wrapper is a pass-through that
 * costs one relaxed atomic load.
 *
 * Compatibility: both structs start with {abi, size}. A reader accepts a
 * struct whose abi equals its own MT_PRELOAD_ABI_VERSION and whose size
 * covers the members of the first version (MT_PRELOAD_HOOKS_V1_SIZE); a
 * member appended since is used only when `size` covers it. A change that is
 * not an append bumps the version and the entry point's name.
 *
 * Everything here that the interposer may call on a path the application may
 * reach from a signal handler is async-signal-safe: every hook except the
 * memory-management ones (mprotect, munmap, mremap, madvise, mmap_fixed),
 * which are safe too but serialise with each other. */
#ifndef MT_TRACK_PRELOAD_ABI_H
#define MT_TRACK_PRELOAD_ABI_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#define MT_PRELOAD_ABI_VERSION 1u
#define MT_PRELOAD_ENTRY "memtrack_preload_abi_v1"

/* Bits of a thread's virtual mask of the two fault signals. */
#define MT_VMASK_SEGV 1u
#define MT_VMASK_BUS 2u

/* The functions an application call would reach without the interposer
 * (dlsym(RTLD_NEXT): a sanitizer's interceptor, or libc). */
typedef struct mt_preload_real {
    int (*sigaction)(int, const struct sigaction *, struct sigaction *);
    int (*pthread_sigmask)(int, const sigset_t *, sigset_t *);
    void *(*mmap)(void *, size_t, int, int, int, off_t);
    int (*munmap)(void *, size_t);
    int (*madvise)(void *, size_t, int);
    void *(*mremap)(void *, size_t, size_t, int, ...);
} mt_preload_real;

/* Where one system call will make the kernel write user memory: iov[] (the
 * data), extra[] (addresses, control data, the msghdr itself, lengths) and,
 * for recvmmsg, every part of mmsg[]. Unused members are 0. */
typedef struct mt_kw_segs {
    const struct iovec *iov;
    size_t niov;
    const struct iovec *extra;
    size_t nextra;
    const struct mmsghdr *mmsg;
    size_t nmmsg;
} mt_kw_segs;

/* Given by track to the interposer. */
typedef struct mt_preload_hooks {
    uint32_t abi;
    uint32_t size;
    /* The application's sigaction() for SIGSEGV/SIGBUS. Returns 1 when track
     * served it (the call succeeded; *old is what the application would have
     * read without memtrack), 0 when the interposer must pass it through
     * (track's handler is not installed). */
    int (*sigaction)(int sig, const struct sigaction *act, struct sigaction *old);
    /* Before a system call in which the kernel writes segs: makes the tracked
     * pages among them writable and keeps collect, and the add of a range
     * that meets them, from arming them until kw_end (untracked segments
     * are pinned too: they may become tracked during the call). Returns a
     * token >= 0 to pass to kw_end, or -1 when segs name no bytes (then
     * kw_end must not be called). The token has MT_PRELOAD_KW_MET set when
     * segs met tracked pages that had to be opened. */
    int (*kw_begin)(const mt_kw_segs *segs);
    /* After that system call: reports the pages dirty, releases the token. */
    void (*kw_end)(int token, const mt_kw_segs *segs);
    /* Memory changed behind the tracker's back (a write through
     * /proc/self/mem): reports [addr, addr+len) dirty. */
    void (*written)(uintptr_t addr, size_t len);
    /* The application's memory calls. Each performs the real call itself (so
     * it is ordered with the tracker's state) and returns what libc would:
     * 0 / MAP_FAILED-or-address, with errno set on failure. */
    int (*mprotect)(void *addr, size_t len, int prot);
    int (*munmap)(void *addr, size_t len);
    void *(*mremap)(void *old_addr, size_t old_len, size_t new_len, int flags, void *new_addr);
    int (*madvise)(void *addr, size_t len, int advice);
    void *(*mmap_fixed)(void *addr, size_t len, int prot, int flags, int fd, off_t off);
    /* Appended: the process is about to be replaced or to die without exit
     * handlers. why: MT_TRACK_LAST_EXEC (0), MT_TRACK_LAST_EXIT (-1), or the
     * signal number of a terminating signal the interposer guards (then
     * called from its handler: async-signal-safe). */
    void (*last_words)(int why);
    /* Appended: the application is setting up a kernel facility that writes
     * its memory later, outside any call the interposer can bracket (io_uring,
     * Linux AIO): `what` is a mask of MT_PRELOAD_ASYNC_*. Called before the
     * facility exists; again, with everything seen so far, when track attaches
     * after it was set up. */
    void (*async_writer)(unsigned what);
} mt_preload_hooks;

/* In kw_begin's token: the destination met tracked signal-backend pages. */
#define MT_PRELOAD_KW_MET (1 << 16)

#define MT_PRELOAD_ASYNC_URING 1u
#define MT_PRELOAD_ASYNC_AIO 2u
/* Buffers registered with io_uring (IORING_REGISTER_BUFFERS*): pinned once,
 * written later by the kernel through its own mapping of the pages, which
 * no page-table based tracking (uffd-wp included) sees. */
#define MT_PRELOAD_ASYNC_PINNED 4u
/* Code whose runtime makes its own system calls (Go), past any wrapper:
 * its reads into tracked memory are kernel writes nobody brackets. */
#define MT_PRELOAD_ASYNC_RAW 8u

/* last_words' `why` besides signal numbers (track.h's MT_TRACK_LAST_*). */
#define MT_PRELOAD_LAST_EXEC 0
#define MT_PRELOAD_LAST_EXIT (-1)

#define MT_PRELOAD_HOOKS_V1_SIZE (offsetof(mt_preload_hooks, last_words))
/* True when hooks `h` has member `m` (appended after version 1's). */
#define MT_PRELOAD_HAS(h, m) ((h)->size >= offsetof(mt_preload_hooks, m) + sizeof((h)->m))

/* Exported by the interposer. */
typedef struct mt_preload_api {
    uint32_t abi;
    uint32_t size;
    const mt_preload_real *real;
    /* Installs the hooks. 0, or -EBUSY when another copy of libmemtrack in
     * the process attached first. */
    int (*attach)(const mt_preload_hooks *hooks);
    /* Removes them again (only if they are the ones attached). */
    void (*detach)(const mt_preload_hooks *hooks);
    /* This thread's virtual mask of SIGSEGV/SIGBUS (MT_VMASK_*): what the
     * application blocked, while the real mask keeps them deliverable. */
    unsigned (*vmask_get)(void);
    /* Sets it; returns the previous value. */
    unsigned (*vmask_set)(unsigned bits);
    /* A sent (not fault-generated) SIGSEGV/SIGBUS arrived while virtually
     * blocked: keep it pending, deliver it when the thread unblocks it. */
    void (*vpend)(unsigned bits);
} mt_preload_api;

typedef const mt_preload_api *(*mt_preload_entry_fn)(void);

#endif
