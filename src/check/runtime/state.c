/* The interposer's state: start-up, allocation table, reports, exit. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "hooks.h"
#include "rt.h"

rt _mt_rt = {.lock = PTHREAD_MUTEX_INITIALIZER};

void _mt_rt_logf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfprintf(_mt_rt.log ? _mt_rt.log : stderr, fmt, ap);
    va_end(ap);
    fflush(_mt_rt.log ? _mt_rt.log : stderr);
}

CUstream _mt_rt_stream(int slot, CUstream s)
{
    return slot == 1 && s == NULL ? CU_STREAM_PER_THREAD : s;
}

static uint64_t env_u64(const char *name, uint64_t dflt)
{
    const char *v = getenv(name);
    return v && *v ? strtoull(v, NULL, 0) : dflt;
}

static void at_exit(void);

static void read_options(rt *r)
{
    static int done;
    if (done)
        return;
    done = 1;
    r->redzone = env_u64("MEMTRACK_CHECK_REDZONE", 512);
    r->redzone = (r->redzone + 255) & ~255ull; /* keeps cudaMalloc's 256-byte alignment */
    r->init_check = (int)env_u64("MEMTRACK_CHECK_INIT", 1);
    r->verbose = (int)env_u64("MEMTRACK_CHECK_VERBOSE", 0);
    r->sync_launch = (int)env_u64("MEMTRACK_CHECK_SYNC", 0);
    const char *log = getenv("MEMTRACK_CHECK_LOG");
    if (log && *log)
        r->log = fopen(log, "a");
    r->result_path = getenv("MEMTRACK_CHECK_RESULT");
}

int _mt_rt_ready(void)
{
    rt *r = &_mt_rt;
    int st = atomic_load_explicit(&r->state, memory_order_acquire); /* pairs with the stores below */
    if (st)
        return st > 0;
    pthread_mutex_lock(&r->lock);
    if ((st = atomic_load_explicit(&r->state, memory_order_relaxed)) != 0) { /* the lock orders it */
        pthread_mutex_unlock(&r->lock);
        return st > 0;
    }
    _mt_hooks_resolve();
    const mt_cu *cu = _mt_cu();
    if (!cu) {
        atomic_store_explicit(&r->state, -1, memory_order_release);
        pthread_mutex_unlock(&r->lock);
        return 0;
    }
    read_options(r);
    CUcontext ctx = NULL, pushed = NULL;
    if (cu->CtxGetCurrent(&ctx) || !ctx) {
        /* Nothing current yet (a library loaded before the first call that
         * needs a context): use the primary context, as the CUDA runtime will. */
        CUdevice dev;
        if (cu->DeviceGet(&dev, 0) || cu->DevicePrimaryCtxRetain(&pushed, dev) || cu->CtxPushCurrent(pushed)) {
            pthread_mutex_unlock(&r->lock);
            return 0; /* try again on a later call */
        }
    }
    int rc = _mt_devcheck_init(&r->dc, MT_PTX_DEFAULT_ERR_CAP);
    if (pushed) {
        CUcontext dummy;
        cu->CtxPopCurrent(&dummy);
    }
    if (rc) {
        _mt_rt_logf("memtrack check: cannot set up checking: %s failed (%s, driver error %d)%s%s; "
                    "running unchecked\n",
                    r->dc.fail_step ? r->dc.fail_step : "initialisation", mt_strerror(rc), r->dc.fail_cu,
                    r->dc.jit_log[0] ? ": " : "", r->dc.jit_log);
        atomic_store_explicit(&r->state, -1, memory_order_release);
    } else {
        /* release: publishes the options and the device resources */
        atomic_store_explicit(&r->state, 1, memory_order_release);
        atexit(at_exit); /* after the CUDA runtime's own: runs before its teardown */
        if (r->verbose)
            _mt_rt_logf("memtrack check: sm_%d, helper PTX %.*s, local window top 0x%" PRIx64
                        " (%s), red zones %" PRIu64 " bytes\n",
                        r->dc.sm, (int)strcspn(r->dc.ptx_header, "\n"), r->dc.ptx_header, r->dc.local_top,
                        r->dc.local_top_measured ? "measured" : "probe failed: the window's end", r->redzone);
    }
    st = atomic_load_explicit(&r->state, memory_order_relaxed);
    pthread_mutex_unlock(&r->lock);
    return st > 0;
}

/* ---- allocation table: open addressing, linear probing, tombstone-free
 * deletion by backward shift ---- */

static size_t slot_of(uint64_t key, size_t cap)
{
    uint64_t h = key * 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 20) & (cap - 1);
}

rt_alloc *_mt_rt_alloc_find(uint64_t user)
{
    rt *r = &_mt_rt;
    if (!r->tab_cap)
        return NULL;
    for (size_t i = slot_of(user, r->tab_cap);; i = (i + 1) & (r->tab_cap - 1)) {
        if (!r->tab[i].api)
            return NULL;
        if (r->tab[i].user == user)
            return &r->tab[i];
    }
}

