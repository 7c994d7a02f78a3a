/* Where this process's memory cgroup is (the layer's memory budget reads
 * its limit; the hostile test application makes one below it). Internal. */
#ifndef MT_COMMON_CGROUP_H
#define MT_COMMON_CGROUP_H

#include <stddef.h>

typedef struct mti_cgroup {
    int v1;          /* a version 1 "memory" hierarchy; else version 2 */
    char name[512];  /* its path as /proc/self/cgroup gives it ("/a/b") */
    char dir[4096];  /* its directory ("/sys/fs/cgroup/a/b") */
} mti_cgroup;

/* Finds it from /proc/self/cgroup and /proc/self/mountinfo: version 1's
 * memory hierarchy where one is mounted, else version 2's (whose directory
 * has memory.current only where the memory controller is on). 0, or
 * -ENOENT (no cgroup file system mounted where this process can see its
 * cgroup), or -ENOMEM. Opens and reads files: not for a sandbox. */
int mti_cgroup_find(mti_cgroup *out);

/* The same from the two files' text (tests feed it made-up ones). */
int mti_cgroup_parse(const char *proc_cgroup, const char *mountinfo, mti_cgroup *out);

#endif
