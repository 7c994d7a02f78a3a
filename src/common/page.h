/* The system page size, fetched once for the whole library. Internal. */
#ifndef MT_COMMON_PAGE_H
#define MT_COMMON_PAGE_H

#include <stddef.h>

/* The page size in bytes (a power of two). The first call asks sysconf and
 * caches the answer; later calls are one relaxed load. Async-signal-safe
 * once called outside a handler (the trackers call it when created, before
 * any handler can need it; glibc's sysconf(_SC_PAGESIZE) is a plain read
 * anyway). Any thread. */
size_t mti_page_size(void);

#endif
