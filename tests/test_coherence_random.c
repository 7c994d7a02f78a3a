/* coherence, randomized: programs of commands, maps, sub-buffer accesses,
 * tracked host writes, buffer creation and frees on 2-8 host and simulated
 * devices, checked against a reference model.
 *
 * The model keeps each buffer's latest content and, per byte, which
 * locations hold it, with the library's documented rules (ranges widened to
 * the granularity, whole pages for tracked buffers; fetch order: host, a
 * host-memory device, one hop into a host-memory device, else a relay
 * through host memory). Checked:
 *  - every command saw exactly the latest content of what it read (hash of
 *    the bytes it found on its device, against the model at enqueue time;
 *    the program orders conflicting commands with events, as an OpenCL
 *    application must), and every map shows it;
 *  - the bytes each command moved equal the model's count of stale bytes in
 *    the (widened) ranges it needs, relayed bytes included; that count is
 *    the minimum for the byte ranges plus at most one granule per end;
 *  - the validity the library reports equals the model's;
 *  - at the end, every buffer's content.
 * Tracked buffers run with the uffd tracker or the signal one, at random per
 * program. The signal tracker without the interposer tracks no pages: every
 * sync takes the chunks it covers whole, as written wherever the host holds
 * the latest content (mt_coh_track_status 0), and the model does the same
 * (`whole`); with the interposer (test_coherence_random_preload) it tracks
 * pages as uffd does.
 * One program in three injects faults: commands whose function fails (what
 * they were to write is lost: refused to readers with MT_ELOSTDATA until
 * overwritten) and simulated devices lost while nothing is pending (what
 * only they held is lost; enqueues on them are refused with MT_EDEVLOST);
 * the model follows both and the final check reads what is not lost.
 * One program in six runs under PoCL's rule (MT_COH_WHOLE_BUFFER: every
 * range widened to its buffer, a partial write-only access fetching the
 * whole buffer); the model widens the same way, and the exact-minimum bound
 * is not checked there (moving whole buffers is the rule's point).
 * Usage: test_coherence_random [--seed N] [--programs N] [--ops N]. */
#include <errno.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "coh_cuda_hooks.h"
#include "coh_util.h"
#include "memtrack/coherence.h"
#include "memtrack/track.h"
#include "mt_test.h"

#define MAXDEV 8
#define NLOC (MAXDEV + 1)
#define MAXROOT 6
#define MAXVIEW 5
#define MAXREAD 32
#define MAXPEND 256

typedef struct mview {
    mt_coh_buf h;
    uint64_t off, size;
    int live;
} mview;

typedef struct mroot {
    int live;
    uint64_t size;
    int tracked;
    uint8_t *hostptr; /* USE_HOST_PTR memory, owned by the test */
    size_t hostlen;
    uint8_t *content;
    uint8_t *valid[NLOC];  /* the library's rule: ranges widened to granules */
    uint8_t *xvalid[NLOC]; /* byte-exact ranges, no relay caching: a lower bound */
    uint64_t *synced;      /* per chunk: the enqueue that last synced it whole */
    mview v[MAXVIEW];
    mt_coh_event *writer;
    mt_coh_event *readers[MAXREAD];
    int nreaders;
} mroot;

typedef struct pend {
    tk_cmd *k;
    mt_coh_event *ev;
    uint64_t want[TK_MAX];
} pend;

typedef struct prog {
    uint64_t rng;
    mt_coh *c;
    mt_coh_client *cl;
    uint32_t ndev;
    int is_host[NLOC]; /* location is host memory (0) or a host-memory device */
    int peer[NLOC];    /* devices with the same nonzero group copy directly (GPUs) */
    mt_coh_queue *q[NLOC];
    mt_coh_queue *q2[NLOC]; /* a second queue per device: no implicit order */
    uint64_t G, page;
    int aligned; /* writes are granule-aligned: the exact-minimum bound applies */
    int small;   /* devices hold a few buffers: eviction under pressure */
    int pocl;    /* MT_COH_WHOLE_BUFFER (PoCL's rule): every range widened to its buffer */
    int faults;  /* commands that fail and simulated devices that are lost */
    int is_sim[NLOC];
    int alive[NLOC]; /* not lost */
    mt_track_backend backend; /* of tracked buffers */
    int whole;   /* no page tracking: syncs take whole chunks (set at the first tracked root) */
    int status_checked;
    uint64_t chunk; /* mt_coh_opts.track_chunk (too small for the split first chunk) */
    uint64_t epoch; /* enqueues (commands and maps), numbered from 1 */
    uint64_t whole_syncs;
    uint64_t refused;
    mroot r[MAXROOT];
    pend p[MAXPEND];
    int np;
    uint64_t moved, minimum, relayed, commands, maps, hostwrites;
    uint64_t failed, losses, lost_refused;
} prog;

static uint64_t rnd(prog *p, uint64_t n)
{
    return mt_test_below(&p->rng, n);
}

static uint64_t gran(prog *p, const mroot *r)
{
    return r->tracked && p->page > p->G ? p->page : p->G;
}

static void widen(prog *p, const mroot *r, uint64_t off, uint64_t size, uint64_t *a, uint64_t *b)
{
    if (p->pocl) {
        *a = 0;
        *b = r->size;
        return;
    }
    uint64_t g = gran(p, r);
    *a = off / g * g;
    *b = (off + size + g - 1) / g * g;
    if (*b > r->size)
        *b = r->size;
}

static uint64_t mask_at(prog *p, const mroot *r, uint64_t i)
{
    uint64_t m = 0;
    for (uint32_t l = 0; l <= p->ndev; l++)
        if (r->valid[l][i])
            m |= 1ull << l;
    return m;
}

/* Does [a, b) hold a byte no location holds (its only holder was lost or
 * the command writing it failed)? Fetching it is refused (MT_ELOSTDATA). */
static int has_lost(prog *p, const mroot *r, uint64_t a, uint64_t b)
{
    for (uint64_t i = a; i < b; i++)
        if (!mask_at(p, r, i))
            return 1;
    return 0;
}

