/* Instances: device memory for a root buffer at one location, allocated on
 * first use, evicted under pressure, released after its last user.
 *
 * Eviction picks, least recently used first, an instance that is idle (its
 * last user completed: last_seq <= the location's completed value), not
 * needed by the enqueue being planned, and whose valid ranges are all valid
 * somewhere else too: dropping it loses nothing. When nothing qualifies the
 * enqueue fails with MT_EDEVMEM. Idle instances are freed at once; an
 * instance dropped while commands still use it (its buffer was freed, its
 * client closed, its device lost) is freed by the location's timeline once
 * they complete. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "internal.h"


static int add_to_device(coh_device *d, coh_inst *in)
{
    if (d->ninsts == d->capinsts) {
        uint32_t cap = d->capinsts ? d->capinsts * 2 : 64;
        coh_inst **v = realloc(d->insts, cap * sizeof *v);
        if (!v)
            return -ENOMEM;
        d->insts = v;
        d->capinsts = cap;
    }
    in->dev_index = d->ninsts;
    d->insts[d->ninsts++] = in;
    return 0;
}

static void remove_from_device(coh_device *d, coh_inst *in)
{
    coh_inst *last = d->insts[--d->ninsts];
    d->insts[in->dev_index] = last;
    last->dev_index = in->dev_index;
}

/* Frees the memory behind an instance and the instance (any thread). */
static void release_now(mt_coh *c, coh_inst *in)
{
    coh_root *r = in->root;
    if (in->loc == MT_COH_HOST) {
        /* A state of 1 was published by device i's engine, which exists. */
        if (r->hostatt)
            for (uint32_t i = 1; i < COH_NLOC; i++) {
                coh_hostatt *ha = &r->hostatt[i];
                if (atomic_load_explicit(&ha->state, memory_order_acquire) != 1)
                    continue;
                if (c->dev[i]->be->host_detach)
                    c->dev[i]->be->host_detach(c->dev[i]->h, ha->token);
                atomic_store_explicit(&ha->state, 0, memory_order_relaxed);
            }
        if (in->owned)
            munmap((void *)(uintptr_t)in->addr, in->len);
    } else
        mti_coh_dev_free(c->dev[in->loc], &in->block);
    /* The root's memory is gone once its last release ran. */
    if (atomic_fetch_sub_explicit(&r->releases, 1, memory_order_acq_rel) == 1 && r->released)
        r->released(r->released_user);
    mti_coh_root_unref(r);
    free(in);
}

static void release_deferred(void *ctx, uint64_t value, int status)
{
    (void)value;
    (void)status; /* completed, lost or cancelled: the device is done with it */
    coh_inst *in = ctx;
    release_now(in->root->ctx, in);
}

void mti_coh_inst_drop(mt_coh *c, coh_inst *in)
{
    coh_root *r = in->root;
    r->inst[in->loc] = NULL;
    mti_coh_runs_update(&r->runs, 0, r->size, ~COH_BIT(in->loc), 0);
    if (in->loc != MT_COH_HOST)
        remove_from_device(c->dev[in->loc], in);
    in->last_write = in->last_use = NULL; /* no references to drop */
    coh_loc *l = mti_coh_loc_of(c, in->loc);
    atomic_fetch_add_explicit(&r->releases, 1, memory_order_relaxed);
    mti_coh_root_ref(r);
    if (in->last_seq <= mti_coh_loc_completed(l)) {
        release_now(c, in); /* idle */
        return;
    }
    if (mt_timeline_defer(l->tl, in->last_seq, release_deferred, in) == 0)
        return;
    /* No memory to defer the release: wait for the last command that uses
     * the instance instead (before, it was released at once, and a command
     * still running read memory already handed to another buffer:
     * test_coherence_nomem). Every caller holds the context's lock, so the
     * batch is handed over first (that command may sit in it); completions
     * never take the lock, and the released callback may not call back. A
     * lost location's wait returns at once: its device is done with it. */
    mti_coh_doorbell_all(c);
    (void)mt_timeline_wait(l->tl, in->last_seq, -1);
    release_now(c, in);
}

/* 1 when every range valid at `loc` is valid somewhere else too. */
static int valid_elsewhere(const coh_root *r, uint32_t loc)
{
    const coh_runs *rs = &r->runs;
    for (uint32_t k = 0; k < rs->n; k++)
        if ((rs->v[k].mask & COH_BIT(loc)) && !(rs->v[k].mask & ~COH_BIT(loc)))
            return 0;
    return 1;
}

