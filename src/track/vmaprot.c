/* mti_vma_prot: the protection that memory has now, from the kernel's list
 * of mappings (internal.h).
 *
 * Why: a range is added to a tracker where its memory already exists, and
 * memory under another layer (gfxreconstruct's capture layer protects the
 * shadow it hands out with mprotect before returning it, a page guard of
 * its own) may already be read-only. Recorded as read-write, memtrack would
 * take that layer's write faults as its own, make the pages writable and
 * never pass them on: the layer loses the writes (and copies stale bytes to
 * the device), and its protection is widened on remove. Recorded as it is,
 * such a page is armed as it was and its faults reach the layer's handler.
 *
 * PROCMAP_QUERY (Linux 6.11) answers per mapping with one ioctl; before it,
 * /proc/self/maps is read as far as the range, from a descriptor kept open
 * (procfd.c: a sandboxed application may refuse opens). System calls go through
 * syscall(), past libc's open/read wrappers (and so past the interposer's
 * descriptor and /proc/self/mem handling); the interposer's syscall() only
 * brackets the read into this stack buffer like any other. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

#ifndef PROCMAP_QUERY
/* linux/fs.h of Linux 6.11; Debian 12's headers predate it. */
struct procmap_query {
    uint64_t size;
    uint64_t query_flags;
    uint64_t query_addr;
    uint64_t vma_start;
    uint64_t vma_end;
    uint64_t vma_flags;
    uint64_t vma_page_size;
    uint64_t vma_offset;
    uint64_t inode;
    uint32_t dev_major;
    uint32_t dev_minor;
    uint32_t vma_name_size;
    uint32_t build_id_size;
    uint64_t vma_name_addr;
    uint64_t build_id_addr;
};
#define PROCMAP_QUERY _IOWR('f', 17, struct procmap_query)
#define PROCMAP_QUERY_VMA_READABLE 0x01
#define PROCMAP_QUERY_VMA_WRITABLE 0x02
#define PROCMAP_QUERY_VMA_EXECUTABLE 0x04
#define PROCMAP_QUERY_COVERING_OR_NEXT_VMA 0x10
#endif
#ifndef PROCMAP_QUERY_VMA_SHARED
#define PROCMAP_QUERY_VMA_SHARED 0x08
#endif

static unsigned query_prot(const struct procmap_query *q)
{
    uint64_t flags = q->vma_flags;
    return (flags & PROCMAP_QUERY_VMA_READABLE ? PROT_READ : 0u) |
           (flags & PROCMAP_QUERY_VMA_WRITABLE ? PROT_WRITE : 0u) |
           (flags & PROCMAP_QUERY_VMA_EXECUTABLE ? PROT_EXEC : 0u) |
           (flags & PROCMAP_QUERY_VMA_SHARED ? MTI_VMA_SHARED : 0u) | (q->inode ? MTI_VMA_FILE : 0u);
}

/* 1 done, 0 the ioctl is unknown here (older kernel), -errno. */
static int by_query(int fd, uintptr_t start, uintptr_t end, mti_vma_fn fn, void *ctx)
{
    uintptr_t at = start;
    while (at < end) {
        struct procmap_query q;
        memset(&q, 0, sizeof q);
        q.size = sizeof q;
        q.query_flags = PROCMAP_QUERY_COVERING_OR_NEXT_VMA;
        q.query_addr = at;
        if (syscall(SYS_ioctl, fd, PROCMAP_QUERY, &q) != 0) {
            if (errno == ENOENT) /* nothing mapped at or after `at` */
                return 1;
            return at == start && (errno == ENOTTY || errno == EINVAL) ? 0 : -errno;
        }
        if (q.vma_start >= end || q.vma_end <= at)
            return 1;
        uintptr_t lo = q.vma_start > at ? (uintptr_t)q.vma_start : at;
        uintptr_t hi = q.vma_end < end ? (uintptr_t)q.vma_end : end;
        fn(ctx, lo, hi, query_prot(&q));
        at = hi;
    }
    return 1;
}

