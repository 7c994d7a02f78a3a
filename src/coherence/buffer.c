/* Handles, views, root buffers and SVM allocations.
 *
 * A handle is (generation << 32 | slot + 1): a freed slot's generation moves
 * on, so a stale handle finds nothing instead of someone else's buffer (the
 * HardDoom notes' fdget: every argument is looked up and checked before
 * anything touches a device). Each client keeps a list of what it owns, so
 * closing it releases everything.
 *
 * Roots hold content; views are what handles name: the buffer's own view,
 * sub-buffers (root, offset), and buffers made on SVM pointers. A buffer on
 * a coarse-grained SVM pointer is a view of the SVM allocation's root: it
 * shares its validity and instances, and the pointer's host memory is only
 * a source where the runs say the host holds the latest content (PoCL used
 * the pointer as always-valid host memory). On a fine-grained pointer it is
 * a view of shared memory, never migrated. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"

static mt_coh_buf handle_of(const coh_view *v)
{
    return ((uint64_t)v->gen << 32) | (uint64_t)(v->slot + 1);
}

static int slot_alloc(mt_coh *c, coh_view *v)
{
    uint32_t idx;
    if (c->free_slot) {
        idx = c->free_slot - 1;
        c->free_slot = c->slots[idx].next_free;
    } else {
        if (c->nslots == c->capslots) {
            uint32_t cap = c->capslots ? c->capslots * 2 : 256;
            /* Line-aligned: a slot is 32 bytes, and realloc's 16-byte
             * alignment would put every other one across two cache lines
             * (two misses for one lookup). */
            coh_slot *s = aligned_alloc(64, cap * sizeof *s);
            if (!s)
                return -ENOMEM;
            if (c->nslots)
                memcpy(s, c->slots, c->nslots * sizeof *s);
            free(c->slots);
            c->slots = s;
            c->capslots = cap;
        }
        idx = c->nslots++;
        c->slots[idx].gen = 1;
    }
    coh_slot *s = &c->slots[idx];
    s->view = v;
    s->client = v->client;
    s->flags = v->flags;
    s->root = v->kind == COH_VIEW_ROOT && v->offset == 0 && v->root && v->size == v->root->size
                  ? v->root
                  : NULL;
    v->slot = idx;
    v->gen = c->slots[idx].gen;
    return 0;
}

static void slot_free(mt_coh *c, coh_view *v)
{
    coh_slot *s = &c->slots[v->slot];
    s->view = NULL;
    s->client = NULL;
    s->root = NULL;
    s->gen++;
    if (s->gen == 0)
        s->gen = 1;
    s->next_free = c->free_slot;
    c->free_slot = v->slot + 1;
}

coh_svm *mti_coh_svm_find(mt_coh_client *cl, const void *p, uint64_t size, int *partial)
{
    uintptr_t a = (uintptr_t)p;
    uintptr_t e = size > UINTPTR_MAX - a ? UINTPTR_MAX : a + size;
    if (partial)
        *partial = 0;
    for (coh_svm *s = cl->svms; s; s = s->next) {
        uintptr_t b = (uintptr_t)s->ptr;
        if (s->freed || a >= b + s->size || b >= e)
            continue; /* no byte in common */
        if (a >= b && size <= s->size - (a - b))
            return s;
        if (partial)
            *partial = 1;
    }
    return NULL;
}

/* ---- roots ------------------------------------------------------------------- */

static coh_root *root_new(mt_coh *c, mt_coh_client *cl, uint64_t size, uint32_t flags, int kind)
{
    if (c->nroots == c->caproots) {
        uint32_t cap = c->caproots ? c->caproots * 2 : 256;
        coh_root **v = realloc(c->roots, cap * sizeof *v);
        if (!v)
            return NULL;
        c->roots = v;
        c->caproots = cap;
    }
    coh_root *r = mti_coh_zalloc_lines(sizeof *r);
    if (!r)
        return NULL;
    atomic_init(&r->refs, 1); /* alive */
    atomic_init(&r->releases, 1);
    r->ctx = c;
    r->client = cl;
    r->kind = kind;
    r->flags = flags;
    r->size = size;
    /* The initial content (zeros, or the host pointer's bytes) is at the host. */
    mti_coh_runs_init(&r->runs, r->runs_inline, size, COH_BIT(MT_COH_HOST));
    r->index = c->nroots;
    c->roots[c->nroots++] = r;
    return r;
}

/* The last view (or map) of a root went away: release everything it holds.
 * No map is left: each holds a view count. */
