/* The check sequence placed before one memory instruction, after Panoptes:
 *
 *   1. alignment (the access size; prefetches: 8 bytes in the generic space,
 *      where a misaligned prefetchu to global memory is tolerated);
 *   2. local window: a .local address (explicit, or generic that isspacep
 *      says is local) must end at or below the top of the local window;
 *   3. global addresses (explicit, or generic that isspacep says is global and
 *      not const) against the validity map: A bits of every byte; a prefetch
 *      passes when its byte or the address rounded down to 1 KiB (the slack
 *      where the hardware never faults) is addressable;
 *   4. loads, atomics and reductions: V bits of every byte.
 *
 * The first failing stage sets the kind (1..4). On failure the thread writes
 * a record to the error buffer and, unless only the V bits failed (reading
 * uninitialised memory never faults), swaps the address for a safe one: a
 * read-only global for loads and prefetches, a sink for stores and atomics, a
 * local scratch for explicit .local accesses. Stores, atomics and reductions
 * that pass set the V bits they wrote (one red.or, only when a bit is still
 * clear). Everything lives in a { } block with its own registers, so the
 * function's declarations are untouched, and the instruction itself ends the
 * block, guard and all, with only its address operand replaced.
 *
 * The map walk is the C function mt_vmap_shadow_word, in PTX. */
#include <inttypes.h>

#include "emit.h"

#define P(...) mti_ptx_sb_printf(b, __VA_ARGS__)

static const char *access_name(unsigned a)
{
    switch (a) {
    case MT_CHECK_LOAD: return "load";
    case MT_CHECK_STORE: return "store";
    case MT_CHECK_ATOMIC: return "atomic";
    case MT_CHECK_REDUCE: return "reduction";
    case MT_CHECK_PREFETCH: return "prefetch";
    }
    return "?";
}

static const char *space_name(unsigned s)
{
    return s == MT_CHECK_GLOBAL ? "global" : s == MT_CHECK_LOCAL ? "local" : "generic";
}

static void emit_address(ptx_sb *b, const ptx_check *c)
{
    switch (c->addr_kind) {
    case PTX_ADDR_REG64: P("\tadd.s64 %%_mt_a, %s, %s;\n", c->addr_base, c->addr_off); break;
    case PTX_ADDR_REG32:
        P("\tcvt.u64.u32 %%_mt_a, %s;\n\tadd.s64 %%_mt_a, %%_mt_a, %s;\n", c->addr_base, c->addr_off);
        break;
    case PTX_ADDR_VAR:
        P("\tmov.u64 %%_mt_a, %s;\n\tadd.s64 %%_mt_a, %%_mt_a, %s;\n", c->addr_base, c->addr_off);
        break;
    case PTX_ADDR_IMM: P("\tmov.u64 %%_mt_a, %s;\n", c->addr_off); break;
    }
}

/* %_mt_c (the address to look up) -> %_mt_w (its shadow word's address) and
 * %_mt_x/%_mt_v (the word's A and V halves), %_mt_o (bit of the first byte). */
static void emit_walk(ptx_sb *b, uint64_t root)
{
    P("\tshr.u64 %%_mt_t, %%_mt_c, 45;\n\tand.b64 %%_mt_t, %%_mt_t, 524280;\n");
    P("\tmov.u64 %%_mt_n, 0x%" PRIx64 ";\n\tadd.s64 %%_mt_t, %%_mt_t, %%_mt_n;\n", root);
    P("\tld.global.nc.u64 %%_mt_n, [%%_mt_t];\n");
    P("\tshr.u64 %%_mt_t, %%_mt_c, 29;\n\tand.b64 %%_mt_t, %%_mt_t, 524280;\n");
    P("\tadd.s64 %%_mt_t, %%_mt_t, %%_mt_n;\n\tld.global.nc.u64 %%_mt_n, [%%_mt_t];\n");
    P("\tshr.u64 %%_mt_t, %%_mt_c, 13;\n\tand.b64 %%_mt_t, %%_mt_t, 524280;\n");
    P("\tadd.s64 %%_mt_t, %%_mt_t, %%_mt_n;\n\tld.global.nc.u64 %%_mt_n, [%%_mt_t];\n");
    /* The shadow word is read coherently (.cg): another block of the same
     * kernel may have set V bits a moment ago. */
    P("\tshr.u64 %%_mt_t, %%_mt_c, 2;\n\tand.b64 %%_mt_t, %%_mt_t, 16376;\n");
    P("\tadd.s64 %%_mt_w, %%_mt_t, %%_mt_n;\n\tld.global.cg.u64 %%_mt_t, [%%_mt_w];\n");
    P("\tmov.b64 {%%_mt_x, %%_mt_v}, %%_mt_t;\n");
    P("\tcvt.u32.u64 %%_mt_o, %%_mt_c;\n\tand.b32 %%_mt_o, %%_mt_o, 31;\n");
}

