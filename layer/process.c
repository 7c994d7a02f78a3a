/* Fork, exit, exec and fatal signals: see process.h.
 *
 * fork: a pthread_atfork child handler detaches the child from the parent's
 * trace before anything else can run in it (the exit handler of a child that
 * calls exit() would otherwise wait for a writer thread that only exists in
 * the parent). The parent is unaffected. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>

#include "layer.h"
#include "process.h"

static void on_fork_child(void)
{
    lt_session_forked_child();
    lt_registry_after_fork();
}

static void at_exit(void) { lt_session_exit(); }

void lt_process_init(void)
{
    pthread_atfork(NULL, NULL, on_fork_child);
    /* An application that never destroys its instance still gets a complete
     * trace (index and trailer) when it exits normally. The layer is linked
     * -z nodelete, so this handler stays valid. */
    atexit(at_exit);
}
