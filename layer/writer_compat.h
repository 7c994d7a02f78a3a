/* TEMPORARY until the trace writer's crash-safety primitives land. */
#ifndef LT_WRITER_COMPAT_H
#define LT_WRITER_COMPAT_H
#include <errno.h>
#include "memtrack/trace.h"
static inline int mt_trace_writer_checkpoint(mt_trace_writer *w) { return mt_trace_writer_flush(w); }
static inline int mt_trace_writer_emergency(mt_trace_writer *w) { (void)w; return -ENOSYS; }
#endif
