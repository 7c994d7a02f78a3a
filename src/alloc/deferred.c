/* Cross-thread and fenced frees.
 *
 * Protocol. A free of another pool's allocation is a node pushed onto the
 * owner's `deferred` stack (a Treiber stack: any thread pushes with a CAS).
 * Only the owner pops, and it takes the whole stack at once with an
 * exchange, so there is no ABA problem and no lock. The owner carries the
 * frees out at its next allocation (mti_pool_drain). A fenced free waits in the
 * owner's fence heap, smallest value on top, until completed() reaches its
 * value.
 *
 * Nodes come from slabs of the freeing thread's own pool, so a cross-thread
 * free allocates nothing. Once carried out, a node goes back to its home
 * pool: straight into the cache when home is the owner, else onto the home's
 * `returned` stack (same push/take-all scheme), which the home takes back
 * when its cache runs dry. In steady state nodes circulate; no malloc. */
#include <errno.h>
#include <stdlib.h>

#include "pool_internal.h"

/* Pushes n onto a stack any thread may push to. */
static void push(_Atomic(dnode *) *head, dnode *n)
{
    dnode *old = atomic_load_explicit(head, memory_order_relaxed);
    do
        n->next = old;
    /* release: publishes the node's contents before it becomes reachable;
     * pairs with the acquire exchange of the taker. */
    while (!atomic_compare_exchange_weak_explicit(head, &old, n, memory_order_release,
                                                  memory_order_relaxed));
}

static dnode *take_all(_Atomic(dnode *) *head)
{
    /* acquire: pairs with the pushers' release CAS. */
    return atomic_exchange_explicit(head, NULL, memory_order_acquire);
}

/* A free node of pool p (owner only). */
static dnode *node_get(mt_pool *p)
{
    if (!p->cache && atomic_load_explicit(&p->returned, memory_order_relaxed))
        p->cache = take_all(&p->returned);
    if (!p->cache) {
        slab *sl = malloc(sizeof *sl);
        if (!sl)
            return NULL;
        sl->next = p->slabs;
        p->slabs = sl;
        for (unsigned i = 0; i < SLAB_NODES; i++) {
            sl->nodes[i].home = p;
            sl->nodes[i].next = i + 1 < SLAB_NODES ? &sl->nodes[i + 1] : NULL;
        }
        p->cache = sl->nodes;
    }
    dnode *n = p->cache;
    p->cache = n->next;
    return n;
}

/* A carried-out node goes home (p is the pool that carried it out). */
static void node_return(mt_pool *p, dnode *n)
{
    if (n->home == p) {
        n->next = p->cache;
        p->cache = n;
    } else if (n->home) {
        push(&n->home->returned, n);
    } else {
        free(n); /* from mt_pools_free: a thread without a pool */
    }
}

/* ---- the fence heap: a pairing heap threaded through the nodes -------------
 * Intrusive, so queuing a fenced free never allocates (and never fails). */

static dnode *meld(dnode *a, dnode *b)
{
    if (!a)
        return b;
    if (!b)
        return a;
    if (b->value < a->value) {
        dnode *t = a;
        a = b;
        b = t;
    }
    b->next = a->child;
    a->child = b;
    return a;
}

/* Two-pass pairing of the children of a removed root: O(log n) amortised. */
static dnode *merge_pairs(dnode *first)
{
    dnode *acc = NULL;
    while (first) {
        dnode *a = first, *b = first->next;
        first = b ? b->next : NULL;
        a->next = NULL;
        if (b)
            b->next = NULL;
        dnode *m = meld(a, b);
        m->next = acc;
        acc = m;
    }
    dnode *root = NULL;
    while (acc) {
        dnode *next = acc->next;
        acc->next = NULL;
        root = meld(root, acc);
        acc = next;
    }
    return root;
}

static void fence_push(mt_pool *p, dnode *n)
{
    n->next = NULL;
    n->child = NULL;
    p->fences = meld(p->fences, n);
    p->fenced_pending++;
}

