/* memtrack umbrella header: includes every public module header.
 * Each module also has its own header under memtrack/ for users who want
 * only one piece. */
#ifndef MEMTRACK_H
#define MEMTRACK_H

#include "memtrack/base.h"
#include "memtrack/track.h"
#include "memtrack/diff.h"
#include "memtrack/trace.h"
#include "memtrack/alloc.h"
#include "memtrack/timeline.h"
#include "memtrack/stream.h"
#include "memtrack/device_sim.h"
#include "memtrack/coherence.h"
#include "memtrack/check.h"

#endif
