/* nomem_util.h: host allocations that fail on demand, for the tests that
 * check what running out of memory changes (test_*_nomem).
 *
 * The test binary is linked with --wrap=malloc,calloc,realloc,
 * aligned_alloc,posix_memalign,mmap (mt_add_nomem_test in
 * tests/CMakeLists.txt), so every allocation the statically linked library
 * makes goes through the wrappers below. nomem_arm(k, sticky) makes the
 * k-th allocation of the calling thread fail with ENOMEM (NULL, ENOMEM for
 * posix_memalign, MAP_FAILED for mmap), and with `sticky` every later one
 * too, until nomem_disarm(), which says whether one failed. Other threads
 * (a library's workers) are never failed. Include it in one file only. */
#ifndef MT_NOMEM_UTIL_H
#define MT_NOMEM_UTIL_H

#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/types.h>

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__real_realloc(void *p, size_t n);
void *__real_aligned_alloc(size_t a, size_t n);
int __real_posix_memalign(void **p, size_t a, size_t n);
void *__real_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t m);
void *__wrap_realloc(void *p, size_t n);
void *__wrap_aligned_alloc(size_t a, size_t n);
int __wrap_posix_memalign(void **p, size_t a, size_t n);
void *__wrap_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);

static _Thread_local long nomem_countdown; /* > 0: the countdown-th allocation fails */
static _Thread_local int nomem_fired, nomem_sticky;

/* 1 when this allocation is to fail. */
static int nomem_now(void)
{
    if (nomem_countdown <= 0)
        return 0;
    if (nomem_countdown > 1) {
        nomem_countdown--;
        return 0;
    }
    if (!nomem_sticky)
        nomem_countdown = 0;
    nomem_fired = 1;
    errno = ENOMEM;
    return 1;
}

void *__wrap_malloc(size_t n) { return nomem_now() ? NULL : __real_malloc(n); }
void *__wrap_calloc(size_t n, size_t m) { return nomem_now() ? NULL : __real_calloc(n, m); }
void *__wrap_realloc(void *p, size_t n) { return nomem_now() ? NULL : __real_realloc(p, n); }
void *__wrap_aligned_alloc(size_t a, size_t n) { return nomem_now() ? NULL : __real_aligned_alloc(a, n); }

int __wrap_posix_memalign(void **p, size_t a, size_t n)
{
    return nomem_now() ? ENOMEM : __real_posix_memalign(p, a, n);
}

void *__wrap_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    return nomem_now() ? MAP_FAILED : __real_mmap(addr, len, prot, flags, fd, off);
}

/* k > 0: the k-th allocation from now fails (sticky: and every later one). */
static inline void nomem_arm(long k, int sticky)
{
    nomem_countdown = k;
    nomem_sticky = sticky;
    nomem_fired = 0;
}

/* Stops failing; 1 when an allocation failed since nomem_arm. */
static inline int nomem_disarm(void)
{
    nomem_countdown = 0;
    nomem_sticky = 0;
    return nomem_fired;
}

#endif