static uint64_t count_lost(prog *p, const mroot *r, uint64_t a, uint64_t b)
{
    uint64_t n = 0;
    for (uint64_t i = a; i < b; i++)
        n += !mask_at(p, r, i);
    return n;
}

/* A device that is not lost, at random; with `any` a lost one now and then
 * (its enqueues must be refused). */
static uint32_t pick_dev(prog *p, int any)
{
    if (any && rnd(p, 16) == 0)
        return 1 + (uint32_t)rnd(p, p->ndev);
    for (;;) {
        uint32_t d = 1 + (uint32_t)rnd(p, p->ndev);
        if (p->alive[d])
            return d;
    }
}

/* The bytes an access to [o, e) of r (widened to [a, b)) fetches first:
 * all of it for reads (and partial writes under PoCL's rule), else the
 * write-only edges. Are any of them lost? */
static int access_lost(prog *p, const mroot *r, uint32_t acc, uint64_t o, uint64_t e, uint64_t a,
                       uint64_t b)
{
    if ((acc & MT_COH_READ) || (p->pocl && (o > 0 || e < r->size)))
        return has_lost(p, r, a, b);
    return has_lost(p, r, a, o) || has_lost(p, r, e, b);
}

/* Makes [a, b) valid at `to` as the library would; returns the bytes it
 * copies into `to`; *relay gets the bytes relayed through host memory. */
static uint64_t fetch(prog *p, mroot *r, uint32_t to, uint64_t a, uint64_t b, uint64_t *relay)
{
    uint64_t n = 0;
    for (uint64_t i = a; i < b; i++) {
        if (r->valid[to][i])
            continue;
        uint64_t m = mask_at(p, r, i);
        MT_CHECK(m != 0);
        n++;
        if (to != 0 && !r->valid[0][i]) {
            int hostmem = 0;
            for (uint32_t l = 1; l <= p->ndev; l++)
                hostmem |= (p->is_host[l] || (p->peer[to] && p->peer[l] == p->peer[to])) &&
                            r->valid[l][i];
            if (!hostmem && !p->is_host[to]) {
                (*relay)++;
                r->valid[0][i] = 1;
            }
        }
        r->valid[to][i] = 1;
    }
    return n;
}

/* Bytes of [off, off+size) not valid at `to` in the exact model, which
 * then holds them. */
static uint64_t xfetch(const mroot *r, uint32_t to, uint64_t off, uint64_t size)
{
    uint64_t n = 0;
    for (uint64_t i = off; i < off + size; i++) {
        n += !r->xvalid[to][i];
        r->xvalid[to][i] = 1;
    }
    return n;
}

static void own(prog *p, mroot *r, uint32_t loc, uint64_t a, uint64_t b)
{
    for (uint32_t l = 0; l <= p->ndev; l++)
        memset(r->valid[l] + a, l == loc, b - a);
}

static void xown(prog *p, mroot *r, uint32_t loc, uint64_t a, uint64_t b)
{
    for (uint32_t l = 0; l <= p->ndev; l++)
        memset(r->xvalid[l] + a, l == loc, b - a);
}

/* What a sync of tracked root r over [a, b) does when its pages are not
 * tracked: each chunk it covers counts as written wherever the host holds
 * the latest content, so those bytes become valid at the host alone (bytes
 * a device wrote since stay the device's). The library syncs every argument
 * on a tracked root before fetching it, but a chunk once per enqueue
 * (`epoch`: a later argument must not take back what the fetch for an
 * earlier one made valid), and the whole root on a buffer-info query
 * (epoch 0: always). The exact model loses the same bytes at the devices:
 * a byte-exact manager that knows no more of the host's writes can do no
 * better. */
static void sync_whole(prog *p, mroot *r, uint64_t a, uint64_t b, uint64_t epoch)
{
    if (!r->tracked || !p->whole || a >= b)
        return;
    for (uint64_t k = a / p->chunk; k * p->chunk < b; k++) {
        if (epoch && r->synced[k] == epoch)
            continue;
        r->synced[k] = epoch;
        uint64_t cb = (k + 1) * p->chunk < r->size ? (k + 1) * p->chunk : r->size;
        for (uint64_t i = k * p->chunk; i < cb; i++)
            for (uint32_t l = 1; l <= p->ndev && r->valid[0][i]; l++)
                r->valid[l][i] = r->xvalid[l][i] = 0;
        p->whole_syncs++;
    }
}

/* The buffer-info query syncs the whole root first. */
static void info_get(prog *p, mroot *r, mt_coh_buf h, mt_coh_buffer_info *bi)
{
    MT_CHECK_OK(mt_coh_buffer_info_get(p->cl, h, bi));
    sync_whole(p, r, 0, r->size, 0);
}

/* ---- a plugged-in backend: host memory with random delays --------------------
 * Copies and commands sleep a random few tens of microseconds, so missing
 * dependencies (a command overtaking the copy it needs) show up as wrong
 * content instead of hiding behind fast engines. Asynchronous: submit
 * queues, the completer's wait does the work, in submission order per
 * engine: two thirds of the jitter devices say so (MT_COH_CAP_IN_ORDER), and
 * the context then submits a command before the same engine's commands it
 * depends on have completed; half of those also let the planner submit for
 * their copy engine (MT_COH_CAP_SUBMIT_ANY_THREAD). */
typedef struct jdev {
    tk_hostmem hm;
    _Atomic uint64_t rng;
    _Atomic int submitting[2]; /* threads in j_submit, per engine: at most one */
} jdev;

/* The thread running the programs (the planner's): a submit there is the
 * planner taking an idle copy engine's turn (MT_COH_CAP_SUBMIT_ANY_THREAD),
 * counted to show the programs reach that path. */
static _Thread_local int is_app_thread;
static _Atomic uint64_t app_thread_submits;

static void jsleep(jdev *j)
{
    uint64_t x = atomic_fetch_add(&j->rng, 0x9e3779b97f4a7c15ull);
    x ^= x >> 29;
    if (x % 3 == 0)
        usleep((useconds_t)(x % 60));
}