/* Carries out one free in the owner: 1, or 0 for a free that named no live
 * allocation (counted; the freeing thread is long gone). */
static int carry_out(mt_pool *p, dnode *n)
{
    mt_pool *owner;
    const pregion *e = mti_pool_region_lookup(p->set, n->region, &owner);
    if (!e || owner != p || mti_pool_free_local(p, e, n->offset) != 0) {
        p->deferred_errors++;
        return 0;
    }
    return 1;
}

static long fences_run(mt_pool *p)
{
    uint64_t done = p->set->o.completed(p->set->o.user);
    long n = 0;
    while (p->fences && p->fences->value <= done) {
        dnode *top = p->fences;
        p->fences = merge_pairs(top->child);
        p->fenced_pending--;
        if (carry_out(p, top)) {
            p->fenced_done++;
            n++;
        }
        node_return(p, top);
    }
    return n;
}

long mti_pool_drain(mt_pool *p)
{
    long n = 0;
    for (dnode *d = take_all(&p->deferred), *next; d; d = next) {
        next = d->next;
        if (d->fenced) {
            fence_push(p, d); /* stays with the owner until its value completes */
            continue;
        }
        if (carry_out(p, d)) {
            p->deferred_done++;
            n++;
        }
        node_return(p, d);
    }
    if (p->fences)
        n += fences_run(p);
    return n;
}

int mti_pool_queue(mt_pool *self, mt_pool *owner, uint32_t gid, uint64_t offset, int fenced,
              uint64_t value)
{
    dnode *n = self ? node_get(self) : malloc(sizeof *n);
    if (!n)
        return -ENOMEM;
    if (!self)
        n->home = NULL;
    n->region = gid;
    n->offset = offset;
    n->fenced = (uint32_t)fenced;
    n->value = value;
    n->child = NULL;
    if (owner == self && fenced)
        fence_push(self, n); /* own fenced free: no need to go through the stack */
    else
        push(&owner->deferred, n);
    return 0;
}

long mt_pool_collect(mt_pool *p)
{
    if (!p)
        return -EINVAL;
    return mti_pool_drain(p);
}

static int pools_free(mt_pools *s, uint32_t region, uint64_t offset, int fenced, uint64_t value)
{
    if (!s)
        return -EINVAL;
    if (fenced && !s->o.completed)
        return -EINVAL;
    mt_pool *owner;
    if (!mti_pool_region_lookup(s, region, &owner))
        return -ENOENT;
    return mti_pool_queue(NULL, owner, region, offset, fenced, value);
}

int mt_pools_free(mt_pools *s, uint32_t region, uint64_t offset)
{
    return pools_free(s, region, offset, 0, 0);
}

int mt_pools_free_fenced(mt_pools *s, uint32_t region, uint64_t offset, uint64_t value)
{
    return pools_free(s, region, offset, 1, value);
}

/* mt_pools_destroy, first pass: nodes malloc'ed by threads without a pool
 * may still sit in the deferred stack or the fence heap. Slab nodes (of any
 * pool) go with their slabs in the second pass, so none is freed while
 * another pool's lists still lead to it. */
void mti_pool_nodes_free(mt_pool *p)
{
    for (dnode *d = take_all(&p->deferred), *next; d; d = next) {
        next = d->next;
        if (!d->home)
            free(d);
    }
    /* The heap without recursion: children are spliced in front of the
     * sibling chain still to visit. */
    for (dnode *todo = p->fences, *n; (n = todo) != NULL;) {
        todo = n->next;
        if (n->child) {
            dnode *t = n->child;
            while (t->next)
                t = t->next;
            t->next = todo;
            todo = n->child;
        }
        if (!n->home)
            free(n);
    }
    p->fences = NULL;
}

void mti_pool_slabs_free(mt_pool *p)
{
    for (slab *sl = p->slabs, *next; sl; sl = next) {
        next = sl->next;
        free(sl);
    }
}
