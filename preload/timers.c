/* POSIX timers that notify by a thread (timer_create with SIGEV_THREAD).
 *
 * glibc runs such a timer's function in a thread it creates itself, with
 * every signal blocked, through its internal pthread_create (no wrapper
 * sees it). A write from there into a tracked page (signal backend) raises
 * SIGSEGV while it is blocked, and the kernel then kills the process. So the
 * function runs through a trampoline that first moves SIGSEGV/SIGBUS from
 * the thread's real mask into its virtual one (signals.c): the function
 * still sees them blocked, as without memtrack, and a fault reaches track's
 * handler. glibc's other notification threads (AIO, mq_notify,
 * getaddrinfo_a) start with nothing blocked and need none of this.
 *
 * The trampoline needs the function and its value, one pointer is passed:
 * a record of both, which is never freed, because a notification thread of
 * a deleted timer may still be about to read it. Records are shared by
 * every timer with the same function and value, so their number is that of
 * the distinct pairs an application uses. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <time.h>

#include "preload.h"

typedef struct tramp {
    void (*fn)(union sigval);
    union sigval val;
    struct tramp *next;
} tramp;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static tramp *g_tramps;

static void tramp_run(union sigval v)
{
    const tramp *t = v.sival_ptr;
    mtp_import_thread_mask();
    t->fn(t->val);
}

static tramp *tramp_for(void (*fn)(union sigval), union sigval val)
{
    pthread_mutex_lock(&g_lock);
    tramp *t = g_tramps;
    while (t && (t->fn != fn || t->val.sival_ptr != val.sival_ptr))
        t = t->next;
    if (!t && (t = malloc(sizeof *t)) != NULL) {
        *t = (tramp){fn, val, g_tramps};
        g_tramps = t;
    }
    pthread_mutex_unlock(&g_lock);
    return t;
}

MTP_EXPORT int timer_create(clockid_t clk, struct sigevent *sev, timer_t *id)
{
    if (!sev || sev->sigev_notify != SIGEV_THREAD || !sev->sigev_notify_function)
        return REAL(timer_create)(clk, sev, id);
    tramp *t = tramp_for(sev->sigev_notify_function, sev->sigev_value);
    if (!t)
        return REAL(timer_create)(clk, sev, id);
    /* glibc copies what it needs from the sigevent: the application's own
     * is left as it was. */
    struct sigevent mine = *sev;
    mine.sigev_notify_function = tramp_run;
    mine.sigev_value.sival_ptr = t;
    return REAL(timer_create)(clk, &mine, id);
}
