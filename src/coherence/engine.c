/* Engines: each device runs a compute engine (commands) and a copy engine
 * (the hidden migration queue), each a FIFO of ready commands served by a
 * submitter thread, plus a completer thread for asynchronous backends.
 *
 * The submitter takes ready commands in order and submits them; a backend
 * that finishes synchronously completes the command there. An asynchronous
 * one returns "in flight": the command goes to the in-flight FIFO, and the
 * completer waits for the oldest (backends complete in submission order per
 * engine, like a GPU stream), so the submitter keeps the device fed while
 * the completer waits.
 *
 * Hand-over from the planner is batched: ready commands collect in the
 * engine's batch under the planner's lock and are handed over at a doorbell
 * (every 32 commands, a large transfer, a flush, a wait), so a steady stream
 * of enqueues does not wake a thread per command. Commands that become
 * ready when a dependency completes are handed over at once. The hand-over
 * itself is in sched.c: it and completion call each other. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "probe.h"

/* Lazily attaches the root's host memory to this device (pinning), once.
 * Only this device's copy engine thread attaches for this device, so the
 * state needs no lock; release/acquire order the token for the release
 * path, which runs after the last transfer completed. */
static void host_attach(coh_device *d, coh_cmd *cmd)
{
    if (!d->be->host_attach || !cmd->hostatt)
        return;
    coh_hostatt *ha = &cmd->hostatt[d->id];
    int st = atomic_load_explicit(&ha->state, memory_order_acquire);
    if (st == 0) {
        void *tok = NULL;
        int rc = d->be->host_attach(d->h, cmd->op.host, cmd->host_len, &tok);
        ha->token = rc == 0 ? tok : NULL;
        st = rc == 0 && tok ? 1 : -1;
        atomic_store_explicit(&ha->state, st, memory_order_release);
    }
    cmd->op.host_token = st == 1 ? ha->token : NULL;
}

/* The op the backend gets, from what the planner recorded: built here, on
 * the engine's thread, so that planning writes a few lines of the command
 * rather than the whole public op. */
static void build_op(coh_device *d, coh_cmd *cmd)
{
    mt_coh_op *op = &cmd->op;
    memset(op, 0, sizeof *op);
    op->kind = (mt_coh_op_kind)cmd->opkind;
    op->exec.backend = d->be->name;
    if (op->kind == MT_COH_OP_RUN) {
        op->fn = cmd->fn;
        op->user = cmd->user;
        op->exec.device = cmd->to_loc;
        op->exec.nargs = cmd->nargs;
        op->exec.addr = cmd->argv;
        op->exec.size = cmd->argv ? cmd->argv + cmd->nargs : NULL;
        return;
    }
    op->segs = cmd->segs;
    op->nsegs = cmd->nsegs;
    op->bytes = cmd->bytes;
    op->dev_addr = cmd->dev_addr;
    if (op->kind == MT_COH_OP_PEER) {
        op->peer = d->ctx->dev[cmd->from_loc]->h;
        op->peer_addr = cmd->xaddr;
    } else
        op->host = (void *)(uintptr_t)cmd->xaddr;
}

static int submit(coh_engine *e, coh_cmd *cmd)
{
    coh_device *d = e->dev;
    build_op(d, cmd);
    int lost = atomic_load_explicit(&d->lost, memory_order_acquire);
    if (lost)
        return lost;
    if (cmd->op.kind == MT_COH_OP_PEER && cmd->from_loc) {
        coh_device *s = d->ctx->dev[cmd->from_loc];
        int sl = atomic_load_explicit(&s->lost, memory_order_acquire);
        if (sl)
            return sl;
    }
    if (cmd->op.kind == MT_COH_OP_UPLOAD || cmd->op.kind == MT_COH_OP_DOWNLOAD)
        host_attach(d, cmd);
    return d->be->submit(d->h, e->kind, &cmd->op);
}

/* A command failed with MT_EDEVLOST: records the device's loss for the
 * planner's next fixup pass (any engine thread; the first loss code wins). */
static void mark_lost(coh_device *d, int code)
{
    int zero = 0;
    if (!atomic_compare_exchange_strong_explicit(&d->lost, &zero, code ? code : MT_EDEVLOST,
                                                 memory_order_acq_rel, memory_order_acquire))
        return;
    /* release: the planner that sees the bit sees the loss code. */
    atomic_fetch_or_explicit(&d->ctx->lost_pending, COH_BIT(d->id), memory_order_release);
    atomic_store_explicit(&d->ctx->fix_pending, 1, memory_order_release);
}

