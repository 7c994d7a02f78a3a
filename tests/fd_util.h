/* Finding this process's descriptors by the file they name: tests of the
 * descriptors memtrack keeps open inside an application. */
#ifndef MT_FD_UTIL_H
#define MT_FD_UTIL_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mt_test.h"

/* Stores in out[] (at most cap) the numbers of this process's descriptors
 * whose /proc/self/fd link reads `target`; returns how many. */
static inline int fd_numbers_naming(const char *target, int *out, int cap)
{
    DIR *d = opendir("/proc/self/fd");
    MT_CHECK(d);
    int n = 0;
    struct dirent *e;
    while (n < cap && (e = readdir(d))) {
        char link[512], p[300];
        snprintf(p, sizeof p, "/proc/self/fd/%s", e->d_name);
        ssize_t len = readlink(p, link, sizeof link - 1);
        if (len > 0) {
            link[len] = 0;
            if (strcmp(link, target) == 0)
                out[n++] = atoi(e->d_name);
        }
    }
    closedir(d);
    return n;
}

/* Whether descriptor `fd` still names the file `was` describes (its
 * device and inode, as fstat gave them). */
static inline int fd_still_names(int fd, const struct stat *was)
{
    struct stat st;
    return fstat(fd, &st) == 0 && st.st_dev == was->st_dev && st.st_ino == was->st_ino;
}

#endif
