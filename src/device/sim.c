/* The simulated device: creation, its thread (consume, inject faults,
 * execute), attach/detach, loss, stall, and host access to its memory. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../common/clock.h"
#include "sim_internal.h"

int mt_sim_create(const mt_sim_opts *opts, mt_sim **out)
{
    mt_sim_opts o = {0};
    if (opts)
        o = *opts;
    if (!out)
        return -EINVAL;
    size_t size = o.mem_size ? o.mem_size : 16u << 20;
    uint64_t base = o.base ? o.base : MT_SIM_DEFAULT_BASE;
    size_t arena = o.posted_bytes ? o.posted_bytes : 64u << 10;
    if (base + size < base)
        return -EINVAL; /* the range would wrap the device address space */
    mt_sim *sim = calloc(1, sizeof *sim);
    if (!sim)
        return -ENOMEM;
    sim->size = size;
    sim->base = base;
    sim->faults = o.faults;
    sim->arena_cap = arena;
    /* Posts are at least a byte each; a quarter of the arena in entries is
     * plenty for the 8-byte stores that are the smallest real writes. */
    sim->cap_posts = arena / 4 + 1;
    sim->mem = calloc(1, size);
    sim->arena = malloc(arena);
    sim->posts = malloc(sim->cap_posts * sizeof *sim->posts);
    int rc = (sim->mem && sim->arena && sim->posts) ? 0 : -ENOMEM;
    if (!rc)
        rc = mti_sim_heap_create(size, &sim->heap);
    if (!rc)
        rc = mti_cond_init_monotonic(&sim->cond);
    if (rc) {
        mti_sim_heap_destroy(sim->heap);
        free(sim->posts);
        free(sim->arena);
        free(sim->mem);
        free(sim);
        return rc;
    }
    pthread_mutex_init(&sim->lock, NULL);
    *out = sim;
    return 0;
}

void mt_sim_destroy(mt_sim *sim)
{
    if (!sim)
        return;
    mt_sim_detach(sim);
    pthread_cond_destroy(&sim->cond);
    pthread_mutex_destroy(&sim->lock);
    mti_sim_heap_destroy(sim->heap);
    free(sim->posts);
    free(sim->arena);
    free(sim->mem);
    free(sim);
}

/* Marks the device lost and releases everyone waiting on it. The first code
 * wins; the stream (when given) learns it too. */
static void lose(mt_sim *sim, mt_stream *s)
{
    int expected = 0;
    atomic_compare_exchange_strong_explicit(&sim->lost, &expected, MT_EDEVLOST,
                                            memory_order_acq_rel, memory_order_acquire);
    pthread_mutex_lock(&sim->lock);
    pthread_cond_broadcast(&sim->cond); /* a stalled device thread */
    pthread_mutex_unlock(&sim->lock);
    if (s)
        mt_stream_lose(s, MT_EDEVLOST);
}

/* A stalled device sleeps until unstalled, lost or detached. Returns 1 when
 * it must stop instead of going on. */
static int stall(mt_sim *sim)
{
    pthread_mutex_lock(&sim->lock);
    while (!sim->unstalled && !atomic_load_explicit(&sim->stop, memory_order_relaxed) &&
           !atomic_load_explicit(&sim->lost, memory_order_relaxed))
        pthread_cond_wait(&sim->cond, &sim->lock);
    pthread_mutex_unlock(&sim->lock);
    return atomic_load_explicit(&sim->stop, memory_order_relaxed) ||
           atomic_load_explicit(&sim->lost, memory_order_relaxed);
}

/* The first command number after `n` at which the fault plan does
 * something, so that the loop pays one compare per command, not four. */
static uint64_t next_fault(const mt_sim_faults *f, uint64_t n)
{
    uint64_t e = UINT64_MAX;
    if (f->lose_at > n)
        e = f->lose_at;
    if (f->stall_at > n && f->stall_at < e)
        e = f->stall_at;
    if (f->delay_every) {
        uint64_t d = (n / f->delay_every + 1) * f->delay_every;
        if (d < e)
            e = d;
    }
    return e;
}

