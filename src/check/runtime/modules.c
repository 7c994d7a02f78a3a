/* Instrumenting modules as they load: find the PTX (mt_check_find_ptx),
 * instrument it (mt_ptx_instrument) with this context's map, error buffer,
 * safe addresses and local-window top, load the result through the caller's
 * real entry point, and register the module's variables (the table the
 * instrumenter appended) as initialised. Whatever cannot be instrumented (no
 * PTX, PTX the parser rejects, PTX the JIT rejects) loads unchanged, with a
 * line saying so. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

/* Reserves ids for n sites (lock held): modules may load on several threads
 * at once, each instrumented with its own range. Returns the first id. */
static int reserve_sites(rt *r, uint32_t n, uint32_t *first)
{
    uint32_t need = r->nsites + n;
    if (need > r->capsites) {
        uint32_t cap = r->capsites ? r->capsites : 1024;
        while (cap < need)
            cap *= 2;
        rt_site_state *ns = realloc(r->sites, cap * sizeof *ns);
        if (!ns)
            return -ENOMEM;
        r->sites = ns;
        r->capsites = cap;
    }
    memset(&r->sites[r->nsites], 0, n * sizeof *r->sites);
    *first = r->nsites;
    r->nsites = need;
    return 0;
}

/* Publishes the sites of a loaded module (lock held). */
static int add_module(rt *r, const mt_ptx_result *res)
{
    for (size_t i = 0; i < res->nsites; i++)
        r->sites[res->sites[i].id].site = &res->sites[i];
    if (r->nmods == r->capmods) {
        size_t cap = r->capmods ? 2 * r->capmods : 16;
        mt_ptx_result **nm = realloc(r->mods, cap * sizeof *nm);
        if (!nm)
            return -ENOMEM;
        r->mods = nm;
        r->capmods = cap;
    }
    r->mods[r->nmods++] = (mt_ptx_result *)res;
    return 0;
}

static void register_variables(rt *r, const mt_ptx_result *res, rt_global_fn global, void *ctx)
{
    if (!res->nvars)
        return;
    /* A library may load before any context is current (the CUDA runtime
     * loads lazily); its variables are looked up in the checked context. */
    CUcontext cur = NULL, popped;
    int pushed = (r->dc.cu->CtxGetCurrent(&cur) || !cur) && !r->dc.cu->CtxPushCurrent(r->dc.ctx);
    CUdeviceptr table = 0;
    size_t bytes = 0;
    uint64_t *v = malloc(res->nvars * 16);
    if (!v)
        return;
    if (global(ctx, &table, &bytes, MT_PTX_GLOBALS_TABLE) || bytes != res->nvars * 16 ||
        r->dc.cu->MemcpyDtoHAsync(v, table, bytes, r->dc.own) || r->dc.cu->StreamSynchronize(r->dc.own)) {
        _mt_rt_logf("memtrack check: cannot read the module's variable table: its variables will read as "
                    "out of bounds\n");
        free(v);
        if (pushed)
            r->dc.cu->CtxPopCurrent(&popped);
        return;
    }
    for (size_t i = 0; i < res->nvars; i++) {
        rt_alloc a = {v[2 * i], v[2 * i + 1], v[2 * i], v[2 * i + 1], ++r->serial, API_GLOBAL};
        if (!a.size || _mt_rt_alloc_find(a.user))
            continue;
        _mt_rt_alloc_add(&a);
        if (_mt_devcheck_set(&r->dc, a.user, a.size, MT_VMAP_DEFINED, NULL, 0))
            _mt_rt_logf("memtrack check: cannot register variable %s\n", res->vars[i].name);
    }
    free(v);
    if (pushed)
        r->dc.cu->CtxPopCurrent(&popped);
}

static const char *first_function(const mt_ptx_result *res)
{
    return res->nsites ? res->sites[0].function : "no checked function";
}

/* Set while this thread loads: a driver entry point that loads through
 * another exported one must not instrument twice. */
static _Thread_local int loading;

static CUresult load_checked(const void *image, size_t size, rt_load_fn load, rt_global_fn global, void *ctx);

CUresult _mt_rt_load(const void *image, size_t size, rt_load_fn load, rt_global_fn global, void *ctx)
{
    if (loading || !_mt_rt_ready())
        return load(ctx, image, 0, NULL, 0);
    loading = 1;
    CUresult r = load_checked(image, size, load, global, ctx);
    loading = 0;
    return r;
}