static void finish(coh_engine *e, coh_cmd *cmd, int rc)
{
    if (rc == MT_EDEVLOST && cmd->opkind != MT_COH_OP_PEER)
        mark_lost(e->dev, rc);
    atomic_fetch_sub_explicit(&e->busy, 1, memory_order_relaxed);
    mti_coh_cmd_complete(cmd, rc);
}

static void *submitter(void *arg)
{
    coh_engine *e = arg;
    pthread_mutex_lock(&e->lock);
    for (;;) {
        /* While the planner submits (mti_coh_engine_kick), its commands go
         * first: wait for it, even when stopping (it appends to the in-flight
         * list, which must not outlive the completer). */
        while ((!e->head && !e->stop) || e->in_submit) {
            e->sleeping = 1;
            pthread_cond_wait(&e->cond, &e->lock);
            e->sleeping = 0;
        }
        if (!e->head)
            break;
        coh_cmd *cmd = e->head;
        e->head = cmd->next;
        if (!e->head)
            e->tail = NULL;
        int stop = e->stop;
        e->in_submit = 1;
        pthread_mutex_unlock(&e->lock);
        COH_PROBE("sub0", e->kind, cmd->bytes);
        int rc = stop ? MT_ECANCELED : submit(e, cmd);
        COH_PROBE("sub1", e->kind, cmd->bytes);
        if (rc == 1) {
            /* Before it joins the in-flight list: it cannot complete yet. */
            if (e->in_order)
                mti_coh_cmd_submitted(cmd);
            pthread_mutex_lock(&e->lock);
            e->in_submit = 0;
            cmd->sub_rc = 1;
            cmd->next = NULL;
            mti_coh_cmds_append(&e->ihead, &e->itail, cmd, cmd);
            if (e->isleeping)
                pthread_cond_signal(&e->icond);
            continue; /* lock held */
        }
        finish(e, cmd, rc);
        pthread_mutex_lock(&e->lock);
        e->in_submit = 0;
    }
    e->stopped = 1;
    pthread_cond_broadcast(&e->icond);
    pthread_mutex_unlock(&e->lock);
    return NULL;
}

/* The planner submits an upload's pieces itself whenever the engine's own
 * submitter has nothing queued and is not submitting: handing a piece to
 * that thread costs its wake-up before the device starts copying, about
 * 60 us on the GPU machine when it was asleep, and once, with the
 * collecting threads busy on every CPU, 390 us while the device sat idle
 * (upload probes, docs/coherence.md). A launch on the planner's thread
 * takes 8-20 us, the first of an upload about 50. Only the submit runs
 * here: a command that fails goes to the in-flight list with its status
 * and the completer completes it, in order, and a batch in which a command
 * waits for another on this engine goes to the submitter, so no completion
 * (which may take locks the planner holds) runs on this thread. */
/* Whether a command waits for cmd on the same engine: its submission would
 * release it (mti_coh_cmd_submitted), and a release may complete it at once
 * (a dependency failed), which must not happen on the planner's thread: a
 * completing download takes its root's track lock, which the planner may
 * hold. Without the command's lock: only the planner links dependents, and
 * a command in the batch is neither submitted nor complete, so nothing
 * else changes its list. An upload's pieces have none (each is submitted
 * before the next one links to it, which then does not wait). */
static int waited_on_here(const coh_cmd *cmd, const coh_engine *e)
{
    for (uint32_t i = 0; i < cmd->ndeps; i++) {
        const coh_cmd *d = (const coh_cmd *)((uintptr_t)cmd->deps[i] & ~(uintptr_t)1);
        if (d->eng == e)
            return 1;
    }
    return 0;
}

