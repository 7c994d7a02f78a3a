/* Monotonic clock, sleeps, condition variables and deadlines (see clock.h). */
#include "clock.h"

#include <errno.h>

uint64_t mti_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void mti_sleep_ns(uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
    nanosleep(&ts, NULL);
}

int mti_cond_init_monotonic(pthread_cond_t *c)
{
    pthread_condattr_t attr;
    int rc = pthread_condattr_init(&attr);
    if (rc)
        return -rc;
    rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    if (!rc)
        rc = pthread_cond_init(c, &attr);
    pthread_condattr_destroy(&attr);
    return -rc;
}

void mti_deadline_after(struct timespec *ts, int64_t timeout_ns)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
    int64_t sec = timeout_ns / 1000000000, nsec = timeout_ns % 1000000000;
    /* Saturate: a timeout of centuries must not wrap into the past. */
    if (sec > INT32_MAX)
        sec = INT32_MAX;
    ts->tv_sec += (time_t)sec;
    ts->tv_nsec += (long)nsec;
    if (ts->tv_nsec >= 1000000000) {
        ts->tv_nsec -= 1000000000;
        ts->tv_sec++;
    }
}

int mti_cond_wait_until(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *deadline)
{
    if (!deadline) {
        pthread_cond_wait(c, m);
        return 0;
    }
    return pthread_cond_timedwait(c, m, deadline) == ETIMEDOUT;
}
