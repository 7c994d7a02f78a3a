/* The monotonic clock and what waits on it, for every module: condition
 * variables whose timed waits use CLOCK_MONOTONIC (a wall-clock jump must
 * neither stretch nor cut a timeout), deadlines from relative timeouts,
 * short sleeps and the CPU's spin-wait hint. Internal to the library. */
#ifndef MT_COMMON_CLOCK_H
#define MT_COMMON_CLOCK_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

/* Monotonic clock in nanoseconds. Async-signal-safe (clock_gettime is on
 * POSIX's list): the emergency flush times itself with it. */
uint64_t mti_now_ns(void);

/* Sleeps about `ns` nanoseconds (nanosleep; an interrupting signal ends it
 * early). Async-signal-safe. */
void mti_sleep_ns(uint64_t ns);

/* A hint to the CPU inside a polling loop (lets the sibling hyperthread
 * run, saves power); a no-op where there is no such instruction. Inline:
 * signal-handler spin loops use it and must not depend on a call. */
static inline void mti_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Initialises a condition variable whose timed waits use CLOCK_MONOTONIC.
 * Returns 0 or a negated pthread error. */
int mti_cond_init_monotonic(pthread_cond_t *c);

/* Sets *ts to now + timeout_ns on CLOCK_MONOTONIC (timeout_ns >= 0),
 * saturating instead of overflowing. */
void mti_deadline_after(struct timespec *ts, int64_t timeout_ns);

/* Waits on `c` (holding `m`) until signalled or `deadline` passes; NULL
 * deadline waits without limit. Returns 1 when the deadline passed, else 0. */
int mti_cond_wait_until(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *deadline);

#endif