static int j_grow(void *dev, uint64_t min_size, uint64_t *base, uint64_t *size)
{
    return tk_hostmem_grow(&((jdev *)dev)->hm, min_size, base, size);
}

static void j_release(void *dev, uint64_t base, uint64_t size)
{
    (void)base;
    (void)size;
    tk_hostmem_release(&((jdev *)dev)->hm);
}

static int j_submit(void *dev, int engine, mt_coh_op *op)
{
    jdev *j = dev;
    (void)op;
    /* Submits for one engine are one at a time (the contract in
     * coherence.h), also when the planner submits for an idle copy engine
     * while the engine's own thread wakes up: a sleep here now and then
     * widens the window in which two would meet. */
    if (atomic_fetch_add(&j->submitting[engine], 1)) {
        fprintf(stderr, "jitter: two threads submit for engine %d at once\n", engine);
        abort();
    }
    if (is_app_thread)
        atomic_fetch_add(&app_thread_submits, 1);
    jsleep(j);
    atomic_fetch_sub(&j->submitting[engine], 1);
    return 1; /* the work happens in wait, on the completer thread */
}

static int j_wait(void *dev, int engine, mt_coh_op *op)
{
    (void)engine;
    jsleep(dev);
    return tk_host_op(op);
}

static void j_destroy(void *dev)
{
    jdev *j = dev;
    tk_hostmem_release(&j->hm);
    free(j);
}

/* The same functions, with and without MT_COH_CAP_IN_ORDER. */
#define JITTER_BACKEND(caps_in_order)                                                          \
    {.name = "jitter",                                                                        \
     .caps = MT_COH_CAP_ASYNC | MT_COH_CAP_HOST_MEMORY | (caps_in_order),                     \
     .mem_grow = j_grow,                                                                      \
     .mem_release = j_release,                                                                \
     .submit = j_submit,                                                                      \
     .wait = j_wait,                                                                          \
     .destroy = j_destroy}
static const mt_coh_backend jitter_backend = JITTER_BACKEND(0);
static const mt_coh_backend jitter_in_order_backend = JITTER_BACKEND(MT_COH_CAP_IN_ORDER);
static const mt_coh_backend jitter_any_thread_backend =
    JITTER_BACKEND(MT_COH_CAP_IN_ORDER | MT_COH_CAP_SUBMIT_ANY_THREAD);

/* ---- application-level ordering: writers and readers per buffer ------------- */

static void add_deps(mroot *r, int write, mt_coh_event **deps, uint32_t *nd)
{
    if (r->writer)
        deps[(*nd)++] = r->writer;
    if (write)
        for (int i = 0; i < r->nreaders; i++)
            deps[(*nd)++] = r->readers[i];
}

static void note_access(mroot *r, int write, mt_coh_event *ev)
{
    if (write) {
        mt_coh_event_release(r->writer);
        for (int i = 0; i < r->nreaders; i++)
            mt_coh_event_release(r->readers[i]);
        r->nreaders = 0;
        mt_coh_event_retain(ev);
        r->writer = ev;
    } else if (r->nreaders < MAXREAD) {
        mt_coh_event_retain(ev);
        r->readers[r->nreaders++] = ev;
    } else { /* too many readers to track: wait for them, keep this one */
        for (int i = 0; i < r->nreaders; i++) {
            MT_CHECK_OK(mt_coh_event_wait(r->readers[i], -1));
            mt_coh_event_release(r->readers[i]);
        }
        mt_coh_event_retain(ev);
        r->readers[0] = ev;
        r->nreaders = 1;
    }
}

static void quiesce(mroot *r)
{
    if (r->writer)
        MT_CHECK_OK(mt_coh_event_wait(r->writer, -1));
    for (int i = 0; i < r->nreaders; i++)
        MT_CHECK_OK(mt_coh_event_wait(r->readers[i], -1));
}

static void check_pending(prog *p, int all)
{
    int keep = 0;
    for (int i = 0; i < p->np; i++) {
        pend *x = &p->p[i];
        if (!all && mt_coh_event_status(x->ev) == 1) {
            p->p[keep++] = *x;
            continue;
        }
        MT_CHECK_OK(mt_coh_event_wait(x->ev, -1));
        MT_CHECK(atomic_load(&x->k->ran));
        for (uint32_t a = 0; a < x->k->nargs; a++)
            if (x->k->access[a] & MT_COH_READ)
                MT_CHECK_UINT_EQ(x->k->seen[a], x->want[a]);
        mt_coh_event_release(x->ev);
        free(x->k);
    }
    p->np = keep;
}

/* ---- buffers ------------------------------------------------------------------------ */

static int pick_view(prog *p, mroot **pr, mview **pv)
{
    int live[MAXROOT * MAXVIEW][2], n = 0;
    for (int i = 0; i < MAXROOT; i++)
        for (int j = 0; j < MAXVIEW; j++)
            if (p->r[i].live && p->r[i].v[j].live) {
                live[n][0] = i;
                live[n][1] = j;
                n++;
            }
    if (!n)
        return 0;
    int k = (int)rnd(p, (uint64_t)n);
    *pr = &p->r[live[k][0]];
    *pv = &(*pr)->v[live[k][1]];
    return 1;
}