/* Parses a hexadecimal number at *p, advancing it. */
static uintptr_t hex(const char **p, const char *e)
{
    uintptr_t v = 0;
    for (; *p < e; (*p)++) {
        char c = **p;
        unsigned d = c >= '0' && c <= '9' ? (unsigned)(c - '0')
                     : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                                            : 16u;
        if (d == 16)
            break;
        v = v << 4 | d;
    }
    return v;
}

/* Skips the spaces, then the field after them, at *p. */
static void skip_field(const char **p, const char *e)
{
    while (*p < e && **p == ' ')
        (*p)++;
    while (*p < e && **p != ' ')
        (*p)++;
}

/* One line of /proc/self/maps, "start-end rwxp offset dev inode path". */
typedef struct maps_line {
    uintptr_t lo, hi, offset;
    unsigned prot;
    const char *name; /* the path, name_len bytes (0: none) */
    size_t name_len;
} maps_line;

/* 1 parsed, 0 not a mapping line. */
static int parse_line(const char *p, const char *e, maps_line *l)
{
    l->lo = hex(&p, e);
    if (p >= e || *p++ != '-')
        return 0;
    l->hi = hex(&p, e);
    if (p + 4 >= e || *p++ != ' ')
        return 0;
    l->prot = (p[0] == 'r' ? PROT_READ : 0u) | (p[1] == 'w' ? PROT_WRITE : 0u) |
              (p[2] == 'x' ? PROT_EXEC : 0u) | (p[3] == 's' ? MTI_VMA_SHARED : 0u);
    p += 4;
    while (p < e && *p == ' ')
        p++;
    l->offset = hex(&p, e);
    skip_field(&p, e); /* device */
    while (p < e && *p == ' ')
        p++;
    if (p < e && *p != '0') /* the inode: decimal, 0 for anonymous memory */
        l->prot |= MTI_VMA_FILE;
    skip_field(&p, e); /* inode */
    while (p < e && *p == ' ')
        p++;
    l->name = p;
    l->name_len = (size_t)(e - p);
    return 1;
}

typedef int (*line_fn)(const maps_line *l, uintptr_t start, uintptr_t end, void *ctx);

/* Calls fn for a line overlapping [start, end); 1 past the range (stop), 0 go on. */
static int line(const char *p, const char *e, uintptr_t start, uintptr_t end, line_fn fn, void *ctx)
{
    maps_line l;
    if (!parse_line(p, e, &l))
        return 0;
    if (l.lo >= end)
        return 1;
    if (l.hi <= start)
        return 0;
    return fn(&l, start, end, ctx);
}

typedef struct prot_ctx {
    mti_vma_fn fn;
    void *ctx;
} prot_ctx;

static int prot_line(const maps_line *l, uintptr_t start, uintptr_t end, void *ctx)
{
    prot_ctx *c = ctx;
    c->fn(c->ctx, l->lo > start ? l->lo : start, l->hi < end ? l->hi : end, l->prot);
    return 0;
}

/* /proc/self/maps in address order, read until past the range. A line
 * longer than the buffer (a path name) is skipped to its end. By pread from
 * the start: the descriptor is kept and shared (procfd.c). */
static int by_text(int fd, uintptr_t start, uintptr_t end, line_fn fn, void *ctx, char *buf, size_t cap)
{
    size_t have = 0;
    off_t at = 0;
    int skipping = 0;
    for (;;) {
        ssize_t n = syscall(SYS_pread64, fd, buf + have, cap - have, at);
        if (n > 0)
            at += n;
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        have += (size_t)n;
        size_t used = 0;
        for (;;) {
            char *nl = memchr(buf + used, '\n', have - used);
            if (!nl)
                break;
            if (!skipping && line(buf + used, nl, start, end, fn, ctx))
                return 0;
            skipping = 0;
            used = (size_t)(nl - buf) + 1;
        }
        if (n == 0)
            return 0;
        if (used == 0 && have == cap) { /* no end of line in a full buffer */
            if (!skipping && line(buf, buf + have, start, end, fn, ctx))
                return 0; /* its start and protection come first: parsed */
            skipping = 1;
            have = 0;
            continue;
        }
        memmove(buf, buf + used, have - used);
        have -= used;
    }
}

