/* What the instrumenter knows of PTX instructions: which opcodes exist, and
 * for memory instructions which space, how many bytes and what kind of
 * access. */
#ifndef MT_CHECK_PTX_ISA_H
#define MT_CHECK_PTX_ISA_H

#include <stddef.h>
#include <stdint.h>

typedef enum ptx_mem_decision {
    PTX_MEM_NONE = 0, /* not a memory access this tool checks (or no memory at all) */
    PTX_MEM_CHECK,    /* instrument it: access/space/size are set */
    PTX_MEM_SKIP,     /* touches global memory but cannot be checked: reason is set */
} ptx_mem_decision;

typedef struct ptx_mem {
    ptx_mem_decision decision;
    uint8_t access;  /* mt_check_access */
    uint8_t space;   /* mt_check_space */
    uint8_t size;    /* bytes; prefetch: 1 */
    uint8_t uniform; /* prefetchu */
    /* cp.async from global memory: the source is the second address operand
     * and the size the third operand (instrument.c reads both). */
    uint8_t async_copy;
    const char *reason;
} ptx_mem;

/* Classifies an opcode with its modifiers, e.g. "ld.global.nc.v4.f32"
 * (len bytes, no guard, no operands). */
void mti_ptx_classify(const char *op, size_t len, ptx_mem *out);

/* Is the base opcode (before the first '.') an instruction of the PTX ISA? */
int mti_ptx_known_opcode(const char *base, size_t len);

#endif