/* Sets predicate `pred` when the `half` bits of the access are not all set. */
static void emit_bits_pred(ptx_sb *b, const char *half, uint32_t mask, int generic, const char *pred)
{
    P("\tshr.b32 %%_mt_y, %s, %%_mt_o;\n\tand.b32 %%_mt_y, %%_mt_y, %" PRIu32 ";\n", half, mask);
    if (generic)
        P("\tsetp.ne.and.u32 %s, %%_mt_y, %" PRIu32 ", %%_mt_g;\n", pred, mask);
    else
        P("\tsetp.ne.u32 %s, %%_mt_y, %" PRIu32 ";\n", pred, mask);
}

/* Sets kind `k` when the `half` bits of the access are not all set. */
static void emit_bits_test(ptx_sb *b, const char *half, uint32_t mask, int generic, unsigned k)
{
    emit_bits_pred(b, half, mask, generic, "%_mt_p");
    P("\t@%%_mt_p mov.u32 %%_mt_k, %u;\n", k);
}

static uint32_t ring_capacity(const mt_ptx_opts *o)
{
    uint32_t cap = o->err_cap ? o->err_cap : MT_PTX_DEFAULT_ERR_CAP;
    while (cap & (cap - 1))
        cap &= cap - 1; /* a power of two: the slot is count & (cap - 1) */
    return cap;
}

static void emit_record(ptx_sb *b, const ptx_check *c, const mt_ptx_opts *o)
{
    P("\tmov.u64 %%_mt_t, 0x%" PRIx64 ";\n\tatom.global.add.u32 %%_mt_x, [%%_mt_t], 1;\n", o->err_buf);
    P("\tand.b32 %%_mt_x, %%_mt_x, %" PRIu32 ";\n", ring_capacity(o) - 1);
    P("\tmul.wide.u32 %%_mt_n, %%_mt_x, %u;\n\tadd.s64 %%_mt_n, %%_mt_n, %%_mt_t;\n", MT_CHECK_RECORD_BYTES);
    P("\tst.global.u64 [%%_mt_n+64], %%_mt_a;\n");
    P("\tmov.u32 %%_mt_r0, %" PRIu32 ";\n\tst.global.v2.u32 [%%_mt_n+72], {%%_mt_r0, %%_mt_k};\n", c->id);
    P("\tmov.u32 %%_mt_r0, %%ctaid.x;\n\tmov.u32 %%_mt_r1, %%ctaid.y;\n\tmov.u32 %%_mt_r2, %%ctaid.z;\n");
    P("\tmov.u32 %%_mt_r3, %%tid.x;\n\tst.global.v4.u32 [%%_mt_n+80], {%%_mt_r0, %%_mt_r1, %%_mt_r2, %%_mt_r3};\n");
    P("\tmov.u32 %%_mt_r0, %%tid.y;\n\tmov.u32 %%_mt_r1, %%tid.z;\n");
    P("\tst.global.v2.u32 [%%_mt_n+96], {%%_mt_r0, %%_mt_r1};\n");
}

