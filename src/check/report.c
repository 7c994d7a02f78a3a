/* The text of one failing check: what, where in the program, which thread,
 * and what the address is next to. The runtime folds repeats of a site and
 * kind into one report ("... and N more"). */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>

#include "memtrack/check.h"

const char *mt_check_kind_name(uint32_t kind)
{
    switch (kind) {
    case MT_CHECK_MISALIGNED: return "misaligned";
    case MT_CHECK_LOCAL_BOUND: return "local-bound";
    case MT_CHECK_NOACCESS: return "out-of-bounds";
    case MT_CHECK_UNINIT: return "uninitialised";
    }
    return "unknown";
}

static const char *verb(unsigned access)
{
    switch (access) {
    case MT_CHECK_LOAD: return "read";
    case MT_CHECK_STORE: return "write";
    case MT_CHECK_ATOMIC: return "atomic";
    case MT_CHECK_REDUCE: return "reduction";
    case MT_CHECK_PREFETCH: return "prefetch";
    }
    return "access";
}

typedef struct out {
    char *buf;
    size_t cap, len;
} out;

static void put(out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(out *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t room = o->len < o->cap ? o->cap - o->len : 0;
    int n = vsnprintf(room ? o->buf + o->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n > 0)
        o->len += (size_t)n;
}

static const char *plural(uint64_t n)
{
    return n == 1 ? "" : "s";
}

static void describe_where(out *o, const mt_check_record *rec, const mt_check_where *w)
{
    const char *api = w->alloc_api ? w->alloc_api : "allocation";
    uint64_t end = w->alloc_base + w->alloc_size, d;
    switch (w->relation) {
    case 1:
    case 4:
        d = rec->addr - w->alloc_base;
        put(o, "    address is %" PRIu64 " byte%s into a %" PRIu64 "-byte allocation at 0x%" PRIx64 " (%s #%" PRIu64
               ")%s\n",
            d, plural(d), w->alloc_size, w->alloc_base, api, w->alloc_serial,
            w->relation == 4 ? " that was freed: use after free" : "");
        break;
    case 2:
        d = w->alloc_base - rec->addr;
        put(o, "    address is %" PRIu64 " byte%s before a %" PRIu64 "-byte allocation at 0x%" PRIx64 " (%s #%" PRIu64
               ")\n",
            d, plural(d), w->alloc_size, w->alloc_base, api, w->alloc_serial);
        break;
    case 3:
        d = rec->addr - end;
        put(o, "    address is %" PRIu64 " byte%s after the end of a %" PRIu64 "-byte allocation at 0x%" PRIx64
               " (%s #%" PRIu64 ")\n",
            d, plural(d), w->alloc_size, w->alloc_base, api, w->alloc_serial);
        break;
    default:
        put(o, "    address is not inside or next to any live allocation\n");
        break;
    }
}

size_t mt_check_format(char *buf, size_t cap, const mt_check_record *rec, const mt_check_site *site,
                       const char *demangled, const mt_check_where *where, uint64_t more)
{
    out o = {buf, cap, 0};
    if (cap)
        buf[0] = 0;
    unsigned access = site ? site->access : 0, size = site ? site->size : 0;
    const char *v = verb(access);
    switch (rec->kind) {
    case MT_CHECK_MISALIGNED:
        put(&o, "memtrack check: misaligned %s of %u byte%s at 0x%" PRIx64
                             " (the address must be a multiple of %u)\n",
            v, size, size == 1 ? "" : "s", rec->addr, access == MT_CHECK_PREFETCH ? 8u : size);
        break;
    case MT_CHECK_LOCAL_BOUND:
        put(&o, "memtrack check: local-memory %s of %u byte%s at 0x%" PRIx64
                " past the top of the thread's local memory\n",
            v, size, size == 1 ? "" : "s", rec->addr);
        break;
    case MT_CHECK_NOACCESS:
        put(&o, "memtrack check: out-of-bounds global %s of %u byte%s at 0x%" PRIx64 "%s\n", v, size,
            size == 1 ? "" : "s", rec->addr, access == MT_CHECK_PREFETCH ? " (checked at its 1 KiB boundary)" : "");
        break;
    case MT_CHECK_UNINIT:
        put(&o, "memtrack check: %s of %u byte%s at 0x%" PRIx64 " uses uninitialised memory\n", v, size,
            size == 1 ? "" : "s", rec->addr);
        break;
    default:
        put(&o, "memtrack check: failed check (kind %" PRIu32 ") at 0x%" PRIx64 "\n", rec->kind, rec->addr);
        break;
    }
    const char *fn = site && site->function ? site->function : "?";
    if (demangled && demangled[0])
        put(&o, "    in %s [%s]", demangled, fn);
    else
        put(&o, "    in %s", fn);
    put(&o, ", block (%" PRIu32 ",%" PRIu32 ",%" PRIu32 "), thread (%" PRIu32 ",%" PRIu32 ",%" PRIu32 ")\n",
        rec->block[0], rec->block[1], rec->block[2], rec->thread[0], rec->thread[1], rec->thread[2]);
    if (site) {
        if (site->file && site->src_line)
            put(&o, "    at %s:%" PRIu32 " (PTX line %" PRIu32 ": %s)\n", site->file, site->src_line,
                site->ptx_line, site->text ? site->text : "");
        else
            put(&o, "    at PTX line %" PRIu32 ": %s\n", site->ptx_line, site->text ? site->text : "");
    } else {
        put(&o, "    at unknown check site %" PRIu32 "\n", rec->site);
    }
    if (where && (rec->kind == MT_CHECK_NOACCESS || rec->kind == MT_CHECK_UNINIT))
        describe_where(&o, rec, where);
    if (rec->kind == MT_CHECK_NOACCESS || rec->kind == MT_CHECK_LOCAL_BOUND || rec->kind == MT_CHECK_MISALIGNED)
        put(&o, "    the access was not performed (%s)\n",
            access == MT_CHECK_LOAD || access == MT_CHECK_PREFETCH ? "read from a safe address instead"
                                                                    : "redirected to a sink");
    if (more)
        put(&o, "    ... and %" PRIu64 " more thread%s at this instruction with the same error\n", more,
            more == 1 ? "" : "s");
    return o.len;
}