/* Loses the device after `done` commands. The count is published first:
 * a thread released by the loss reads it exact (the loss's release orders it). */
static void die(mt_sim *sim, mt_stream *s, uint64_t done)
{
    atomic_store_explicit(&sim->executed, done, memory_order_relaxed);
    lose(sim, s);
}

/* Applies the fault plan before command `n`. Returns 1 to stop. */
static int inject(mt_sim *sim, mt_stream *s, uint64_t n)
{
    const mt_sim_faults *f = &sim->faults;
    if (f->lose_at == n) {
        die(sim, s, n - 1);
        return 1;
    }
    if (f->stall_at == n && stall(sim))
        return 1;
    if (f->delay_every && n % f->delay_every == 0) {
        mti_sleep_ns(f->delay_ns);
    }
    return 0;
}

/* Executes up to `n` commands. Returns how many ran; fewer means stop. */
static long run_batch(mt_sim *sim, mt_stream *s, const mt_cmd *cmds, long n, uint64_t *done,
                      uint64_t *next)
{
    for (long i = 0; i < n; i++) {
        uint64_t k = *done + 1;
        if (k == *next) {
            if (inject(sim, s, k))
                return i;
            *next = next_fault(&sim->faults, k);
        }
        if (cmds[i].op != MT_CMD_NOP && mti_sim_exec(sim, s, &cmds[i]) != 0) {
            die(sim, s, *done); /* a device fault */
            return i;
        }
        *done = k;
    }
    return n;
}

static void *device_main(void *arg)
{
    mt_sim *sim = arg;
    mt_stream *s = sim->s;
    uint64_t done = 0, next = next_fault(&sim->faults, 0);
    while (!atomic_load_explicit(&sim->stop, memory_order_acquire) &&
           !atomic_load_explicit(&sim->lost, memory_order_relaxed)) {
        const mt_cmd *cmds;
        long n = mt_stream_consume(s, &cmds);
        if (n < 0)
            break; /* lost */
        long ran = run_batch(sim, s, cmds, n, &done, &next);
        /* Report what ran even when stopping, so a later attach of the same
         * stream resumes after it. */
        mt_stream_consumed(s, (size_t)ran);
        atomic_store_explicit(&sim->executed, done, memory_order_relaxed);
        if (ran < n)
            break;
    }
    if (atomic_load_explicit(&sim->lost, memory_order_relaxed))
        mti_sim_discard(sim); /* a dead device's pending writes never land */
    else
        mti_sim_commit(sim);
    return NULL;
}

int mt_sim_attach(mt_sim *sim, mt_stream *s)
{
    if (!sim || !s)
        return -EINVAL;
    pthread_mutex_lock(&sim->lock);
    int rc = 0;
    if (sim->attached)
        rc = -EBUSY;
    else if (atomic_load_explicit(&sim->lost, memory_order_relaxed))
        rc = MT_EDEVLOST;
    if (!rc) {
        sim->s = s;
        sim->unstalled = 0;
        atomic_store_explicit(&sim->stop, 0, memory_order_relaxed);
        atomic_store_explicit(&sim->executed, 0, memory_order_relaxed);
        /* pthread_create orders everything above before the thread's start. */
        rc = -pthread_create(&sim->thread, NULL, device_main, sim);
        sim->attached = rc == 0;
    }
    pthread_mutex_unlock(&sim->lock);
    return rc;
}

void mt_sim_detach(mt_sim *sim)
{
    pthread_mutex_lock(&sim->lock);
    if (!sim->attached) {
        pthread_mutex_unlock(&sim->lock);
        return;
    }
    /* release: pairs with the thread's acquire load of `stop`. */
    atomic_store_explicit(&sim->stop, 1, memory_order_release);
    pthread_cond_broadcast(&sim->cond);
    mt_stream *s = sim->s;
    pthread_mutex_unlock(&sim->lock);
    mt_stream_wake_consumer(s);
    pthread_join(sim->thread, NULL);
    pthread_mutex_lock(&sim->lock);
    sim->attached = 0;
    sim->s = NULL;
    pthread_mutex_unlock(&sim->lock);
}