static void create_root(prog *p)
{
    mroot *r = NULL;
    for (int i = 0; i < MAXROOT; i++)
        if (!p->r[i].live) {
            r = &p->r[i];
            break;
        }
    if (!r)
        return;
    memset(r, 0, sizeof *r);
    uint64_t size = 1 + rnd(p, 6) * 4096 + rnd(p, 3) * 64 + rnd(p, 2) * rnd(p, 4096);
    r->size = size;
    r->content = calloc(1, size);
    r->synced = calloc(size / p->chunk + 1, sizeof *r->synced);
    for (uint32_t l = 0; l <= p->ndev; l++) {
        r->valid[l] = calloc(1, size);
        r->xvalid[l] = calloc(1, size);
    }
    memset(r->valid[0], 1, size);
    memset(r->xvalid[0], 1, size);
    mt_coh_buffer_opts bo = {0};
    int kind = (int)rnd(p, 4);
    if (kind == 1 || kind == 3) { /* USE_HOST_PTR, maybe tracked */
        r->hostlen = (size + 4095) & ~(size_t)4095;
        r->hostptr =
            mmap(NULL, r->hostlen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        MT_CHECK(r->hostptr != MAP_FAILED);
        for (uint64_t i = 0; i < size; i++)
            r->hostptr[i] = r->content[i] = (uint8_t)rnd(p, 256);
        bo.flags = MT_COH_BUF_USE_HOST_PTR;
        bo.host_ptr = r->hostptr;
        if (kind == 3) {
            bo.flags |= MT_COH_BUF_TRACK_HOST;
            r->tracked = 1;
        }
    } else if (kind == 2) {
        uint8_t *init = malloc(size);
        for (uint64_t i = 0; i < size; i++)
            init[i] = r->content[i] = (uint8_t)rnd(p, 256);
        bo.flags = MT_COH_BUF_COPY_HOST_PTR;
        bo.host_ptr = init;
        MT_CHECK_OK(mt_coh_buffer_create(p->cl, size, &bo, &r->v[0].h));
        free(init);
        goto made;
    }
    MT_CHECK_OK(mt_coh_buffer_create(p->cl, size, &bo, &r->v[0].h));
    if (r->tracked && !p->status_checked) {
        /* The tracker exists now (the interposer attaches then): pages are
         * tracked with uffd, and with the signal tracker only where the
         * interposer serves the application's calls. */
        int want = p->backend == MT_TRACK_UFFD || mt_track_preload_status() == 1;
        MT_CHECK_INT_EQ(mt_coh_track_status(p->c), want);
        p->whole = !want;
        p->status_checked = 1;
    }
made:
    r->v[0].size = size;
    r->v[0].live = 1;
    r->live = 1;
}

static void free_root(prog *p, mroot *r)
{
    for (int j = 0; j < MAXVIEW; j++)
        if (r->v[j].live)
            MT_CHECK_OK(mt_coh_buffer_free(p->cl, r->v[j].h));
    /* Freed while commands may still use it: they complete normally. */
    check_pending(p, 0);
    mt_coh_event_release(r->writer);
    for (int i = 0; i < r->nreaders; i++)
        mt_coh_event_release(r->readers[i]);
    if (r->hostptr) { /* the library may still read it until its commands finish */
        check_pending(p, 1);
        munmap(r->hostptr, r->hostlen);
    }
    free(r->content);
    free(r->synced);
    for (uint32_t l = 0; l <= p->ndev; l++) {
        free(r->valid[l]);
        free(r->xvalid[l]);
    }
    memset(r, 0, sizeof *r);
}

static void sub_op(prog *p)
{
    mroot *r;
    mview *v;
    if (!pick_view(p, &r, &v))
        return;
    for (int j = 1; j < MAXVIEW; j++)
        if (!r->v[j].live) {
            uint64_t off = rnd(p, v->size), size = 1 + rnd(p, v->size - off);
            MT_CHECK_OK(mt_coh_subbuffer_create(p->cl, v->h, off, size, 0, &r->v[j].h));
            r->v[j] = (mview){r->v[j].h, v->off + off, size, 1};
            return;
        }
    int j = 1 + (int)rnd(p, MAXVIEW - 1);
    MT_CHECK_OK(mt_coh_buffer_free(p->cl, r->v[j].h));
    r->v[j].live = 0;
}

/* ---- commands ------------------------------------------------------------------------ */

/* The enqueue evicted instances at device d: whole buffers whose copy at d
 * the library dropped. Each must have been valid somewhere else too. */
static void evicted(prog *p, uint32_t d)
{
    for (int i = 0; i < MAXROOT; i++) {
        mroot *r = &p->r[i];
        if (!r->live)
            continue;
        mt_coh_buffer_info bi;
        info_get(p, r, r->v[0].h, &bi);
        if (bi.any_mask & (1ull << d))
            continue;
        for (uint64_t b = 0; b < r->size; b++) {
            if (!r->valid[d][b])
                continue;
            MT_CHECK(mask_at(p, r, b) & ~(1ull << d)); /* valid elsewhere */
            r->valid[d][b] = 0;
        }
        memset(r->xvalid[d], 0, r->size);
    }
}

/* Moves [*off, *off + *size) of view v to granule boundaries of its root
 * (or the root's end); 0 when the view holds no whole granule. */
static int aligned_range(prog *p, const mroot *r, const mview *v, uint64_t *off, uint64_t *size)
{
    uint64_t g = gran(p, r);
    uint64_t lo = (v->off + g - 1) / g * g, hi = (v->off + v->size) / g * g;
    if (v->off + v->size == r->size)
        hi = r->size;
    if (hi <= lo)
        return 0;
    uint64_t n = (hi - lo + g - 1) / g; /* granules (the last may be short) */
    uint64_t first = rnd(p, n), count = 1 + rnd(p, n - first);
    uint64_t a = lo + first * g, b = lo + (first + count) * g;
    if (b > hi)
        b = hi;
    *off = a - v->off;
    *size = b - a;
    return 1;
}

static void command(prog *p)
{
    /* Half the time the device of the previous command: back-to-back
     * readers of one device race with the copies the first one caused. */
    static uint32_t last = 1;
    uint32_t d = rnd(p, 2) && last <= p->ndev && p->alive[last] ? last : pick_dev(p, 1);
    last = d;
    /* Mostly 1-3 arguments; sometimes up to 8, several on one buffer. */
    uint32_t n = rnd(p, 8) ? 1 + (uint32_t)rnd(p, 3) : 4 + (uint32_t)rnd(p, TK_MAX - 3);
    mt_coh_arg args[TK_MAX];
    mroot *roots[TK_MAX];
    tk_cmd *k = calloc(1, sizeof *k);
    pend x = {.k = k};
    mt_coh_event *deps[TK_MAX * (MAXREAD + 1)];
    uint32_t nd = 0;
    for (uint32_t i = 0; i < n; i++) {
        mview *v;
        if (!pick_view(p, &roots[i], &v)) {
            free(k);
            return;
        }
        uint64_t off = rnd(p, 2) ? 0 : rnd(p, v->size);
        uint64_t size = rnd(p, 3) ? v->size - off : 1 + rnd(p, v->size - off);
        uint32_t acc = 1 + (uint32_t)rnd(p, 3);
        if ((acc & MT_COH_WRITE) && p->aligned && !aligned_range(p, roots[i], v, &off, &size))
            acc = MT_COH_READ;
        args[i] = (mt_coh_arg){.buf = v->h, .offset = off, .size = size, .access = acc};
        k->access[i] = acc;
        k->pattern[i] = mt_test_rand(&p->rng);
        add_deps(roots[i], acc & MT_COH_WRITE, deps, &nd);
    }
    k->nargs = n;
    uint64_t abs_off[TK_MAX];
    for (uint32_t i = 0; i < n; i++) {
        mroot *r = roots[i];
        mview *v = NULL;
        for (int j = 0; j < MAXVIEW; j++)
            if (r->v[j].live && r->v[j].h == args[i].buf)
                v = &r->v[j];
        abs_off[i] = v->off + args[i].offset;
        if (args[i].access & MT_COH_READ)
            x.want[i] = tk_hash(r->content + abs_off[i], args[i].size);
    }
    /* Refused, changing nothing: on a lost device, or where an argument
     * would fetch bytes no location holds any more. */
    int expect = p->alive[d] ? 0 : MT_EDEVLOST;
    for (uint32_t i = 0; i < n && !expect; i++) {
        uint64_t a, b, o = abs_off[i], e = o + args[i].size;
        widen(p, roots[i], o, args[i].size, &a, &b);
        if (access_lost(p, roots[i], args[i].access, o, e, a, b))
            expect = MT_ELOSTDATA;
    }
    /* Now and then the command itself fails (its function returns an
     * error): what it was to write is then lost. */
    if (p->faults && rnd(p, 12) == 0)
        k->fail = -EPROTO;
    mt_coh_stats st0, st1;
    MT_CHECK_OK(mt_coh_stats_get(p->c, &st0));
    mt_coh_command cmd = {.fn = tk_run, .user = k, .args = args, .nargs = n,
                          .wait = deps, .nwait = nd};
    int rc = mt_coh_enqueue(rnd(p, 2) ? p->q2[d] : p->q[d], &cmd, &x.ev);
    if (expect) {
        MT_CHECK_ERR(rc, expect);
        p->lost_refused++;
        free(k);
        return;
    }
    if (rc == MT_EDEVMEM && p->small) {
        /* No room: refused. Content and validity are as before (the checks
         * that follow see any change); copies evicted while looking for
         * room (fragmentation) were valid elsewhere. */
        p->refused++;
        free(k);
        MT_CHECK_OK(mt_coh_stats_get(p->c, &st1));
        if (st1.evictions != st0.evictions)
            evicted(p, d);
        return;
    }
    MT_CHECK_OK(rc);
    MT_CHECK_OK(mt_coh_stats_get(p->c, &st1));
    if (st1.evictions != st0.evictions)
        evicted(p, d);
    uint64_t want_in = 0, want_relay = 0, minimum = 0;
    p->epoch++;
    /* Fetch, argument by argument, then the writes (the library's order). */
    for (uint32_t i = 0; i < n; i++) {
        mroot *r = roots[i];
        uint64_t a, b, o = abs_off[i], e = abs_off[i] + args[i].size;
        widen(p, r, o, args[i].size, &a, &b);
        sync_whole(p, r, a, b, p->epoch); /* host writes first, argument by argument */
        if (args[i].access & MT_COH_READ) {
            minimum += xfetch(r, d, o, args[i].size);
            want_in += fetch(p, r, d, a, b, &want_relay);
        } else if (p->pocl && (o > 0 || e < r->size)) { /* PoCL: a partial write fetches all */
            want_in += fetch(p, r, d, a, b, &want_relay);
        } else {
            if (a < o)
                want_in += fetch(p, r, d, a, o, &want_relay);
            if (e < b)
                want_in += fetch(p, r, d, e, b, &want_relay);
        }
    }
    for (uint32_t i = 0; i < n; i++) {
        if (!(args[i].access & MT_COH_WRITE))
            continue;
        mroot *r = roots[i];
        uint64_t a, b;
        widen(p, r, abs_off[i], args[i].size, &a, &b);
        own(p, r, d, a, b);
        xown(p, r, d, abs_off[i], abs_off[i] + args[i].size);
        tk_fill(r->content + abs_off[i], args[i].size, k->pattern[i]);
    }
    mt_coh_event_info info;
    MT_CHECK_OK(mt_coh_event_info_get(x.ev, &info));
    MT_CHECK_UINT_EQ(info.bytes_in, want_in);
    MT_CHECK_UINT_EQ(info.bytes_relay, want_relay);
    /* Against a byte-exact manager: at most one granule more per end of
     * each argument (when writes are granule-aligned; unaligned writes
     * invalidate whole granules elsewhere, which the count above covers). */
    uint64_t slack = 0;
    for (uint32_t i = 0; i < n; i++)
        slack += 2 * (gran(p, roots[i]) - 1);
    if (p->aligned && !p->pocl) /* PoCL's rule moves whole buffers by design */
        MT_CHECK(info.bytes_in <= minimum + slack);
    p->minimum += minimum;
    p->moved += info.bytes_in;
    p->relayed += info.bytes_relay;
    p->commands++;
    if (k->fail) {
        /* Its migrations ran (the fetched bytes stay valid at d); its
         * writes never happened: once the failure is seen, the library
         * clears d over the (widened) ranges it was to write, which no
         * other location held any more. Waited for here, so the next
         * enqueue finds the failure's fixup and the model stays exact. */
        MT_CHECK_ERR(mt_coh_event_wait(x.ev, -1), -EPROTO);
        MT_CHECK(!atomic_load(&k->ran));
        for (uint32_t i = 0; i < n; i++) {
            if (!(args[i].access & MT_COH_WRITE))
                continue;
            mroot *r = roots[i];
            uint64_t a, b;
            widen(p, r, abs_off[i], args[i].size, &a, &b);
            memset(r->valid[d] + a, 0, b - a);
            memset(r->xvalid[d] + abs_off[i], 0, args[i].size);
        }
        mt_coh_event_release(x.ev);
        free(k);
        p->failed++;
        return;
    }
    for (uint32_t i = 0; i < n; i++)
        note_access(roots[i], args[i].access & MT_COH_WRITE, x.ev);
    if (p->np == MAXPEND)
        check_pending(p, 1);
    p->p[p->np++] = x;
}

static void map_op(prog *p)
{
    mroot *r;
    mview *v;
    if (!pick_view(p, &r, &v))
        return;
    uint64_t off = rnd(p, 2) ? 0 : rnd(p, v->size);
    uint64_t size = rnd(p, 2) ? v->size - off : 1 + rnd(p, v->size - off);
    uint32_t acc = 1 + (uint32_t)rnd(p, 3);
    if ((acc & MT_COH_WRITE) && p->aligned && !aligned_range(p, r, v, &off, &size))
        acc = MT_COH_READ;
    mt_coh_event *deps[MAXREAD + 1];
    uint32_t nd = 0;
    add_deps(r, acc & MT_COH_WRITE, deps, &nd);
    uint64_t o = v->off + off, a, b, relay = 0, want = 0;
    widen(p, r, o, size, &a, &b);
    mt_coh_arg t = {.buf = v->h, .offset = off, .size = size, .access = acc};
    void *ptr;
    mt_coh_event *ev;
    if (access_lost(p, r, acc, o, o + size, a, b)) {
        MT_CHECK_ERR(mt_coh_map(p->q[pick_dev(p, 0)], &t, deps, nd, &ptr, &ev), MT_ELOSTDATA);
        p->lost_refused++;
        return;
    }
    sync_whole(p, r, a, b, ++p->epoch);
    if (acc & MT_COH_READ) {
        want = fetch(p, r, 0, a, b, &relay);
        xfetch(r, 0, o, size);
    } else if (p->pocl && (o > 0 || o + size < r->size)) {
        want = fetch(p, r, 0, a, b, &relay);
    } else {
        if (a < o)
            want += fetch(p, r, 0, a, o, &relay);
        if (o + size < b)
            want += fetch(p, r, 0, o + size, b, &relay);
    }
    MT_CHECK_OK(mt_coh_map(p->q[pick_dev(p, 0)], &t, deps, nd, &ptr, &ev));
    mt_coh_event_info info;
    MT_CHECK_OK(mt_coh_event_info_get(ev, &info));
    MT_CHECK_UINT_EQ(info.bytes_in, want);
    MT_CHECK_OK(mt_coh_event_wait(ev, -1));
    if (acc & MT_COH_READ)
        MT_CHECK_MEM_EQ(ptr, r->content + o, size);
    /* A second writing map of the range is refused while this one lives. */
    mt_coh_arg t2 = {.buf = v->h, .offset = off, .size = 1, .access = MT_COH_WRITE};
    void *ptr2;
    MT_CHECK_ERR(mt_coh_map(p->q[pick_dev(p, 0)], &t2, NULL, 0, &ptr2, NULL), -EBUSY);
    if (acc & MT_COH_WRITE) {
        for (uint64_t i = 0; i < size; i++)
            ((uint8_t *)ptr)[i] = r->content[o + i] = (uint8_t)rnd(p, 256);
        own(p, r, 0, a, b);
        xown(p, r, 0, o, o + size);
    }
    note_access(r, acc & MT_COH_WRITE, ev);
    mt_coh_event_release(ev);
    mt_coh_event *uev;
    uint32_t ud = pick_dev(p, 0);
    MT_CHECK_OK(mt_coh_unmap(p->q[ud], ptr, &uev));
    MT_CHECK_ERR(mt_coh_unmap(p->q[ud], ptr, NULL), -ENOENT);
    MT_CHECK_OK(mt_coh_event_wait(uev, -1));
    mt_coh_event_release(uev);
    p->maps++;
}

/* The host writes a tracked buffer directly: after making sure it holds the
 * latest content of the pages it touches (a read map), as the rules ask. */
static void host_write(prog *p)
{
    mroot *r = NULL;
    for (int i = 0; i < MAXROOT && !r; i++) {
        int j = (int)((i + rnd(p, MAXROOT)) % MAXROOT);
        if (p->r[j].live && p->r[j].tracked)
            r = &p->r[j];
    }
    if (!r)
        return;
    quiesce(r);
    uint64_t off = rnd(p, r->size), size = 1 + rnd(p, r->size - off > 9000 ? 9000 : r->size - off);
    uint64_t pa = off / p->page * p->page, pb = (off + size + p->page - 1) / p->page * p->page;
    if (pb > r->size)
        pb = r->size;
    mt_coh_arg t = {.buf = r->v[0].h, .offset = pa, .size = pb - pa, .access = MT_COH_READ};
    void *ptr;
    mt_coh_event *ev;
    uint64_t wa, wb; /* [pa, pb), or the whole buffer under PoCL's rule */
    widen(p, r, pa, pb - pa, &wa, &wb);
    uint32_t qd = pick_dev(p, 0);
    if (has_lost(p, r, wa, wb)) { /* nothing to read first: refused */
        MT_CHECK_ERR(mt_coh_map(p->q[qd], &t, NULL, 0, &ptr, &ev), MT_ELOSTDATA);
        p->lost_refused++;
        return;
    }
    sync_whole(p, r, wa, wb, ++p->epoch);
    uint64_t relay = 0, want = fetch(p, r, 0, wa, wb, &relay);
    xfetch(r, 0, pa, pb - pa);
    MT_CHECK_OK(mt_coh_map(p->q[qd], &t, NULL, 0, &ptr, &ev));
    mt_coh_event_info info;
    MT_CHECK_OK(mt_coh_event_info_get(ev, &info));
    MT_CHECK_UINT_EQ(info.bytes_in, want);
    MT_CHECK_OK(mt_coh_event_wait(ev, -1));
    mt_coh_event_release(ev);
    MT_CHECK_OK(mt_coh_unmap(p->q[qd], ptr, NULL));
    MT_CHECK_MEM_EQ(r->hostptr + pa, r->content + pa, pb - pa);
    for (uint64_t i = off; i < off + size; i++)
        r->hostptr[i] = r->content[i] = (uint8_t)rnd(p, 256);
    own(p, r, 0, pa, pb);
    xown(p, r, 0, pa, pb);
    p->hostwrites++;
}

static void check_validity(prog *p)
{
    mroot *r;
    mview *v;
    if (!pick_view(p, &r, &v))
        return;
    mt_coh_buffer_info bi;
    info_get(p, r, v->h, &bi);
    uint64_t all = ~0ull, any = 0;
    for (uint64_t i = v->off; i < v->off + v->size; i++) {
        uint64_t m = mask_at(p, r, i);
        all &= m;
        any |= m;
    }
    MT_CHECK_UINT_EQ(bi.valid_mask, all);
    MT_CHECK_UINT_EQ(bi.any_mask, any);
    MT_CHECK_UINT_EQ(bi.lost_bytes, count_lost(p, r, v->off, v->off + v->size));
}

static void final_check(prog *p)
{
    check_pending(p, 1);
    for (int i = 0; i < MAXROOT; i++) {
        mroot *r = &p->r[i];
        if (!r->live)
            continue;
        quiesce(r);
        /* Every stretch that is not lost (lost ones cannot be read). */
        for (uint64_t s = 0, e; s < r->size; s = e) {
            int lost = !mask_at(p, r, s);
            for (e = s + 1; e < r->size && (mask_at(p, r, e) == 0) == lost; e++)
                ;
            if (lost)
                continue;
            mt_coh_arg t = {.buf = r->v[0].h, .offset = s, .size = e - s, .access = MT_COH_READ};
            void *ptr;
            mt_coh_event *ev;
            uint32_t qd = pick_dev(p, 0);
            MT_CHECK_OK(mt_coh_map(p->q[qd], &t, NULL, 0, &ptr, &ev));
            MT_CHECK_OK(mt_coh_event_wait(ev, -1));
            MT_CHECK_MEM_EQ(ptr, r->content + s, e - s);
            mt_coh_event_release(ev);
            MT_CHECK_OK(mt_coh_unmap(p->q[qd], ptr, NULL));
        }
    }
}

/* A simulated device is lost while nothing is pending (so the model knows
 * which commands saw it). The first enqueue on it finds it lost (or is
 * refused); from then on its copies count nowhere: what only it held is
 * lost until overwritten, and enqueues on it are refused. */
static void lose_device(prog *p)
{
    uint32_t cand[NLOC], nc = 0, nalive = 0;
    for (uint32_t d = 1; d <= p->ndev; d++) {
        nalive += (uint32_t)p->alive[d];
        if (p->alive[d] && p->is_sim[d])
            cand[nc++] = d;
    }
    if (!nc || nalive < 3)
        return;
    uint32_t d = cand[rnd(p, nc)];
    check_pending(p, 1);
    for (int i = 0; i < MAXROOT; i++)
        if (p->r[i].live)
            quiesce(&p->r[i]);
    mt_sim_lose(mt_coh_device_sim(p->c, d));
    tk_cmd k = {0};
    mt_coh_command cmd = {.fn = tk_run, .user = &k};
    mt_coh_event *ev = NULL;
    int rc = mt_coh_enqueue(p->q[d], &cmd, &ev);
    if (rc == 0) {
        MT_CHECK_ERR(mt_coh_event_wait(ev, -1), MT_EDEVLOST);
        mt_coh_event_release(ev);
    } else
        MT_CHECK_ERR(rc, MT_EDEVLOST);
    MT_CHECK(!atomic_load(&k.ran));
    mt_coh_device_info di;
    MT_CHECK_OK(mt_coh_device_info_get(p->c, d, &di));
    MT_CHECK_INT_EQ(di.lost, MT_EDEVLOST);
    p->alive[d] = 0;
    for (int i = 0; i < MAXROOT; i++) {
        mroot *r = &p->r[i];
        if (!r->live)
            continue;
        memset(r->valid[d], 0, r->size);
        memset(r->xvalid[d], 0, r->size);
    }
    p->losses++;
}

static int use_cuda; /* MT_COH_TEST_CUDA=1: GPUs join every program (device runs) */

static void run_program(uint64_t seed, int ops)
{
    prog *p = calloc(1, sizeof *p);
    p->rng = seed;
    p->ndev = 2 + (uint32_t)rnd(p, MAXDEV - 1);
    p->G = 16u << rnd(p, 5); /* 16 .. 256 */
    p->page = (uint64_t)sysconf(_SC_PAGESIZE);
    p->aligned = (int)rnd(p, 2);
    p->small = rnd(p, 3) == 0;
    p->pocl = rnd(p, 6) == 0; /* the public MT_COH_WHOLE_BUFFER flag, now and then */
    p->faults = rnd(p, 3) == 0;
    p->backend = mt_track_backend_available(MT_TRACK_UFFD) && rnd(p, 2) ? MT_TRACK_UFFD
                                                                      : MT_TRACK_SIGNAL;
    p->chunk = 2 * p->page;
    uint64_t devmem = p->small ? 48u << 10 : 1u << 20;
    /* Small pieces half the time: a tracked upload is then issued in many
     * pieces, the first ones early (and by the planner itself on a
     * jitter device that lets it submit). */
    mt_coh_opts o = {.flags = p->pocl ? MT_COH_WHOLE_BUFFER : 0u, .granularity = p->G, .track_chunk = p->chunk, .track_backend = p->backend,
                     .pipeline_bytes = rnd(p, 2) ? 0 : 2 * p->page};
    MT_CHECK_OK(mt_coh_create(&o, &p->c));
    p->is_host[0] = 1;
    int nsim = 0;
    uint32_t d0 = 1;
    if (use_cuda) { /* the GPU twice (two devices, direct copies between them) */
        uint32_t first, n;
        mt_coh_cuda_opts co = {.repeat = 2, .max_devices = 1, .mem_limit = devmem};
        MT_CHECK_OK(mt_coh_add_cuda_devices(p->c, &co, &first, &n));
        MT_CHECK(first == 1 && n == 2);
        p->peer[1] = p->peer[2] = 1;
        d0 = 3;
        if (p->ndev < 3)
            p->ndev = 3;
    }
    for (uint32_t d = d0; d <= p->ndev; d++) {
        uint32_t id;
        int kind = d == p->ndev && !nsim ? 0 : (int)rnd(p, 3);
        int host = kind != 0;
        if (kind == 1)
            MT_CHECK_OK(mt_coh_add_host_device(p->c, devmem, &id));
        else if (kind == 2) {
            jdev *j = calloc(1, sizeof *j);
            j->hm.size = devmem;
            atomic_init(&j->rng, mt_test_rand(&p->rng));
            mt_coh_device_opts dopt = {.name = "jitter"};
            uint64_t x = rnd(p, 3);
            const mt_coh_backend *be = x == 0   ? &jitter_backend
                                       : x == 1 ? &jitter_in_order_backend
                                                : &jitter_any_thread_backend;
            MT_CHECK_OK(mt_coh_device_add(p->c, be, j, &dopt, &id));
        } else {
            mt_sim_opts so = {.mem_size = devmem};
            MT_CHECK_OK(mt_coh_add_sim_device(p->c, &so, &id));
            nsim++;
        }
        MT_CHECK_UINT_EQ(id, d);
        p->is_host[d] = host;
        p->is_sim[d] = kind == 0;
    }
    MT_CHECK_OK(mt_coh_client_create(p->c, &p->cl));
    for (uint32_t d = 1; d <= p->ndev; d++)
        p->alive[d] = 1;
    for (uint32_t d = 1; d <= p->ndev; d++) {
        MT_CHECK_OK(mt_coh_queue_create(p->cl, d, &p->q[d]));
        MT_CHECK_OK(mt_coh_queue_create(p->cl, d, &p->q2[d]));
    }
    for (int i = 0; i < 3; i++)
        create_root(p);
    for (int op = 0; op < ops; op++) {
        uint64_t x = rnd(p, 100);
        if (x < 55)
            command(p);
        else if (x < 68)
            map_op(p);
        else if (x < 76)
            host_write(p);
        else if (x < 84)
            sub_op(p);
        else if (x < 88) {
            int i = (int)rnd(p, MAXROOT);
            if (p->r[i].live)
                free_root(p, &p->r[i]);
            create_root(p);
        } else if (x < 96)
            check_validity(p);
        else if (p->faults && x == 99 && rnd(p, 3) == 0)
            lose_device(p);
        else
            check_pending(p, 0);
    }
    final_check(p);
    mt_coh_stats st;
    MT_CHECK_OK(mt_coh_stats_get(p->c, &st));
    printf("  devices %u%s (granule %llu%s%s): %llu commands, %llu maps, %llu host writes, %llu bytes in "
           "(exact minimum %llu), %llu relayed, %llu evictions, %llu refused; %s tracker%s\n",
           p->ndev, p->small ? " with little memory" : "", (unsigned long long)p->G,
           p->aligned ? ", aligned writes" : "", p->pocl ? ", PoCL's whole-buffer rule" : "",
           (unsigned long long)p->commands,
           (unsigned long long)p->maps, (unsigned long long)p->hostwrites,
           (unsigned long long)p->moved, (unsigned long long)p->minimum,
           (unsigned long long)p->relayed,
           (unsigned long long)st.evictions, (unsigned long long)p->refused,
           mt_track_backend_name(p->backend), p->whole ? " (no page tracking)" : "");
    if (p->whole)
        printf("  %llu chunks synced whole\n", (unsigned long long)p->whole_syncs);
    if (p->faults)
        printf("  faults: %llu commands failed, %llu devices lost, %llu accesses refused on "
               "lost content or devices\n",
               (unsigned long long)p->failed, (unsigned long long)p->losses,
               (unsigned long long)p->lost_refused);
    for (int i = 0; i < MAXROOT; i++)
        if (p->r[i].live)
            free_root(p, &p->r[i]);
    mt_coh_client_destroy(p->cl);
    mt_coh_destroy(p->c);
    free(p);
}

int main(int argc, char **argv)
{
    uint64_t seed = mt_test_seed(argc, argv);
    int programs = 12, ops = 400;
    for (int i = 1; i + 1 < argc; i++) {
        if (strcmp(argv[i], "--programs") == 0)
            programs = atoi(argv[i + 1]);
        if (strcmp(argv[i], "--ops") == 0)
            ops = atoi(argv[i + 1]);
    }
#ifdef MT_SANITIZER_BUILD
    programs = programs > 6 ? 6 : programs;
#endif
    use_cuda = tk_cuda_wanted();
    if (use_cuda < 0)
        return 77;
    is_app_thread = 1;
    for (int i = 0; i < programs; i++) {
        uint64_t s = seed + (uint64_t)i * 0x9e3779b97f4a7c15ull;
        printf("program %d (seed %llu)\n", i, (unsigned long long)s);
        fflush(stdout);
        run_program(s, ops);
    }
    /* How often the programs reached that path (some seeds make no such
     * device; test_coherence_track checks it is taken). */
    printf("submits by the planner's thread: %llu\n", (unsigned long long)app_thread_submits);
    puts("random: ok");
    return 0;
}
