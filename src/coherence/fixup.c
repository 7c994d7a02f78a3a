/* Failures and device loss, applied by the planner.
 *
 * The planner marks ranges valid when it plans the commands that will make
 * them so. When such a command fails (its device was lost, its source was, a
 * command before it failed, its function returned an error) the completing
 * thread queues it (sched.c) and the next planner call clears the location's bit
 * over the ranges the command was to write. That is always right, because
 * every later write into the same instance depends on this one (writes into
 * an instance are ordered) and so fails too, clearing its own ranges: no
 * later success can be undone. A range left with no valid location is lost
 * (MT_ELOSTDATA for readers until something overwrites it).
 *
 * A lost device loses every instance on it: its bit is cleared everywhere
 * and its memory is released (the device will never touch it again). */
#include <errno.h>
#include <stdlib.h>

#include "internal.h"

static void clear(coh_root *r, uint32_t loc, uint64_t a, uint64_t b)
{
    if (mti_coh_runs_reserve(&r->runs, 2) == 0)
        mti_coh_runs_update(&r->runs, a, b, ~COH_BIT(loc), 0);
    else /* no room to split: drop the bit over the whole buffer (safe: refetch) */
        mti_coh_runs_update(&r->runs, 0, r->size, ~COH_BIT(loc), 0);
}

static void apply_fix(coh_cmd *cmd)
{
    /* A migration's fixup is implicit: the destinations of its segments
     * in its root's instance at to_loc. */
    coh_fix mig = {.root = cmd->nroots ? cmd->roots[0] : NULL, .uid = cmd->fix_uid,
                   .loc = cmd->to_loc, .use_segs = 1};
    int is_mig = cmd->kind == COH_KIND_MIGRATION && mig.root;
    for (uint32_t i = 0; i < (is_mig ? 1 : cmd->nfix); i++) {
        const coh_fix *f = is_mig ? &mig : &cmd->fix[i];
        coh_root *r = f->root;
        coh_inst *in = r->dead ? NULL : r->inst[f->loc];
        if (!in || in->uid != f->uid)
            continue; /* released or replaced since: its bits are not this instance's */
        if (!f->use_segs) {
            clear(r, f->loc, f->a, f->b);
            continue;
        }
        for (uint32_t s = 0; s < cmd->nsegs; s++)
            clear(r, f->loc, cmd->segs[s].dst, cmd->segs[s].dst + cmd->segs[s].len);
    }
}

static void handle_loss(mt_coh *c, coh_device *d)
{
    if (d->loss_handled)
        return;
    d->loss_handled = 1;
    coh_loc *l = mti_coh_loc_of(c, d->id);
    /* Deferred releases of this location run now, with the loss code. */
    mt_timeline_lose(l->tl, MT_EDEVLOST);
    for (uint32_t i = 0; i < c->nroots; i++) {
        coh_inst *in = c->roots[i]->inst[d->id];
        if (in)
            mti_coh_inst_drop(c, in);
    }
    mt_timeline_poll(l->tl);
}

void mti_coh_fixups_run(mt_coh *c)
{
    if (!atomic_load_explicit(&c->fix_pending, memory_order_acquire))
        return;
    atomic_store_explicit(&c->fix_pending, 0, memory_order_relaxed);
    uint64_t lost = atomic_exchange_explicit(&c->lost_pending, 0, memory_order_acquire);
    for (uint32_t i = 1; i <= c->ndev; i++)
        if (lost & COH_BIT(i))
            handle_loss(c, c->dev[i]);
    pthread_mutex_lock(&c->fix_lock);
    coh_cmd *list = c->fix_head;
    c->fix_head = NULL;
    pthread_mutex_unlock(&c->fix_lock);
    while (list) {
        coh_cmd *cmd = list;
        list = cmd->next;
        apply_fix(cmd);
        cmd->fix_applied = 1;
        mti_coh_cmd_unref(cmd); /* releases its roots once the last holder lets go */
    }
}
