/* Descriptors that stay out of the application's way. Internal. */
#ifndef MT_COMMON_FDPARK_H
#define MT_COMMON_FDPARK_H

#include <stdint.h>

/* Moves `fd` (one memtrack keeps open inside an application: a trace file,
 * a userfaultfd, /proc/self/pagemap, the helper's shared memory) to a
 * number above the ones the application uses, and closes the original.
 * Returns the descriptor to use from now on: the moved one, or `fd` itself
 * where there is no room above (it is valid either way), or `fd` when it is
 * negative. The new descriptor is close-on-exec.
 *
 * Why: the kernel hands out the lowest free number and refuses numbers at
 * or above the soft RLIMIT_NOFILE. A descriptor of ours among the
 * application's numbers would take one the application counts on (close(0)
 * then open() must give 0) and one of its RLIMIT_NOFILE budget (NVIDIA's
 * driver needs two per allocation: an application that left itself just
 * enough failed with the layer). So where the hard limit allows, the soft
 * limit is raised for the duplication and put back: a descriptor above the
 * soft limit stays valid. Where it does not (soft == hard), a limit above
 * 2048 leaves room at 1024 and up; below that the descriptor goes to the
 * top eighth of the limit (where it stays if that is full).
 * Not async-signal-safe in intent (it changes a process-wide limit for a
 * moment); call it where the descriptor is opened. */
int mti_fd_park(int fd);

/* A kept descriptor's file, as (device, inode): 0, or -errno. */
int mti_fd_identity(int fd, uint64_t *dev, uint64_t *ino);

/* Whether `fd` still names the file mti_fd_identity gave (dev, ino). An
 * application may close descriptors it did not open (closefrom,
 * close_range) and get the number back for a file of its own: a kept
 * descriptor is checked before it is written, read or closed.
 * Async-signal-safe (one fstat). */
int mti_fd_names(int fd, uint64_t dev, uint64_t ino);

#endif