static void root_kill(mt_coh *c, coh_root *r)
{
    r->dead = 1;
    mti_coh_track_destroy(c, r);
    for (uint32_t l = 0; l < COH_NLOC; l++)
        if (r->inst[l])
            mti_coh_inst_drop(c, r->inst[l]);
    coh_root *last = c->roots[--c->nroots];
    c->roots[r->index] = last;
    last->index = r->index;
    if (atomic_fetch_sub_explicit(&r->releases, 1, memory_order_acq_rel) == 1 && r->released)
        r->released(r->released_user);
    mti_coh_root_unref(r);
}

static void root_put_view(mt_coh *c, coh_root *r)
{
    if (--r->views == 0)
        root_kill(c, r);
}

void mti_coh_hold(coh_root *r, coh_svm *s)
{
    if (r)
        r->views++;
    else if (s)
        s->views++;
}

void mti_coh_unhold(mt_coh *c, coh_root *r, coh_svm *s)
{
    if (r)
        root_put_view(c, r);
    else if (s && --s->views == 0 && s->freed)
        mti_coh_svm_release(c, s);
}

void mti_coh_map_end(mt_coh *c, coh_map *m)
{
    if (m->root)
        for (coh_map **rp = &m->root->maps; *rp; rp = &(*rp)->next)
            if (*rp == m) {
                *rp = m->next;
                break;
            }
    mti_coh_unhold(c, m->root, m->svm);
}

/* ---- SVM --------------------------------------------------------------------------- */

static void svm_destroy(mt_coh *c, coh_svm *s)
{
    if (s->kind == MT_COH_SVM_FINE) {
        for (uint32_t i = 1; i <= c->ndev; i++)
            if (s->dev_token && s->dev_addr[i] && c->dev[i]->be->svm_detach)
                c->dev[i]->be->svm_detach(c->dev[i]->h, s->dev_token[i]);
        munmap(s->ptr, (s->size + 4095) & ~(uint64_t)4095);
    }
    free(s->dev_addr);
    free(s->dev_token);
    free(s);
}

/* Fine-grained SVM memory is used in place by commands: it is unmapped once
 * the host location's commands up to the last one using it completed. */
typedef struct svm_release {
    mt_coh *c;
    coh_svm *s;
} svm_release;

static void svm_release_cb(void *ctx, uint64_t value, int status)
{
    (void)value;
    (void)status;
    svm_release *x = ctx;
    svm_destroy(x->c, x->s);
    free(x);
}

void mti_coh_svm_release(mt_coh *c, coh_svm *s)
{
    if (s->kind == MT_COH_SVM_COARSE) {
        coh_root *r = s->root;
        s->root = NULL;
        free(s->dev_addr);
        free(s->dev_token);
        free(s);
        if (r)
            root_put_view(c, r);
        return;
    }
    coh_loc *l = mti_coh_loc_of(c, MT_COH_HOST);
    svm_release *x = malloc(sizeof *x);
    uint64_t last = s->last_seq;
    if (x) {
        *x = (svm_release){c, s};
        if (mt_timeline_defer(l->tl, last, svm_release_cb, x) == 0) {
            mt_timeline_poll(l->tl);
            return;
        }
        free(x);
    }
    mt_timeline_wait(l->tl, last, -1); /* no memory to defer: wait instead */
    svm_destroy(c, s);
}

static void svm_unlink(mt_coh_client *cl, coh_svm *s)
{
    for (coh_svm **p = &cl->svms; *p; p = &(*p)->next)
        if (*p == s) {
            *p = s->next;
            return;
        }
}