static CUresult load_checked(const void *image, size_t size, rt_load_fn load, rt_global_fn global, void *ctx)
{
    rt *r = &_mt_rt;
    char *ptx = NULL;
    size_t len = 0;
    pthread_mutex_lock(&r->lock);
    int rc = mt_check_find_ptx(image, size, r->dc.sm, &ptx, &len);
    if (rc == -ENODATA) { /* no code at all: nothing to check, nothing to say */
        pthread_mutex_unlock(&r->lock);
        return load(ctx, image, 0, NULL, 0);
    }
    if (rc) {
        r->mod_passed++;
        pthread_mutex_unlock(&r->lock);
        _mt_rt_logf("memtrack check: module not instrumented: %s; its kernels run unchecked\n",
                    rc == -ENOENT ? "no PTX for this GPU in the image (machine code only)" : mt_strerror(rc));
        return load(ctx, image, 0, NULL, 0);
    }
    mt_ptx_opts o = {
        .map_root = mt_vmap_root(r->dc.map),
        .err_buf = r->dc.errbuf,
        .err_cap = r->dc.errcap,
        .site_base = 0, /* set below, once the count is known */
        .safe_load = r->dc.safe,
        .safe_store = r->dc.sink,
        .local_top = r->dc.local_top,
        .flags = r->init_check ? 0 : MT_PTX_NO_INIT_CHECK,
    };
    mt_ptx_result *res = NULL;
    /* Ids are reserved from a first pass's count; the instrumenter is cheap
     * next to the JIT that follows. */
    rc = mt_ptx_instrument(ptx, len, &o, &res);
    uint32_t base = 0;
    if (!rc && res->nsites && (rc = reserve_sites(r, (uint32_t)res->nsites, &base)) == 0 && base) {
        mt_ptx_result_free(res);
        res = NULL;
        o.site_base = base;
        rc = mt_ptx_instrument(ptx, len, &o, &res);
    }
    free(ptx);
    if (rc) {
        r->mod_passed++;
        pthread_mutex_unlock(&r->lock);
        _mt_rt_logf("memtrack check: module not instrumented: %s; its kernels run unchecked\n", mt_strerror(rc));
        return load(ctx, image, 0, NULL, 0);
    }
    pthread_mutex_unlock(&r->lock);

    /* The driver may write the JIT log when it compiles lazily, after the
     * load call returned: the buffer outlives it. */
    static _Thread_local char log[8192];
    log[0] = 0;
    CUresult cr = load(ctx, res->text, 1, log, sizeof log);
    if (cr) {
        _mt_rt_logf("memtrack check: the JIT rejected the instrumented PTX (error %d): %.*s\n"
                    "memtrack check: module loaded unchanged; its kernels run unchecked\n",
                    cr, 2000, log);
        if (getenv("MEMTRACK_CHECK_DUMP")) {
            FILE *f = fopen(getenv("MEMTRACK_CHECK_DUMP"), "w");
            if (f) {
                fwrite(res->text, 1, res->len, f);
                fclose(f);
            }
        }
        mt_ptx_result_free(res);
        pthread_mutex_lock(&r->lock);
        r->mod_passed++;
        pthread_mutex_unlock(&r->lock);
        return load(ctx, image, 0, NULL, 0);
    }
    pthread_mutex_lock(&r->lock);
    if (add_module(r, res)) {
        _mt_rt_logf("memtrack check: out of memory keeping the module's sites\n");
        mt_ptx_result_free(res);
        pthread_mutex_unlock(&r->lock);
        return cr;
    }
    register_variables(r, res, global, ctx);
    r->mod_checked++;
    r->accesses += res->nsites;
    r->not_checked += res->skipped;
    if (r->verbose || res->nnotes)
        _mt_rt_logf("memtrack check: module (%s, ...): %u functions, %zu accesses checked, %u not checked, "
                    "%u unknown instructions\n",
                    first_function(res), res->functions, res->nsites, res->skipped, res->unknown);
    for (size_t i = 0; i < res->nnotes; i++)
        _mt_rt_logf("memtrack check:   %s\n", res->notes[i]);
    pthread_mutex_unlock(&r->lock);
    return cr;
}