int _mt_rt_alloc_add(const rt_alloc *a)
{
    rt *r = &_mt_rt;
    if ((r->tab_n + 1) * 2 > r->tab_cap) {
        size_t cap = r->tab_cap ? r->tab_cap * 2 : 256;
        rt_alloc *nt = calloc(cap, sizeof *nt);
        if (!nt)
            return -ENOMEM;
        for (size_t i = 0; i < r->tab_cap; i++)
            if (r->tab[i].api) {
                size_t j = slot_of(r->tab[i].user, cap);
                while (nt[j].api)
                    j = (j + 1) & (cap - 1);
                nt[j] = r->tab[i];
            }
        free(r->tab);
        r->tab = nt;
        r->tab_cap = cap;
    }
    size_t j = slot_of(a->user, r->tab_cap);
    while (r->tab[j].api && r->tab[j].user != a->user)
        j = (j + 1) & (r->tab_cap - 1);
    if (!r->tab[j].api)
        r->tab_n++;
    r->tab[j] = *a;
    return 0;
}

void _mt_rt_alloc_remove(rt_alloc *a)
{
    rt *r = &_mt_rt;
    r->freed[r->freed_next++ % (sizeof r->freed / sizeof r->freed[0])] = *a;
    size_t i = (size_t)(a - r->tab), cap = r->tab_cap;
    r->tab[i].api = 0;
    r->tab_n--;
    /* Shift back entries whose probe sequence passed through slot i. */
    for (size_t j = (i + 1) & (cap - 1); r->tab[j].api; j = (j + 1) & (cap - 1)) {
        size_t home = slot_of(r->tab[j].user, cap);
        int between = i <= j ? (home > i && home <= j) : (home > i || home <= j);
        if (!between) {
            r->tab[i] = r->tab[j];
            r->tab[j].api = 0;
            i = j;
        }
    }
}

static const char *api_name(int api)
{
    switch (api) {
    case API_MEMALLOC: return "cuMemAlloc";
    case API_ASYNC: return "cuMemAllocAsync";
    case API_PITCH: return "cuMemAllocPitch";
    case API_MANAGED: return "cuMemAllocManaged";
    case API_HOST: return "cuMemHostAlloc";
    case API_HOSTREG: return "cuMemHostRegister";
    case API_GLOBAL: return "module variable";
    }
    return "allocation";
}

void _mt_rt_where(uint64_t addr, mt_check_where *w)
{
    rt *r = &_mt_rt;
    memset(w, 0, sizeof *w);
    const rt_alloc *best = NULL;
    uint64_t best_d = UINT64_MAX;
    int rel = 0;
    for (size_t i = 0; i < r->tab_cap; i++) {
        const rt_alloc *a = &r->tab[i];
        if (!a->api)
            continue;
        uint64_t d;
        int k;
        if (addr >= a->user && addr < a->user + a->size)
            d = 0, k = 1;
        else if (addr < a->user)
            d = a->user - addr, k = 2;
        else
            d = addr - (a->user + a->size), k = 3;
        if (d < best_d) {
            best_d = d;
            best = a;
            rel = k;
        }
    }
    /* A freed allocation that contained the address explains it better than
     * a live neighbour some way off. */
    size_t nf = sizeof r->freed / sizeof r->freed[0];
    for (size_t i = 0; i < nf && rel != 1; i++) {
        const rt_alloc *a = &r->freed[(r->freed_next - 1 - i) % nf];
        if (a->api && addr >= a->user && addr < a->user + a->size) {
            best = a;
            rel = 4;
            best_d = 0;
            break;
        }
    }
    if (!best || (rel != 4 && best_d > (64ull << 20)))
        return;
    w->relation = rel;
    w->alloc_base = best->user;
    w->alloc_size = best->size;
    w->alloc_serial = best->serial;
    w->alloc_api = api_name(best->api);
}

/* ---- reports ---- */

static void demangle(const char *name, char *out, size_t cap)
{
    typedef char *(*dem_fn)(const char *, char *, size_t *, int *);
    static dem_fn fn;
    static int tried;
    out[0] = 0;
    if (!tried) {
        fn = (dem_fn)_mt_real_dlsym(RTLD_DEFAULT, "__cxa_demangle");
        tried = 1;
    }
    if (!fn || !name || name[0] != '_')
        return;
    int status = -1;
    char *d = fn(name, NULL, NULL, &status);
    if (d && status == 0)
        snprintf(out, cap, "%s", d);
    free(d);
}

static const mt_check_site *site_of(uint32_t id)
{
    return id < _mt_rt.nsites ? _mt_rt.sites[id].site : NULL;
}

#define READ_MAX 4096