void mti_ptx_emit_check(ptx_sb *b, const ptx_check *c, const mt_ptx_opts *o)
{
    const int generic = c->space == MT_CHECK_GENERIC, local = c->space == MT_CHECK_LOCAL;
    const int pf = c->access == MT_CHECK_PREFETCH;
    const int init = !(o->flags & MT_PTX_NO_INIT_CHECK);
    const int reads = c->access == MT_CHECK_LOAD || c->access == MT_CHECK_ATOMIC || c->access == MT_CHECK_REDUCE;
    const int writes = c->access == MT_CHECK_STORE || c->access == MT_CHECK_ATOMIC || c->access == MT_CHECK_REDUCE;
    const uint32_t mask = c->size >= 32 ? 0xffffffffu : (1u << c->size) - 1;
    const unsigned align = pf ? (generic ? 8u : 1u) : c->size;
    const uint64_t top = o->local_top ? o->local_top : MT_PTX_DEFAULT_LOCAL_TOP;
    const uint32_t id = c->id;

    P("\t{ // memtrack check %" PRIu32 ": %s of %u byte%s, %s space\n", id, access_name(c->access), c->size,
      c->size == 1 ? "" : "s", space_name(c->space));
    P("\t.reg .b64 %%_mt_a, %%_mt_c, %%_mt_t, %%_mt_n, %%_mt_w;\n");
    P("\t.reg .b32 %%_mt_k, %%_mt_o, %%_mt_x, %%_mt_y, %%_mt_v, %%_mt_r<4>;\n");
    P("\t.reg .pred %%_mt_p, %%_mt_q, %%_mt_g, %%_mt_l, %%_mt_h;\n");
    emit_address(b, c);
    P("\tmov.u32 %%_mt_k, 0;\n");

    if (local) {
        /* 2. explicit .local: the window's top */
        P("\tadd.s64 %%_mt_t, %%_mt_a, %u;\n\tsetp.gt.u64 %%_mt_l, %%_mt_t, %" PRIu64 ";\n", c->size, top);
        P("\t@%%_mt_l mov.u32 %%_mt_k, 2;\n");
    } else {
        if (generic) {
            P("\tisspacep.global %%_mt_g, %%_mt_a;\n\tisspacep.const %%_mt_h, %%_mt_a;\n");
            P("\tnot.pred %%_mt_h, %%_mt_h;\n\tand.pred %%_mt_g, %%_mt_g, %%_mt_h;\n");
        }
        P("\tmov.b64 %%_mt_c, %%_mt_a;\n");
        emit_walk(b, o->map_root);
        if (reads && init) /* 4. validity */
            emit_bits_test(b, "%_mt_v", mask, generic, MT_CHECK_UNINIT);
        if (pf) {
            /* 3. a prefetch fails only when neither its byte nor the start
             * of its 1 KiB block is addressable: the block's start alone
             * lies in the red zone before an allocation for the first 512
             * bytes of it (CUB's transform kernels prefetch exactly there). */
            emit_bits_pred(b, "%_mt_x", mask, generic, "%_mt_q");
            P("\tand.b64 %%_mt_c, %%_mt_a, -1024;\n");
            emit_walk(b, o->map_root);
            emit_bits_pred(b, "%_mt_x", mask, generic, "%_mt_p");
            P("\tand.pred %%_mt_p, %%_mt_p, %%_mt_q;\n\t@%%_mt_p mov.u32 %%_mt_k, %u;\n", MT_CHECK_NOACCESS);
        } else {
            emit_bits_test(b, "%_mt_x", mask, generic, MT_CHECK_NOACCESS); /* 3. addressability */
        }
        if (generic) { /* 2. generic address in the local window */
            P("\tisspacep.local %%_mt_l, %%_mt_a;\n\tcvta.to.local.u64 %%_mt_t, %%_mt_a;\n");
            P("\tadd.s64 %%_mt_t, %%_mt_t, %u;\n", c->size);
            P("\tsetp.gt.and.u64 %%_mt_l, %%_mt_t, %" PRIu64 ", %%_mt_l;\n", top);
            P("\t@%%_mt_l mov.u32 %%_mt_k, 2;\n");
        }
    }
    if (align > 1) { /* 1. alignment */
        P("\tand.b64 %%_mt_t, %%_mt_a, %u;\n", align - 1);
        if (pf && c->uniform && generic)
            P("\tisspacep.global %%_mt_h, %%_mt_a;\n\tsetp.ne.and.u64 %%_mt_q, %%_mt_t, 0, !%%_mt_h;\n");
        else
            P("\tsetp.ne.u64 %%_mt_q, %%_mt_t, 0;\n");
        P("\t@%%_mt_q mov.u32 %%_mt_k, 1;\n");
    }

    if (c->guard) /* a guarded instruction that will not run needs no check */
        P("\t@%s%s bra $__mt_ok_%" PRIu32 ";\n", c->guard_neg ? "" : "!", c->guard, id);
    P("\tsetp.ne.u32 %%_mt_p, %%_mt_k, 0;\n\t@%%_mt_p bra $__mt_bad_%" PRIu32 ";\n", id);
    if (writes && init && !local) {
        P("\tmov.u32 %%_mt_x, %" PRIu32 ";\n\tshl.b32 %%_mt_x, %%_mt_x, %%_mt_o;\n", mask);
        P("\tand.b32 %%_mt_y, %%_mt_v, %%_mt_x;\n");
        if (generic)
            P("\tsetp.ne.and.u32 %%_mt_q, %%_mt_y, %%_mt_x, %%_mt_g;\n");
        else
            P("\tsetp.ne.u32 %%_mt_q, %%_mt_y, %%_mt_x;\n");
        P("\t@%%_mt_q red.global.or.b32 [%%_mt_w+4], %%_mt_x;\n");
    }
    P("\tbra $__mt_ok_%" PRIu32 ";\n$__mt_bad_%" PRIu32 ":\n", id, id);
    emit_record(b, c, o);
    if (local) {
        P("\tmov.u64 %%_mt_a, %s;\n", c->local_safe);
    } else {
        uint64_t safe = (c->access == MT_CHECK_LOAD || pf) ? o->safe_load : o->safe_store;
        P("\tsetp.ne.u32 %%_mt_q, %%_mt_k, %u;\n", MT_CHECK_UNINIT);
        P("\t@%%_mt_q mov.u64 %%_mt_a, 0x%" PRIx64 ";\n", safe);
    }
    P("$__mt_ok_%" PRIu32 ":\n\t%s\n\t}", id, c->insn); /* the statement's own line end follows */
}