void mti_coh_engine_kick(coh_engine *e)
{
    if (!e->bhead)
        return;
    int direct = e->direct;
    for (coh_cmd *x = e->bhead; x && direct; x = x->next)
        direct = !waited_on_here(x, e);
    if (!direct) {
        mti_coh_engine_doorbell(e);
        return;
    }
    pthread_mutex_lock(&e->lock);
    if (e->head || e->in_submit || e->stop || e->stopped) {
        pthread_mutex_unlock(&e->lock);
        mti_coh_engine_doorbell(e);
        return;
    }
    coh_cmd *t;
    uint32_t n;
    coh_cmd *h = mti_coh_batch_take(e, &t, &n);
    e->in_submit = 1;
    atomic_fetch_add_explicit(&e->busy, n, memory_order_relaxed);
    pthread_mutex_unlock(&e->lock);
#ifndef NDEBUG
    mti_coh_kicking = 1;
#endif
    while (h) {
        coh_cmd *cmd = h;
        h = cmd->next;
        COH_PROBE("dsub0", e->kind, cmd->bytes);
        int rc = submit(e, cmd);
        COH_PROBE("dsub1", e->kind, cmd->bytes);
        /* In order (e->direct implies it): later links need not wait. It
         * releases nothing (waited_on_here), so nothing completes here. */
        if (rc == 1)
            mti_coh_cmd_submitted(cmd);
        pthread_mutex_lock(&e->lock);
        cmd->sub_rc = rc;
        cmd->next = NULL;
        mti_coh_cmds_append(&e->ihead, &e->itail, cmd, cmd);
        if (e->isleeping)
            pthread_cond_signal(&e->icond);
        pthread_mutex_unlock(&e->lock);
    }
#ifndef NDEBUG
    mti_coh_kicking = 0;
#endif
    pthread_mutex_lock(&e->lock);
    e->in_submit = 0;
    if (e->sleeping && (e->head || e->stop))
        pthread_cond_signal(&e->cond);
    pthread_mutex_unlock(&e->lock);
}

static void *completer(void *arg)
{
    coh_engine *e = arg;
    coh_device *d = e->dev;
    pthread_mutex_lock(&e->lock);
    for (;;) {
        while (!e->ihead && !e->stopped) {
            e->isleeping = 1;
            pthread_cond_wait(&e->icond, &e->lock);
            e->isleeping = 0;
        }
        if (!e->ihead)
            break; /* the submitter stopped and nothing is in flight */
        coh_cmd *cmd = e->ihead;
        pthread_mutex_unlock(&e->lock);
        int rc = cmd->sub_rc == 1 ? d->be->wait(d->h, e->kind, &cmd->op) : cmd->sub_rc;
        COH_PROBE("done", e->kind, cmd->bytes);
        pthread_mutex_lock(&e->lock);
        e->ihead = cmd->next;
        if (!e->ihead)
            e->itail = NULL;
        pthread_mutex_unlock(&e->lock);
        finish(e, cmd, rc);
        pthread_mutex_lock(&e->lock);
    }
    pthread_mutex_unlock(&e->lock);
    return NULL;
}

int mti_coh_engine_start(coh_engine *e, coh_device *d, int kind)
{
    memset(e, 0, sizeof *e);
    e->dev = d;
    e->kind = kind;
    pthread_mutex_init(&e->lock, NULL);
    pthread_cond_init(&e->cond, NULL);
    pthread_cond_init(&e->icond, NULL);
    atomic_init(&e->busy, 0);
    e->in_order = (d->be->caps & MT_COH_CAP_ASYNC) && (d->be->caps & MT_COH_CAP_IN_ORDER);
    e->direct = e->in_order && kind == MT_COH_ENGINE_COPY &&
                (d->be->caps & MT_COH_CAP_SUBMIT_ANY_THREAD);
    int rc = pthread_create(&e->sub, NULL, submitter, e);
    if (rc)
        return -rc;
    e->has_sub = 1;
    if (d->be->caps & MT_COH_CAP_ASYNC) {
        rc = pthread_create(&e->comp, NULL, completer, e);
        if (rc) {
            mti_coh_engine_stop(e);
            return -rc;
        }
        e->has_comp = 1;
    }
    return 0;
}

void mti_coh_engine_stop(coh_engine *e)
{
    pthread_mutex_lock(&e->lock);
    e->stop = 1;
    pthread_cond_broadcast(&e->cond);
    pthread_mutex_unlock(&e->lock);
    if (e->has_sub)
        pthread_join(e->sub, NULL);
    e->has_sub = 0;
    if (e->has_comp)
        pthread_join(e->comp, NULL);
    e->has_comp = 0;
    pthread_mutex_lock(&e->lock);
    e->stopped = 1;
    pthread_mutex_unlock(&e->lock);
}