/* Lock held. Returns the fault a native run would have raised, or 0. */
static CUresult report_new(void)
{
    rt *r = &_mt_rt;
    static mt_check_record recs[READ_MAX];
    uint64_t lost = 0;
    long n = _mt_devcheck_read_errors(&r->dc, recs, READ_MAX, &lost);
    if (n <= 0)
        return 0;
    r->errors += (uint64_t)n + lost;
    r->lost += lost;
    int any_fault = 0, all_misaligned = 1;
    /* First record of each (site, kind) is reported in full, once per run;
     * the others are counted. */
    for (long i = 0; i < n; i++) {
        const mt_check_record *rec = &recs[i];
        uint32_t kind = rec->kind <= 4 ? rec->kind : 0;
        if (kind != MT_CHECK_UNINIT)
            any_fault = 1;
        if (kind != MT_CHECK_MISALIGNED)
            all_misaligned = 0;
        rt_site_state *st = rec->site < r->nsites ? &r->sites[rec->site] : NULL;
        if (st && st->hits[kind]++)
            continue;
        uint64_t more = 0;
        for (long j = i + 1; j < n; j++)
            more += recs[j].site == rec->site && recs[j].kind == rec->kind;
        const mt_check_site *site = site_of(rec->site);
        char dem[512], text[4096];
        demangle(site ? site->function : NULL, dem, sizeof dem);
        mt_check_where w;
        _mt_rt_where(rec->addr, &w);
        mt_check_format(text, sizeof text, rec, site, dem, &w, more);
        _mt_rt_logf("%s", text);
        r->reports++;
    }
    if (lost)
        _mt_rt_logf("memtrack check: %" PRIu64 " further failed checks were not recorded (buffer full)\n", lost);
    if (!any_fault)
        return 0;
    return all_misaligned ? CUDA_ERROR_MISALIGNED_ADDRESS : CUDA_ERROR_ILLEGAL_ADDRESS;
}

CUresult _mt_rt_after_sync(CUresult result, int partial)
{
    rt *r = &_mt_rt;
    if (!_mt_rt_on())
        return result;
    pthread_mutex_lock(&r->lock);
    uint32_t count = 0;
    const mt_cu *cu = r->dc.cu;
    int pending = !cu->MemcpyDtoHAsync(&count, r->dc.errbuf, sizeof count, r->dc.own) &&
                  !cu->StreamSynchronize(r->dc.own) && count != r->dc.cursor;
    pthread_mutex_unlock(&r->lock);
    if (!pending)
        return result;
    /* Records of kernels still running elsewhere may be half written: finish
     * all work first (only when something failed, so never on the fast path). */
    if (partial)
        cu->CtxSynchronize();
    pthread_mutex_lock(&r->lock);
    CUresult fault = report_new();
    pthread_mutex_unlock(&r->lock);
    /* As a real fault would: the synchronisation reports it; unlike a real
     * fault, the context stays usable. */
    return result == CUDA_SUCCESS && fault ? fault : result;
}

static void at_exit(void)
{
    rt *r = &_mt_rt;
    if (!_mt_rt_on())
        return;
    CUcontext ctx = NULL;
    if (!r->dc.cu->CtxGetCurrent(&ctx) && ctx && !r->dc.cu->CtxSynchronize()) {
        pthread_mutex_lock(&r->lock);
        report_new();
        pthread_mutex_unlock(&r->lock);
    }
    uint64_t repeats = 0;
    for (uint32_t i = 0; i < r->nsites; i++)
        for (int k = 0; k < 5; k++)
            repeats += r->sites[i].hits[k] > 1 ? r->sites[i].hits[k] - 1 : 0;
    _mt_rt_logf("memtrack check: %" PRIu64 " failed check%s (%" PRIu64 " reported, %" PRIu64
                " repeats folded); %" PRIu64 " module%s instrumented (%" PRIu64 " accesses checked), %" PRIu64
                " not instrumented, %" PRIu64 " memory instructions not checked; %" PRIu64 " launches\n",
                r->errors, r->errors == 1 ? "" : "s", r->reports, repeats, r->mod_checked,
                r->mod_checked == 1 ? "" : "s", r->accesses, r->mod_passed, r->not_checked, r->launches);
    if (r->verbose)
        for (int i = 0; i < MT_H_COUNT; i++)
            for (int s = 0; s < 2; s++)
                if (_mt_hook_calls[i][s])
                    _mt_rt_logf("memtrack check:   %s: %" PRIu64 " calls\n", _mt_hooks[i].sym[s],
                                _mt_hook_calls[i][s]);
    if (r->result_path) {
        FILE *f = fopen(r->result_path, "a");
        if (f) {
            fprintf(f, "errors %" PRIu64 " reports %" PRIu64 " modules %" PRIu64 " passed %" PRIu64
                       " accesses %" PRIu64 " unchecked %" PRIu64 " launches %" PRIu64 "\n",
                    r->errors, r->reports, r->mod_checked, r->mod_passed, r->accesses, r->not_checked,
                    r->launches);
            fclose(f);
        }
    }
}