int mt_coh_svm_alloc(mt_coh_client *cl, uint64_t size, uint32_t kind, void **ptr)
{
    if (!cl || !ptr || !size || (kind != MT_COH_SVM_FINE && kind != MT_COH_SVM_COARSE))
        return -EINVAL;
    mt_coh *c = cl->ctx;
    if (mti_coh_forked(c))
        return MT_EFORKED;
    size_t len = (size + 4095) & ~(uint64_t)4095;
    if (len < size)
        return -EINVAL;
    coh_svm *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    s->size = size;
    s->kind = (int)kind;
    s->client = cl;
    pthread_mutex_lock(&c->lock);
    int rc = 0;
    if (kind == MT_COH_SVM_FINE) {
        s->dev_addr = calloc(COH_NLOC, sizeof *s->dev_addr);
        s->dev_token = calloc(COH_NLOC, sizeof *s->dev_token);
        s->ptr = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (!s->dev_addr || !s->dev_token || s->ptr == MAP_FAILED) {
            if (s->ptr != MAP_FAILED && s->ptr)
                munmap(s->ptr, len);
            s->ptr = NULL;
            rc = -ENOMEM;
        }
        for (uint32_t i = 1; !rc && i <= c->ndev; i++) {
            coh_device *d = c->dev[i];
            if (!(d->be->caps & MT_COH_CAP_FINE_SVM) || !d->be->svm_attach)
                continue;
            uint64_t addr = 0;
            if (d->be->svm_attach(d->h, s->ptr, size, &addr, &s->dev_token[i]) == 0)
                s->dev_addr[i] = addr;
        }
    } else {
        coh_root *r = root_new(c, cl, size, 0, COH_ROOT_SVM);
        if (!r)
            rc = -ENOMEM;
        else if ((rc = mti_coh_root_host(c, r)) != 0) {
            r->views = 1;
            root_put_view(c, r);
        } else {
            r->views = 1; /* the allocation's own hold */
            s->root = r;
            s->ptr = (void *)(uintptr_t)r->inst[0]->addr;
        }
    }
    if (rc) {
        pthread_mutex_unlock(&c->lock);
        free(s->dev_addr);
        free(s->dev_token);
        free(s);
        return rc;
    }
    s->next = cl->svms;
    cl->svms = s;
    *ptr = s->ptr;
    pthread_mutex_unlock(&c->lock);
    return 0;
}

int mt_coh_svm_free(mt_coh_client *cl, void *ptr)
{
    if (!cl)
        return -EINVAL;
    mt_coh *c = cl->ctx;
    if (mti_coh_forked(c))
        return MT_EFORKED;
    pthread_mutex_lock(&c->lock);
    coh_svm *s = mti_coh_svm_find(cl, ptr, 1, NULL);
    if (!s || s->ptr != ptr) {
        pthread_mutex_unlock(&c->lock);
        return MT_ENOBUF;
    }
    svm_unlink(cl, s);
    s->freed = 1;
    if (s->kind == MT_COH_SVM_COARSE || s->views == 0)
        mti_coh_svm_release(c, s);
    pthread_mutex_unlock(&c->lock);
    return 0;
}

/* ---- views ------------------------------------------------------------------------------ */

static void view_link(mt_coh_client *cl, coh_view *v)
{
    v->client = cl;
    v->prev = NULL;
    v->next = cl->views;
    if (cl->views)
        cl->views->prev = v;
    cl->views = v;
}

static void view_unlink(coh_view *v)
{
    if (v->prev)
        v->prev->next = v->next;
    else
        v->client->views = v->next;
    if (v->next)
        v->next->prev = v->prev;
}

void mti_coh_view_free(mt_coh *c, coh_view *v)
{
    view_unlink(v);
    slot_free(c, v);
    if (v->kind == COH_VIEW_FINE)
        mti_coh_unhold(c, NULL, v->svm);
    else
        mti_coh_unhold(c, v->root, NULL);
    free(v);
}

static int new_view(mt_coh *c, mt_coh_client *cl, coh_view *tmpl, mt_coh_buf *out)
{
    coh_view *v = malloc(sizeof *v);
    if (!v)
        return -ENOMEM;
    *v = *tmpl;
    v->client = cl; /* the slot copies it */
    if (slot_alloc(c, v)) {
        free(v);
        return -ENOMEM;
    }
    view_link(cl, v);
    if (v->kind == COH_VIEW_FINE)
        mti_coh_hold(NULL, v->svm);
    else
        mti_coh_hold(v->root, NULL);
    *out = handle_of(v);
    return 0;
}

#define BUF_FLAGS                                                                      \
    (MT_COH_BUF_READ_ONLY | MT_COH_BUF_WRITE_ONLY | MT_COH_BUF_USE_HOST_PTR |           \
     MT_COH_BUF_COPY_HOST_PTR | MT_COH_BUF_TRACK_HOST)
#define ACCESS_FLAGS (MT_COH_BUF_READ_ONLY | MT_COH_BUF_WRITE_ONLY)

