/* The simulated device's instruction set and its posted writes.
 *
 * A command reads device memory when it executes; its writes wait in the
 * posted arena and reach memory, in order, at the next BARRIER, FENCE or
 * RESET (or earlier when the arena is full: visibility may come early, never
 * late, and never out of order). That is the pipelined device a lazy barrier
 * scheme must be right for: a read of memory written since the last barrier
 * sees the old bytes, so a barrier the stream forgets shows as wrong memory. */
#include <errno.h>
#include <string.h>

#include "sim_internal.h"

void mti_sim_commit(mt_sim *sim)
{
    if (!sim->nposts)
        return;
    for (size_t i = 0; i < sim->nposts; i++) {
        const mt_sim_post *p = &sim->posts[i];
        memcpy(sim->mem + p->off, sim->arena + p->data, p->len);
    }
    mti_sim_discard(sim);
    atomic_fetch_add_explicit(&sim->commits, 1, memory_order_relaxed);
}

/* Returns where `len` bytes for a write to `off` go: the arena, or (for a
 * write larger than the arena) device memory itself, after a commit so that
 * order is kept. */
static unsigned char *post(mt_sim *sim, uint64_t off, size_t len)
{
    if (len > sim->arena_cap) {
        mti_sim_commit(sim);
        return sim->mem + off;
    }
    if (sim->arena_used + len > sim->arena_cap || sim->nposts == sim->cap_posts) {
        mti_sim_commit(sim);
        atomic_fetch_add_explicit(&sim->overflows, 1, memory_order_relaxed);
    }
    sim->posts[sim->nposts++] = (mt_sim_post){off, len, sim->arena_used};
    unsigned char *dst = sim->arena + sim->arena_used;
    sim->arena_used += len;
    return dst;
}

static int exec_fill(mt_sim *sim)
{
    uint64_t len = sim->regs[MT_SIM_REG_LEN], v = sim->regs[MT_SIM_REG_VALUE];
    int64_t off = mti_sim_offset(sim, sim->regs[MT_SIM_REG_DST], len);
    if (off < 0)
        return -EFAULT;
    unsigned char *dst = post(sim, (uint64_t)off, len);
    for (uint64_t i = 0; i < len; i++)
        dst[i] = (unsigned char)(v >> (8 * (i % 8)));
    return 0;
}

static int exec_copy(mt_sim *sim)
{
    uint64_t len = sim->regs[MT_SIM_REG_LEN];
    int64_t src = mti_sim_offset(sim, sim->regs[MT_SIM_REG_SRC], len);
    int64_t dst = mti_sim_offset(sim, sim->regs[MT_SIM_REG_DST], len);
    if (src < 0 || dst < 0)
        return -EFAULT;
    /* The source is read now, from memory as it is (posted writes excluded):
     * memmove, since a write too big to post lands in place. */
    memmove(post(sim, (uint64_t)dst, len), sim->mem + src, len);
    return 0;
}

static int exec_store(mt_sim *sim, const mt_cmd *c)
{
    int64_t off = mti_sim_offset(sim, c->b, 8);
    if (off < 0)
        return -EFAULT;
    unsigned char *dst = post(sim, (uint64_t)off, 8);
    for (int i = 0; i < 8; i++)
        dst[i] = (unsigned char)(c->a >> (8 * i));
    return 0;
}

int mti_sim_exec(mt_sim *sim, mt_stream *s, const mt_cmd *c)
{
    switch (c->op) {
    case MT_CMD_NOP:
        return 0;
    case MT_CMD_STATE:
        if (c->arg >= MT_SIM_NREGS)
            return -EINVAL;
        sim->regs[c->arg] = c->a;
        return 0;
    case MT_CMD_FENCE:
        /* Everything before the fence is visible before it is signalled; the
         * signal's release publishes these memory writes to the waiter. */
        mti_sim_commit(sim);
        atomic_fetch_add_explicit(&sim->fences, 1, memory_order_relaxed);
        mt_timeline_signal_raw(mt_stream_timeline(s), c->a);
        return 0;
    case MT_CMD_BARRIER:
        mti_sim_commit(sim);
        atomic_fetch_add_explicit(&sim->barriers, 1, memory_order_relaxed);
        return 0;
    case MT_CMD_RESET:
        mti_sim_commit(sim);
        memset(sim->regs, 0, sizeof sim->regs);
        return 0;
    case MT_SIM_FILL:
        return exec_fill(sim);
    case MT_SIM_COPY:
        return exec_copy(sim);
    case MT_SIM_STORE:
        return exec_store(sim, c);
    default:
        return -EINVAL;
    }
}
