/* Finding this process's memory cgroup (cgroup.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cgroup.h"

static char *slurp(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    size_t cap = 8192, len = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (cap - len < 2) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        ssize_t n = read(fd, buf + len, cap - len - 1);
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    close(fd);
    if (buf)
        buf[len] = 0;
    return buf;
}

/* The directory of cgroup `path` in the version 2 hierarchy (`v2`) or in
 * version 1's "memory" one, from /proc/self/mountinfo: "ID PARENT MAJ:MIN
 * ROOT MOUNTPOINT OPTS ... - FSTYPE SOURCE SUPEROPTS". */
static int cgroup_dir(const char *mountinfo, const char *path, int v2, char *out, size_t out_len)
{
    for (const char *line = mountinfo; line && *line;) {
        const char *eol = strchr(line, '\n');
        size_t len = eol ? (size_t)(eol - line) : strlen(line);
        char l[2048];
        if (len < sizeof l) {
            memcpy(l, line, len);
            l[len] = 0;
            char root[512], mnt[1024], fstype[64], superopts[512] = "";
            const char *dash = strstr(l, " - ");
            if (dash && sscanf(l, "%*s %*s %*s %511s %1023s", root, mnt) == 2 &&
                sscanf(dash + 3, "%63s %*s %511s", fstype, superopts) >= 1) {
                char opts[520];
                snprintf(opts, sizeof opts, ",%s,", superopts);
                int match = v2 ? strcmp(fstype, "cgroup2") == 0
                               : strcmp(fstype, "cgroup") == 0 && strstr(opts, ",memory,") != NULL;
                size_t rl = strcmp(root, "/") == 0 ? 0 : strlen(root);
                /* The cgroup must lie under the mount's root (a container
                 * sees its own cgroup as the root of its mount). */
                if (match && strncmp(path, root, rl) == 0 && (path[rl] == '/' || path[rl] == 0)) {
                    int n = snprintf(out, out_len, "%s%s", mnt, path + rl);
                    if (n <= 0 || (size_t)n >= out_len)
                        return -1;
                    if (n > 1 && out[n - 1] == '/')
                        out[n - 1] = 0;
                    return 0;
                }
            }
        }
        line = eol ? eol + 1 : NULL;
    }
    return -1;
}

int mti_cgroup_parse(const char *proc_cgroup, const char *mountinfo, mti_cgroup *out)
{
    memset(out, 0, sizeof *out);
    char v1path[sizeof out->name] = "", v2path[sizeof out->name] = "";
    /* "ID:CONTROLLERS:PATH" per line; version 2's is "0::PATH". */
    for (const char *line = proc_cgroup; line && *line;) {
        const char *eol = strchr(line, '\n');
        size_t len = eol ? (size_t)(eol - line) : strlen(line);
        const char *c1 = memchr(line, ':', len);
        const char *c2 = c1 ? memchr(c1 + 1, ':', len - (size_t)(c1 + 1 - line)) : NULL;
        size_t plen = c2 ? len - (size_t)(c2 + 1 - line) : 0;
        if (c2 && plen < sizeof v1path && (size_t)(c2 - c1 - 1) < 200) {
            char list[208];
            snprintf(list, sizeof list, ",%.*s,", (int)(c2 - c1 - 1), c1 + 1);
            if (c1 == line + 1 && line[0] == '0' && c2 == c1 + 1) {
                memcpy(v2path, c2 + 1, plen);
                v2path[plen] = 0;
            } else if (strstr(list, ",memory,")) {
                memcpy(v1path, c2 + 1, plen);
                v1path[plen] = 0;
            }
        }
        line = eol ? eol + 1 : NULL;
    }
    if (*v1path && cgroup_dir(mountinfo, v1path, 0, out->dir, sizeof out->dir) == 0) {
        out->v1 = 1;
        strcpy(out->name, v1path);
        return 0;
    }
    if (*v2path && cgroup_dir(mountinfo, v2path, 1, out->dir, sizeof out->dir) == 0) {
        strcpy(out->name, v2path);
        return 0;
    }
    return -ENOENT;
}

int mti_cgroup_find(mti_cgroup *out)
{
    memset(out, 0, sizeof *out);
    char *cg = slurp("/proc/self/cgroup"), *mi = cg ? slurp("/proc/self/mountinfo") : NULL;
    int rc = cg && mi ? mti_cgroup_parse(cg, mi, out) : -ENOMEM;
    free(cg);
    free(mi);
    return rc;
}
