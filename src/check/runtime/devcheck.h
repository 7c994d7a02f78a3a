/* The device half of checking, shared by libmemtrack_check.so and the GPU
 * tests: the device validity map and its shadow-op kernel, the error buffer,
 * the safe addresses and the local-window probe, all in one context. Not
 * thread-safe: the runtime serialises calls. */
#ifndef MT_CHECK_RT_DEVCHECK_H
#define MT_CHECK_RT_DEVCHECK_H

#include "memtrack/check.h"
#include "driver.h"

typedef struct mt_devcheck {
    const mt_cu *cu;
    CUcontext ctx;
    CUdevice dev;
    int sm;              /* e.g. 90 */
    CUstream own;        /* non-blocking: the runtime's own work */
    mt_vmap *map;        /* a device map */
    CUmodule helper, probe;
    CUfunction op_fn, probe_fn;
    CUdeviceptr errbuf, safe, sink;
    uint32_t errcap;     /* a power of two */
    uint32_t cursor;     /* errors the host has read */
    uint64_t local_top;  /* measured, or MT_LOCAL_TOP_FALLBACK */
    int local_top_measured;
    uint64_t ops, op_groups; /* shadow ops launched, groups they covered */
    char ptx_header[64];     /* ".version X\n.target sm_Y\n" the JIT took */
    const char *fail_step;   /* what init could not do, for the message */
    int fail_cu;             /* and the driver's error */
    char jit_log[1024];
} mt_devcheck;

extern const char _mt_helper_ptx[];
extern const char _mt_probe_ptx[];

/* When the probe cannot run: the end of the 16 MiB local window. Nothing
 * legal lies above it, so no false report; overflows into the last few
 * hundred bytes below it go unnoticed. */
#define MT_LOCAL_TOP_FALLBACK 0x1000000u

/* Creates everything in the current context (which must exist). Returns 0 or
 * a negative error / positive CUresult. */
int _mt_devcheck_init(mt_devcheck *d, uint32_t errcap);

/* Frees what init allocated (the context must still exist). */
void _mt_devcheck_fini(mt_devcheck *d);

/* Registers or unregisters [base, base + size) (mt_vmap_set): updates the
 * structure, uploads it, then applies the op on the device. On `stream` when
 * stream_ordered (the op then runs in that stream's order), else on the own
 * stream, waited for. Returns 0 or an error. */
int _mt_devcheck_set(mt_devcheck *d, uint64_t base, uint64_t size, mt_vmap_state st, CUstream stream,
                     int stream_ordered);

/* Marks [base, base + size) initialised where addressable, in `stream`'s order. */
int _mt_devcheck_mark_valid(mt_devcheck *d, uint64_t base, uint64_t size, CUstream stream);

/* Reads the records written since the last call: at most `max` into out (the
 * newest `max` when more were written; the rest counted in *lost). Returns
 * how many were stored, or a negative error. Waits only for the own stream:
 * callers synchronise the work they want covered first. */
long _mt_devcheck_read_errors(mt_devcheck *d, mt_check_record *out, uint32_t max, uint64_t *lost);

/* Copies `n` bytes of the device map's chunk word for `addr` (tests). */
int _mt_devcheck_shadow_word(mt_devcheck *d, uint64_t addr, uint64_t *word);

#endif
