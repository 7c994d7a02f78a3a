/* Sleeping helpers shared by timeline and stream: condition variables on the
 * monotonic clock (a wall-clock jump must not stretch or cut a timeout) and
 * deadlines computed from relative timeouts. */
#ifndef MT_TIMELINE_SLEEP_H
#define MT_TIMELINE_SLEEP_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

/* Monotonic clock in nanoseconds. */
uint64_t mt_now_ns(void);

/* A hint to the CPU inside a polling loop (lets the sibling hyperthread
 * run, saves power); a no-op where there is no such instruction. */
static inline void mt_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Initialises a condition variable whose timed waits use CLOCK_MONOTONIC.
 * Returns 0 or a negated pthread error. */
int mt_cond_init_monotonic(pthread_cond_t *c);

/* Sets *ts to now + timeout_ns on CLOCK_MONOTONIC (timeout_ns >= 0),
 * saturating instead of overflowing. */
void mt_deadline_after(struct timespec *ts, int64_t timeout_ns);

/* Waits on `c` (holding `m`) until signalled or `deadline` passes; NULL
 * deadline waits without limit. Returns 1 when the deadline passed, else 0. */
int mt_cond_wait_until(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *deadline);

#endif
