/* File output that finishes what it starts. Internal. */
#ifndef MT_COMMON_IO_H
#define MT_COMMON_IO_H

#include <stddef.h>
#include <stdint.h>

/* Writes all n bytes of p at offset off of fd, retrying short writes and
 * EINTR. Returns 0, -errno, or -EIO when the file takes no more bytes.
 * Async-signal-safe (pwrite only): the emergency flush writes with it. */
int mti_pwrite_all(int fd, const void *p, size_t n, uint64_t off);

#endif