int mti_vma_prot(uintptr_t start, uintptr_t end, mti_vma_fn fn, void *ctx)
{
    int priv, fd = mti_procfd_get(MTI_PROCFD_MAPS, &priv);
    if (fd < 0)
        return fd;
    int rc = by_query(fd, start, end, fn, ctx);
    if (rc == 0) {
        prot_ctx c = {fn, ctx};
        char buf[4096];
        rc = by_text(fd, start, end, prot_line, &c, buf, sizeof buf);
    } else if (rc == 1) {
        rc = 0;
    }
    mti_procfd_put(fd, priv);
    return rc;
}

/* NVIDIA's driver maps device memory through the PCI BAR from its GPU
 * device node (/dev/nvidia0, 1, ...; its control node maps system memory,
 * which has ordinary pages). Such a mapping has no struct pages, so the
 * kernel serves /proc/self/mem (and a debugger's reads) through the
 * driver's access callback, which takes the offset from the start of the
 * VMA the address is in, ignoring the VMA's own offset: once an mprotect of
 * part of the mapping split it (the signal backend's arming, or the
 * application's own), every piece but the first is read and written at
 * the wrong place (measured on an H200: /proc/self/mem read other pages'
 * bytes). A piece after a split has a nonzero offset, which the driver
 * never gives a mapping itself (it refuses any). */
static int nvidia_gpu_node(const char *name, size_t len)
{
    static const char prefix[] = "/dev/nvidia";
    size_t n = sizeof prefix - 1;
    if (len <= n || memcmp(name, prefix, n) != 0)
        return 0;
    for (size_t i = n; i < len; i++)
        if (name[i] < '0' || name[i] > '9')
            return 0;
    return 1;
}

static int misread_line(const maps_line *l, uintptr_t start, uintptr_t end, void *ctx)
{
    (void)start, (void)end;
    if (l->offset != 0 && nvidia_gpu_node(l->name, l->name_len))
        *(int *)ctx = 1;
    return 0;
}

int mti_vma_misread(uintptr_t start, uintptr_t end)
{
    int priv, fd = mti_procfd_get(MTI_PROCFD_MAPS, &priv);
    if (fd < 0)
        return fd;
    int found = 0;
    char buf[4096];
    int rc = by_text(fd, start, end, misread_line, &found, buf, sizeof buf);
    mti_procfd_put(fd, priv);
    return rc < 0 ? rc : found;
}

typedef struct at_ctx {
    uintptr_t addr;
    uint64_t *file_off;
    char *name;
    size_t cap;
    int found;
} at_ctx;

static int at_line(const maps_line *l, uintptr_t start, uintptr_t end, void *ctx)
{
    (void)start, (void)end;
    at_ctx *c = ctx;
    *c->file_off = c->addr - l->lo + l->offset;
    /* A path too long keeps its end: the file's name is what a reader wants. */
    size_t n = l->name_len < c->cap - 1 ? l->name_len : c->cap - 1;
    memcpy(c->name, l->name + (l->name_len - n), n);
    c->name[n] = 0;
    c->found = 1;
    return 1;
}

int mti_vma_at(uintptr_t addr, uint64_t *file_off, char *name, size_t cap)
{
    if (!cap)
        return -EINVAL;
    int priv, fd = mti_procfd_get(MTI_PROCFD_MAPS, &priv);
    if (fd < 0)
        return fd;
    at_ctx c = {addr, file_off, name, cap, 0};
    /* Small: this runs in the crash report's handler, maybe on an
     * application's alternate stack of 8 KiB (Rust's) whose kernel frame
     * takes 3 (test_track_altstack). A longer line keeps its start, where
     * the address range and offset are; a long path loses its end. */
    char buf[640];
    int rc = by_text(fd, addr, addr + 1, at_line, &c, buf, sizeof buf);
    mti_procfd_put(fd, priv);
    return rc < 0 ? rc : c.found ? 0 : -ENOENT;
}
