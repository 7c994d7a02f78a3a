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

int mti_cgroup_find(mti_cgroup *out)
{
    memset(out, 0, sizeof *out);
    char *cg = slurp("/proc/self/cgroup"), *mi = cg ? slurp("/proc/self/mountinfo") : NULL;
    int rc = -ENOMEM;
    if (!cg || !mi)
        goto done;
    char v1path[sizeof out->name] = "", v2path[sizeof out->name] = "";
    char *save = NULL;
    for (char *line = strtok_r(cg, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2 || strlen(c2 + 1) >= sizeof v1path)
            continue;
        *c2 = 0;
        const char *ctrls = c1 + 1, *path = c2 + 1;
        char list[256];
        snprintf(list, sizeof list, ",%s,", ctrls);
        if (c1 == line + 1 && line[0] == '0' && *ctrls == 0)
            strcpy(v2path, path);
        else if (strstr(list, ",memory,"))
            strcpy(v1path, path);
    }
    rc = -ENOENT;
    if (*v1path && cgroup_dir(mi, v1path, 0, out->dir, sizeof out->dir) == 0) {
        out->v1 = 1;
        strcpy(out->name, v1path);
        rc = 0;
    } else if (*v2path && cgroup_dir(mi, v2path, 1, out->dir, sizeof out->dir) == 0) {
        strcpy(out->name, v2path);
        rc = 0;
    }
done:
    free(cg);
    free(mi);
    return rc;
}
