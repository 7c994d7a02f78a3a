/* Telling a forked child's copy of a writer from the writer itself.
 *
 * In a forked child the compressor threads do not exist, and the writer's
 * mutexes and condition variables may be frozen in the state the parent's
 * threads left them in: any wait would never end. The child must call
 * mt_trace_writer_abandon; this is the net for one that does not. A fork
 * handler bumps a generation that every call compares with the one it was
 * opened in (a relaxed load, inline in writer.h: no cost to speak of); the
 * pid check catches forks that bypass the handlers (a raw clone). */
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "writer.h"

_Atomic unsigned mti_writer_fork_gen;
static pthread_once_t g_fork_once = PTHREAD_ONCE_INIT;

static void on_fork_child(void) { atomic_fetch_add_explicit(&mti_writer_fork_gen, 1, memory_order_relaxed); }

/* glibc drops the handler when the library is unloaded (dlclose). */
static void register_fork_handler(void) { pthread_atfork(NULL, NULL, on_fork_child); }

void mti_writer_fork_init(mt_trace_writer *w)
{
    pthread_once(&g_fork_once, register_fork_handler);
    w->fork_gen = atomic_load_explicit(&mti_writer_fork_gen, memory_order_relaxed);
    w->pid = getpid();
}
