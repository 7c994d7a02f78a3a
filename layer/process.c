/* Fork, exit, exec and fatal signals: see process.h.
 *
 * fork: a pthread_atfork child handler detaches the child from the parent's
 * trace before anything else can run in it (the exit handler of a child that
 * calls exit() would otherwise wait for a writer thread that only exists in
 * the parent). The parent is unaffected.
 *
 * Ends without exit handlers: track calls our last words before a fault
 * takes its default action, and (with the interposer preloaded) before
 * exec, _exit, and a terminating signal the interposer guards. exec
 * checkpoints the trace (appending goes on if exec fails); the others are
 * final and run the writer's emergency flush, which takes no lock. A vfork
 * child shares our memory but is another process: it must not touch the
 * trace, hence the pid check. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "layer.h"
#include "process.h"
#include "budget.h"
#include "refcache.h"
#include "workers.h"

static pid_t g_pid;

static void on_fork_child(void)
{
    g_pid = getpid();
    lt_session_forked_child();
    lt_registry_after_fork();
    lt_workers_after_fork();
    lt_refcache_after_fork();
    lt_budget_after_fork();
}

static void at_exit(void) { lt_session_exit(); }

/* Async-signal-safe when why is a signal or an exit. */
static void last_words(int why)
{
    if (getpid() != g_pid)
        return; /* a vfork child, or a forked one that did not exec yet */
    lt_session_last_words(why != MT_TRACK_LAST_EXEC);
}

/* Async-signal-safe: only counts; the toggle happens at the next capture point. */
static void on_trigger(int sig)
{
    (void)sig;
    lt_window_trigger();
}

static void install_trigger(int sig)
{
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_trigger;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    if (sigaction(sig, &sa, &old) != 0)
        return;
    if (old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN)
        lt_warn_once("trigger", "the application had its own handler for signal %d (%s): it is "
                     "replaced by the capture trigger; choose another with --trigger", sig, strsignal(sig));
}

void lt_process_init(void)
{
    g_pid = getpid();
    pthread_atfork(NULL, NULL, on_fork_child);
    mt_track_set_last_words(last_words);
    /* A recorded application that dies of a fault gets one line on stderr
     * saying where, and whether the address was memory memtrack tracks:
     * the first question of anyone whose application crashed under it. */
    mt_track_set_fault_report(STDERR_FILENO);
    /* An application that never destroys its instance still gets a complete
     * trace (index and trailer) when it exits normally. The layer is linked
     * -z nodelete, so this handler stays valid. */
    atexit(at_exit);
    if (lt_cfg()->trigger)
        install_trigger(lt_cfg()->trigger);
}
