/* PTX opcode knowledge (PTX ISA 9.0). The instrumenter checks ld/ldu/st/atom/
 * red/prefetch/prefetchu in the global and generic spaces and ld/st in the
 * local space; instructions that read or write global memory some other way
 * are listed so that they are reported as not checked rather than ignored. */
#include <string.h>

#include "memtrack/check.h"
#include "isa.h"

static const char *const opcodes[] = {
    "abs", "activemask", "add", "addc", "alloca", "and", "applypriority", "atom", "bar", "barrier",
    "bfe", "bfi", "bfind", "bmsk", "bra", "brev", "brkpt", "brx", "call", "clusterlaunchcontrol",
    "clz", "cnot", "copysign", "cos", "cp", "createpolicy", "cvt", "cvta", "discard", "div", "dp2a",
    "dp4a", "elect", "ex2", "exit", "fence", "fma", "fns", "getctarank", "griddepcontrol", "isspacep",
    "istypep", "ld", "ldmatrix", "ldu", "lg2", "lop3", "mad", "mad24", "madc", "mapa", "match", "max",
    "mbarrier", "membar", "min", "mma", "mov", "movmatrix", "mul", "mul24", "multimem", "nanosleep",
    "neg", "not", "or", "pmevent", "popc", "prefetch", "prefetchu", "prmt", "rcp", "red", "redux",
    "rem", "ret", "rsqrt", "sad", "selp", "set", "setmaxnreg", "setp", "shf", "shfl", "shl", "shr",
    "sin", "slct", "sqrt", "st", "stackrestore", "stacksave", "stmatrix", "sub", "subc", "suld", "suq",
    "sured", "sust", "szext", "tanh", "tcgen05", "tensormap", "testp", "tex", "tld4", "trap", "txq",
    "vabsdiff", "vabsdiff2", "vabsdiff4", "vadd", "vadd2", "vadd4", "vavrg2", "vavrg4", "vmad", "vmax",
    "vmax2", "vmax4", "vmin", "vmin2", "vmin4", "vote", "vset", "vset2", "vset4", "vshl", "vshr",
    "vsub", "vsub2", "vsub4", "wgmma", "wmma", "xor", NULL,
};

int mti_ptx_known_opcode(const char *base, size_t len)
{
    for (int i = 0; opcodes[i]; i++)
        if (strlen(opcodes[i]) == len && memcmp(opcodes[i], base, len) == 0)
            return 1;
    return 0;
}

static int mod_is(const char *m, size_t n, const char *w)
{
    return strlen(w) == n && memcmp(m, w, n) == 0;
}

static int type_size(const char *m, size_t n)
{
    static const struct { const char *name; int size; } types[] = {
        {"b8", 1}, {"u8", 1}, {"s8", 1}, {"b16", 2}, {"u16", 2}, {"s16", 2}, {"f16", 2}, {"bf16", 2},
        {"b32", 4}, {"u32", 4}, {"s32", 4}, {"f32", 4}, {"f16x2", 4}, {"bf16x2", 4}, {"tf32", 4},
        {"b64", 8}, {"u64", 8}, {"s64", 8}, {"f64", 8}, {"b128", 16}, {NULL, 0},
    };
    for (int i = 0; types[i].name; i++)
        if (mod_is(m, n, types[i].name))
            return types[i].size;
    return 0;
}

static void skip(ptx_mem *out, const char *why)
{
    out->decision = PTX_MEM_SKIP;
    out->reason = why;
}