static int evictable(coh_inst *in, uint64_t done, coh_root *const *pinned, uint32_t npinned)
{
    if (in->last_seq > done || in->root->maps)
        return 0;
    for (uint32_t k = 0; k < npinned; k++)
        if (pinned[k] == in->root)
            return 0;
    return valid_elsewhere(in->root, in->loc);
}

static coh_inst *pick_victim(mt_coh *c, coh_device *d, coh_root *const *pinned, uint32_t npinned)
{
    uint64_t done = mti_coh_loc_completed(mti_coh_loc_of(c, d->id));
    coh_inst *best = NULL;
    for (uint32_t i = 0; i < d->ninsts; i++) {
        coh_inst *in = d->insts[i];
        if ((!best || in->stamp < best->stamp) && evictable(in, done, pinned, npinned))
            best = in;
    }
    return best;
}

int mti_coh_room_possible(mt_coh *c, uint32_t loc, uint64_t need, coh_root *const *pinned,
                      uint32_t npinned)
{
    coh_device *d = c->dev[loc];
    mt_alloc_stats st;
    pthread_mutex_lock(&d->mem_lock);
    mt_alloc_get_stats(d->alloc, &st);
    int exhausted = d->alloc_exhausted;
    pthread_mutex_unlock(&d->mem_lock);
    /* Regions still to come from the backend count as free: only a device
     * that has handed out everything can be judged here. */
    uint64_t room = st.free_bytes;
    if (room >= need || !exhausted)
        return 1;
    uint64_t done = mti_coh_loc_completed(mti_coh_loc_of(c, loc));
    for (uint32_t i = 0; i < d->ninsts && room < need; i++)
        if (evictable(d->insts[i], done, pinned, npinned))
            room += d->insts[i]->len;
    return room >= need;
}

static int host_memory(mt_coh *c, coh_root *r)
{
    if (r->inst[0])
        return 0;
    /* Zero pages until written: an upload of a host-less buffer's initial
     * content reads the shared zero page, not fresh memory. */
    size_t len = (r->size + 4095) & ~(size_t)4095;
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return -ENOMEM;
    coh_inst *in = mti_coh_zalloc_lines(sizeof *in);
    coh_hostatt *ha = r->hostatt ? r->hostatt : calloc(COH_NLOC, sizeof *ha);
    if (!in || !ha) {
        free(in);
        if (ha != r->hostatt)
            free(ha);
        munmap(p, len);
        return -ENOMEM;
    }
    r->hostatt = ha;
    in->addr = (uint64_t)(uintptr_t)p;
    in->len = len;
    in->owned = 1;
    in->loc = MT_COH_HOST;
    in->root = r;
    in->uid = ++c->next_uid;
    r->inst[0] = in;
    return 0;
}

int mti_coh_root_host(mt_coh *c, coh_root *r)
{
    return host_memory(c, r);
}

int mti_coh_inst_make(mt_coh *c, coh_root *r, uint32_t loc, coh_root *const *pinned,
                      uint32_t npinned, int *created)
{
    *created = 0;
    if (loc == MT_COH_HOST) {
        int rc = host_memory(c, r);
        *created = rc == 0;
        return rc;
    }
    coh_device *d = c->dev[loc];
    mt_alloc_block b;
    uint64_t addr = 0;
    int rc;
    while ((rc = mti_coh_dev_alloc(d, r->size, &b, &addr)) == -ENOSPC) {
        coh_inst *v = pick_victim(c, d, pinned, npinned);
        if (!v)
            return MT_EDEVMEM;
        atomic_fetch_add_explicit(&d->evictions, 1, memory_order_relaxed);
        c->st_evictions += 1;
        mti_coh_inst_drop(c, v);
    }
    if (rc)
        return rc;
    coh_inst *in = mti_coh_zalloc_lines(sizeof *in);
    if (!in || add_to_device(d, in)) {
        free(in);
        mti_coh_dev_free(d, &b);
        return -ENOMEM;
    }
    in->addr = addr;
    in->block = b;
    in->len = b.size;
    in->loc = loc;
    in->root = r;
    in->uid = ++c->next_uid;
    mti_coh_inst_touch(c, in);
    r->inst[loc] = in;
    *created = 1;
    return 0;
}