static int check_opts(uint64_t size, const mt_coh_buffer_opts *o)
{
    uint32_t f = o->flags;
    if (!size || (f & ~BUF_FLAGS) || (f & ACCESS_FLAGS) == ACCESS_FLAGS)
        return -EINVAL;
    int use = !!(f & MT_COH_BUF_USE_HOST_PTR), copy = !!(f & MT_COH_BUF_COPY_HOST_PTR);
    if ((use && copy) || ((use || copy) != !!o->host_ptr))
        return -EINVAL;
    if ((uintptr_t)o->host_ptr + size < (uintptr_t)o->host_ptr)
        return -EINVAL;
    if ((f & MT_COH_BUF_TRACK_HOST) && copy)
        return -EINVAL;
    long ps = (long)mti_page_size();
    if ((f & MT_COH_BUF_TRACK_HOST) && use && ((uintptr_t)o->host_ptr % (uintptr_t)ps))
        return -EINVAL; /* the tracker watches whole pages of the buffer's own */
    return 0;
}

/* Attaches (pins) a tracked root's host memory on every device that wants
 * it, now, before tracking starts. Engines would otherwise do it at the
 * first transfer; no engine has seen this root yet, so setting the state
 * here races with nothing. */
static void attach_all(mt_coh *c, coh_root *r)
{
    for (uint32_t i = 1; i <= c->ndev; i++) {
        coh_device *d = c->dev[i];
        if (!d->be->host_attach || atomic_load_explicit(&d->lost, memory_order_acquire))
            continue;
        void *tok = NULL;
        int rc = d->be->host_attach(d->h, (void *)(uintptr_t)r->inst[0]->addr, r->size, &tok);
        r->hostatt[i].token = rc == 0 ? tok : NULL;
        atomic_store_explicit(&r->hostatt[i].state, rc == 0 && tok ? 1 : -1, memory_order_release);
    }
}

/* A buffer on an SVM pointer: a view of the allocation. */
static int svm_view(mt_coh *c, mt_coh_client *cl, coh_svm *s, uint64_t size,
                    const mt_coh_buffer_opts *o, mt_coh_buf *out)
{
    if (!(o->flags & MT_COH_BUF_USE_HOST_PTR) || (o->flags & MT_COH_BUF_TRACK_HOST))
        return -EINVAL; /* copying from SVM would read an unmapped coarse pointer */
    coh_view t = {0};
    t.offset = (uint64_t)((uintptr_t)o->host_ptr - (uintptr_t)s->ptr);
    t.size = size;
    t.flags = o->flags & ACCESS_FLAGS;
    if (s->kind == MT_COH_SVM_FINE) {
        t.kind = COH_VIEW_FINE;
        t.svm = s;
    } else {
        t.kind = COH_VIEW_SUB;
        t.root = s->root;
    }
    return new_view(c, cl, &t, out);
}

int mt_coh_buffer_create(mt_coh_client *cl, uint64_t size, const mt_coh_buffer_opts *opts,
                         mt_coh_buf *out)
{
    mt_coh_buffer_opts o = {0};
    if (opts)
        o = *opts;
    if (!cl || !out)
        return -EINVAL;
    if (mti_coh_forked(cl->ctx))
        return MT_EFORKED;
    int rc = check_opts(size, &o);
    if (rc)
        return rc;
    mt_coh *c = cl->ctx;
    pthread_mutex_lock(&c->lock);
    int partial = 0;
    coh_svm *s = o.host_ptr ? mti_coh_svm_find(cl, o.host_ptr, size, &partial) : NULL;
    /* Host memory that is partly an SVM allocation's: as a plain host
     * pointer its bytes would have two contents (the allocation's versions
     * and the buffer's), and past the allocation's end it is not memory
     * the application gave. */
    if (partial) {
        pthread_mutex_unlock(&c->lock);
        return -EINVAL;
    }
    if (s) {
        rc = svm_view(c, cl, s, size, &o, out);
        pthread_mutex_unlock(&c->lock);
        return rc;
    }
    coh_root *r = root_new(c, cl, size, o.flags, COH_ROOT_BUFFER);
    if (!r) {
        pthread_mutex_unlock(&c->lock);
        return -ENOMEM;
    }
    r->views = 1; /* held until the view exists */
    if (o.flags & MT_COH_BUF_USE_HOST_PTR) {
        coh_inst *in = mti_coh_zalloc_lines(sizeof *in);
        r->hostatt = calloc(COH_NLOC, sizeof *r->hostatt);
        if (!in || !r->hostatt) {
            free(in);
            rc = -ENOMEM;
        } else {
            in->addr = (uint64_t)(uintptr_t)o.host_ptr;
            in->len = size;
            in->loc = MT_COH_HOST;
            in->root = r;
            in->uid = ++c->next_uid;
            r->inst[0] = in;
        }
    } else if ((o.flags & (MT_COH_BUF_COPY_HOST_PTR | MT_COH_BUF_TRACK_HOST)) &&
               (rc = mti_coh_root_host(c, r)) == 0 && o.host_ptr)
        memcpy((void *)(uintptr_t)r->inst[0]->addr, o.host_ptr, size);
    if (!rc && (o.flags & MT_COH_BUF_TRACK_HOST)) {
        /* Pin first: pinning writes every page as far as the tracker can
         * tell, and those are not the host's writes. */
        attach_all(c, r);
        rc = mti_coh_track_create(c, r);
    }
    coh_view t = {.kind = COH_VIEW_ROOT, .root = r, .size = size, .flags = o.flags & ACCESS_FLAGS};
    if (!rc)
        rc = new_view(c, cl, &t, out);
    if (!rc) {
        r->released = o.released;
        r->released_user = o.released_user;
    }
    root_put_view(c, r); /* drops the creation hold (kills r on error) */
    pthread_mutex_unlock(&c->lock);
    return rc;
}