void mti_ptx_classify(const char *op, size_t len, ptx_mem *out)
{
    memset(out, 0, sizeof *out);
    const char *end = op + len, *dot = memchr(op, '.', len);
    size_t blen = dot ? (size_t)(dot - op) : len;
    int access = 0;
    if (mod_is(op, blen, "ld") || mod_is(op, blen, "ldu"))
        access = MT_CHECK_LOAD;
    else if (mod_is(op, blen, "st"))
        access = MT_CHECK_STORE;
    else if (mod_is(op, blen, "atom"))
        access = MT_CHECK_ATOMIC;
    else if (mod_is(op, blen, "red"))
        access = MT_CHECK_REDUCE;
    else if (mod_is(op, blen, "prefetch") || mod_is(op, blen, "prefetchu"))
        access = MT_CHECK_PREFETCH;

    /* Scan the modifiers once. */
    int space = MT_CHECK_GENERIC, other_space = 0, vec = 1, size = 0, tensormap = 0, async = 0,
        bulk = 0, global_mod = 0, no_memory = 0;
    for (const char *m = dot; m && m < end;) {
        const char *s = m + 1, *e = memchr(s, '.', (size_t)(end - s));
        if (!e)
            e = end;
        size_t n = (size_t)(e - s);
        if (mod_is(s, n, "global"))
            space = MT_CHECK_GLOBAL, global_mod = 1;
        else if (mod_is(s, n, "local"))
            space = MT_CHECK_LOCAL;
        else if ((n >= 6 && memcmp(s, "shared", 6) == 0) || mod_is(s, n, "const") ||
                 (n >= 5 && memcmp(s, "param", 5) == 0))
            other_space = 1;
        else if (mod_is(s, n, "v2"))
            vec = 2;
        else if (mod_is(s, n, "v4"))
            vec = 4;
        else if (mod_is(s, n, "v8"))
            vec = 8;
        else if (mod_is(s, n, "tensormap"))
            tensormap = 1;
        else if (mod_is(s, n, "async"))
            async = 1;
        else if (mod_is(s, n, "bulk"))
            bulk = 1;
        else if (mod_is(s, n, "commit_group") || mod_is(s, n, "wait_group") || mod_is(s, n, "wait_all") ||
                 mod_is(s, n, "mbarrier"))
            no_memory = 1; /* cp.async's group and barrier bookkeeping: no address */
        else if (type_size(s, n))
            size = type_size(s, n);
        m = e;
    }

    if (!access) {
        if (mod_is(op, blen, "cp") && async && no_memory)
            return;
        if (mod_is(op, blen, "cp") && async && !bulk && global_mod) {
            /* cp.async.{ca,cg}.shared{::cta}.global [dst], [src], size: a read
             * of size bytes at src, which instrument.c finds. */
            out->decision = PTX_MEM_CHECK;
            out->access = MT_CHECK_LOAD;
            out->space = MT_CHECK_GLOBAL;
            out->async_copy = 1;
        } else if (mod_is(op, blen, "cp") && (async || bulk) && (global_mod || !other_space))
            skip(out, "bulk (TMA) copies to or from global memory are not checked");
        else if (mod_is(op, blen, "multimem"))
            skip(out, "multimem accesses are not checked");
        else if (mod_is(op, blen, "wmma") && !other_space && len > 9 &&
                 (memcmp(op, "wmma.load", 9) == 0 || memcmp(op, "wmma.store", 10) == 0))
            skip(out, "wmma.load/store from global memory are not checked");
        else if (mod_is(op, blen, "discard") || mod_is(op, blen, "applypriority"))
            skip(out, "cache-control instructions on global memory are not checked");
        return;
    }
    if (other_space || async || bulk)
        return; /* shared, const, param, or the async/bulk forms (shared::cluster) */
    if (access == MT_CHECK_PREFETCH) {
        if (tensormap) {
            skip(out, "prefetch.tensormap is not checked");
            return;
        }
        if (space == MT_CHECK_LOCAL)
            return; /* explicit .local prefetches never fault (Panoptes) */
        size = 1;
        out->uniform = blen == 9;
    } else {
        if (!size) {
            skip(out, "no operand type");
            return;
        }
        size *= vec;
        if (size > 32 || (size & (size - 1))) {
            skip(out, "access wider than 32 bytes");
            return;
        }
        if (space == MT_CHECK_LOCAL && access != MT_CHECK_LOAD && access != MT_CHECK_STORE)
            return;
    }
    out->decision = PTX_MEM_CHECK;
    out->access = (uint8_t)access;
    out->space = (uint8_t)space;
    out->size = (uint8_t)size;
}
