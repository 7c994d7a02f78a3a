/* Process events the capture must react to: fork (the child never writes
 * its parent's trace), normal exit (close the trace), and the ends that run
 * no exit handler — exec, _exit, a fatal signal — where the trace is made
 * complete first. */
#ifndef LT_PROCESS_H
#define LT_PROCESS_H

/* Registers the handlers once (called by lt_session_init). */
void lt_process_init(void);

#endif
