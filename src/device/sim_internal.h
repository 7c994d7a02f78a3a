/* Simulated device internals shared by sim.c (thread, attach, faults),
 * sim_exec.c (executing commands, posted writes) and sim_mem.c (the device
 * address range's allocator).
 *
 * The device-thread state (regs, posted writes) is touched only by the
 * device thread while attached, and only by control calls while detached;
 * pthread_create/join order the two. */
#ifndef MT_DEVICE_SIM_INTERNAL_H
#define MT_DEVICE_SIM_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "memtrack/device_sim.h"

/* Allocator of the device address range: offsets into [0, size). All the
 * sim knows of it is these three calls (sim_mem.c). */
typedef struct mt_sim_heap mt_sim_heap;
int mti_sim_heap_create(size_t size, mt_sim_heap **out);
void mti_sim_heap_destroy(mt_sim_heap *h);
int mti_sim_heap_alloc(mt_sim_heap *h, size_t size, size_t align, uint64_t *off);
int mti_sim_heap_free(mt_sim_heap *h, uint64_t off);

typedef struct mt_sim_post {
    uint64_t off;  /* destination offset in device memory */
    size_t len;
    size_t data;   /* where its bytes wait in the posted arena */
} mt_sim_post;

struct mt_sim {
    unsigned char *mem; /* host memory backing the device range */
    size_t size;
    uint64_t base;
    mt_sim_heap *heap;
    mt_sim_faults faults;

    /* Device-thread state. */
    uint64_t regs[MT_SIM_NREGS];
    mt_sim_post *posts;
    size_t nposts, cap_posts;
    unsigned char *arena;
    size_t arena_used, arena_cap;

    /* Counters: written by the device thread, read by stats. */
    _Atomic uint64_t executed, fences, barriers, commits, overflows;

    /* Control. */
    pthread_mutex_t lock; /* attach/detach/lose/stall */
    pthread_cond_t cond;  /* a stalled device waits here */
    pthread_t thread;
    int attached;
    mt_stream *s;
    _Atomic int stop;
    _Atomic int lost;
    int unstalled; /* under lock */
};

/* Executes one command (device thread). Returns 0, or a negative code for a
 * device fault (the caller loses the device). */
int mti_sim_exec(mt_sim *sim, mt_stream *s, const mt_cmd *c);

/* Makes every posted write visible, in order. */
void mti_sim_commit(mt_sim *sim);

/* Drops the posted writes (loss, reset). */
static inline void mti_sim_discard(mt_sim *sim)
{
    sim->nposts = 0;
    sim->arena_used = 0;
}

/* Offset of [addr, addr+len) in device memory, or -1 when outside it. */
static inline int64_t mti_sim_offset(const mt_sim *sim, uint64_t addr, uint64_t len)
{
    if (addr < sim->base)
        return -1;
    uint64_t off = addr - sim->base;
    if (off > sim->size || len > sim->size - off)
        return -1;
    return (int64_t)off;
}

#endif