int mt_sim_reset(mt_sim *sim)
{
    pthread_mutex_lock(&sim->lock);
    int rc = sim->attached ? -EBUSY : 0;
    if (!rc) {
        atomic_store_explicit(&sim->lost, 0, memory_order_relaxed);
        memset(sim->regs, 0, sizeof sim->regs);
        mti_sim_discard(sim);
    }
    pthread_mutex_unlock(&sim->lock);
    return rc;
}

int mt_sim_set_faults(mt_sim *sim, const mt_sim_faults *faults)
{
    pthread_mutex_lock(&sim->lock);
    int rc = sim->attached ? -EBUSY : 0;
    if (!rc)
        sim->faults = faults ? *faults : (mt_sim_faults){0};
    pthread_mutex_unlock(&sim->lock);
    return rc;
}

void mt_sim_lose(mt_sim *sim)
{
    /* Under the lock so the stream cannot be detached and freed meanwhile. */
    pthread_mutex_lock(&sim->lock);
    mt_stream *s = sim->attached ? sim->s : NULL;
    int expected = 0;
    atomic_compare_exchange_strong_explicit(&sim->lost, &expected, MT_EDEVLOST,
                                            memory_order_acq_rel, memory_order_acquire);
    pthread_cond_broadcast(&sim->cond);
    if (s)
        mt_stream_lose(s, MT_EDEVLOST);
    pthread_mutex_unlock(&sim->lock);
}

void mt_sim_unstall(mt_sim *sim)
{
    pthread_mutex_lock(&sim->lock);
    sim->unstalled = 1;
    pthread_cond_broadcast(&sim->cond);
    pthread_mutex_unlock(&sim->lock);
}

void mt_sim_stats_get(mt_sim *sim, mt_sim_stats *out)
{
    out->executed = atomic_load_explicit(&sim->executed, memory_order_relaxed);
    out->fences = atomic_load_explicit(&sim->fences, memory_order_relaxed);
    out->barriers = atomic_load_explicit(&sim->barriers, memory_order_relaxed);
    out->commits = atomic_load_explicit(&sim->commits, memory_order_relaxed);
    out->overflows = atomic_load_explicit(&sim->overflows, memory_order_relaxed);
    out->lost = atomic_load_explicit(&sim->lost, memory_order_acquire);
}

uint64_t mt_sim_base(const mt_sim *sim) { return sim->base; }
size_t mt_sim_size(const mt_sim *sim) { return sim->size; }

int mt_sim_alloc(mt_sim *sim, size_t size, size_t align, uint64_t *addr)
{
    uint64_t off;
    int rc = mti_sim_heap_alloc(sim->heap, size, align ? align : 64, &off);
    if (rc)
        return rc;
    *addr = sim->base + off;
    return 0;
}

int mt_sim_free(mt_sim *sim, uint64_t addr)
{
    if (mti_sim_offset(sim, addr, 0) < 0)
        return -EINVAL;
    return mti_sim_heap_free(sim->heap, addr - sim->base);
}

int mt_sim_read(mt_sim *sim, uint64_t addr, void *dst, size_t len)
{
    int64_t off = mti_sim_offset(sim, addr, len);
    if (off < 0)
        return -EFAULT;
    memcpy(dst, sim->mem + off, len);
    return 0;
}

int mt_sim_write(mt_sim *sim, uint64_t addr, const void *src, size_t len)
{
    int64_t off = mti_sim_offset(sim, addr, len);
    if (off < 0)
        return -EFAULT;
    memcpy(sim->mem + off, src, len);
    return 0;
}