int mt_coh_subbuffer_create(mt_coh_client *cl, mt_coh_buf parent, uint64_t offset, uint64_t size,
                            uint32_t flags, mt_coh_buf *out)
{
    if (!cl || !out || !size || (flags & ~ACCESS_FLAGS) || (flags & ACCESS_FLAGS) == ACCESS_FLAGS)
        return -EINVAL;
    mt_coh *c = cl->ctx;
    if (mti_coh_forked(c))
        return MT_EFORKED;
    pthread_mutex_lock(&c->lock);
    int rc = 0;
    coh_view *p = mti_coh_view_lookup(c, cl, parent);
    if (!p)
        rc = MT_ENOBUF;
    else if (offset > p->size || size > p->size - offset)
        rc = -ERANGE;
    else if ((flags | p->flags) == ACCESS_FLAGS)
        rc = -EACCES; /* wider than the parent allows */
    if (!rc) {
        coh_view t = *p;
        t.kind = p->kind == COH_VIEW_FINE ? COH_VIEW_FINE : COH_VIEW_SUB;
        t.offset = p->offset + offset;
        t.size = size;
        t.flags = flags | p->flags;
        rc = new_view(c, cl, &t, out);
    }
    pthread_mutex_unlock(&c->lock);
    return rc;
}

int mt_coh_buffer_free(mt_coh_client *cl, mt_coh_buf buf)
{
    if (!cl)
        return -EINVAL;
    mt_coh *c = cl->ctx;
    if (mti_coh_forked(c))
        return MT_EFORKED;
    pthread_mutex_lock(&c->lock);
    mti_coh_fixups_run(c);
    coh_view *v = mti_coh_view_lookup(c, cl, buf);
    if (v)
        mti_coh_view_free(c, v);
    pthread_mutex_unlock(&c->lock);
    return v ? 0 : MT_ENOBUF;
}

int mt_coh_buffer_info_get(mt_coh_client *cl, mt_coh_buf buf, mt_coh_buffer_info *out)
{
    if (!cl || !out)
        return -EINVAL;
    mt_coh *c = cl->ctx;
    if (mti_coh_forked(c))
        return MT_EFORKED;
    pthread_mutex_lock(&c->lock);
    mti_coh_fixups_run(c);
    coh_view *v = mti_coh_view_lookup(c, cl, buf);
    if (!v) {
        pthread_mutex_unlock(&c->lock);
        return MT_ENOBUF;
    }
    memset(out, 0, sizeof *out);
    out->size = v->size;
    out->offset = v->offset;
    if (v->kind == COH_VIEW_FINE) {
        out->valid_mask = out->any_mask = ~0ull;
        out->host = (char *)v->svm->ptr + v->offset;
    } else {
        coh_root *r = v->root;
        if (r->track) /* host writes not collected yet are part of the state */
            mti_coh_track_sync(c, r, 0, r->size, COH_NO_FETCH, NULL, NULL, 0, 0);
        out->version = r->version;
        mti_coh_runs_masks(&r->runs, v->offset, v->offset + v->size, &out->valid_mask, &out->any_mask);
        out->lost_bytes = mti_coh_runs_lost(&r->runs, v->offset, v->offset + v->size);
        out->ranges = r->runs.n;
        out->host = r->inst[0] ? (char *)(uintptr_t)r->inst[0]->addr + v->offset : NULL;
    }
    pthread_mutex_unlock(&c->lock);
    return 0;
}
