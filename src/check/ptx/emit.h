/* Emits the check sequence for one memory instruction (see emit.c). */
#ifndef MT_CHECK_PTX_EMIT_H
#define MT_CHECK_PTX_EMIT_H

#include <stdint.h>

#include "memtrack/check.h"
#include "sb.h"

typedef enum ptx_addr_kind {
    PTX_ADDR_REG64, /* [%rd1+off] */
    PTX_ADDR_REG32, /* [%r1+off]: widened first */
    PTX_ADDR_VAR,   /* [name+off]: the variable's address in the instruction's space */
    PTX_ADDR_IMM,   /* [imm] */
} ptx_addr_kind;

typedef struct ptx_check {
    uint32_t id;
    uint8_t access, space, size, uniform;
    const char *guard; /* predicate register, or NULL when unguarded */
    int guard_neg;     /* @!%p */
    ptx_addr_kind addr_kind;
    const char *addr_base; /* register or variable (NUL-terminated) */
    const char *addr_off;  /* signed immediate text, "0" when none */
    const char *insn;      /* the instruction with its address operand replaced, ending in ';' */
    const char *local_safe; /* explicit .local: the function's scratch variable */
} ptx_check;

/* Appends "{ <checks> <insn> }" to b. */
void mti_ptx_emit_check(ptx_sb *b, const ptx_check *c, const mt_ptx_opts *o);

/* Names the instrumenter introduces (registers live inside each block). */
#define PTX_ADDR_REG "%_mt_a"
#define PTX_LOCAL_SAFE "__mt_local_safe"

#endif
