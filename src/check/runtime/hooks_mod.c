/* Module and library loading: every path ends in _mt_rt_load (modules.c),
 * which hands back an image, instrumented or not, to the real entry point
 * the application called, with the application's own options. */
#include <stdlib.h>
#include <string.h>

#include "hooks.h"
#include "rt.h"

#define NEED(id, slot)                                      \
    do {                                                    \
        _mt_hooks_resolve();                                \
        if (!_mt_hooks[MT_H_##id].real[slot])               \
            return CUDA_ERROR_NOT_FOUND;                    \
    } while (0)

typedef struct mod_call {
    int slot;
    CUmodule *mod;
    unsigned n;
    CUjit_option *o;
    void **v;
} mod_call;

/* Loads through cuModuleLoadDataEx so that a JIT error log can be asked for
 * in addition to the application's options. */
static CUresult mod_load(void *ctx, const void *image, int with_log, char *log, size_t logsz)
{
    mod_call *c = ctx;
    _mt_hooks_resolve();
    mt_fn_ModuleLoadDataEx ex = MT_REAL(ModuleLoadDataEx, 0);
    if (!with_log)
        return ex(c->mod, image, c->n, c->o, c->v);
    unsigned n = c->n + 2;
    CUjit_option *o = malloc(n * sizeof *o);
    void **v = malloc(n * sizeof *v);
    if (!o || !v) {
        free(o);
        free(v);
        return ex(c->mod, image, c->n, c->o, c->v);
    }
    for (unsigned i = 0; i < c->n; i++) {
        o[i] = c->o[i];
        v[i] = c->v[i];
    }
    o[c->n] = CU_JIT_ERROR_LOG_BUFFER;
    v[c->n] = log;
    o[c->n + 1] = CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES;
    v[c->n + 1] = (void *)(uintptr_t)logsz;
    CUresult r = ex(c->mod, image, n, o, v);
    free(o);
    free(v);
    return r;
}

static CUresult mod_global(void *ctx, CUdeviceptr *p, size_t *n, const char *name)
{
    mod_call *c = ctx;
    return _mt_rt.dc.cu->ModuleGetGlobal(p, n, *c->mod, name);
}

CUresult _mt_impl_ModuleLoadData(int slot, CUmodule *m, const void *image)
{
    NEED(ModuleLoadData, slot);
    NEED(ModuleLoadDataEx, 0);
    if (!m || !image)
        return MT_REAL(ModuleLoadData, slot)(m, image);
    mod_call c = {slot, m, 0, NULL, NULL};
    return _mt_rt_load(image, 0, mod_load, mod_global, &c);
}

CUresult _mt_impl_ModuleLoadDataEx(int slot, CUmodule *m, const void *image, unsigned n, CUjit_option *o,
                                   void **v)
{
    NEED(ModuleLoadDataEx, slot);
    if (!m || !image)
        return MT_REAL(ModuleLoadDataEx, slot)(m, image, n, o, v);
    mod_call c = {slot, m, o && v ? n : 0, o, v};
    return _mt_rt_load(image, 0, mod_load, mod_global, &c);
}

CUresult _mt_impl_ModuleLoadFatBinary(int slot, CUmodule *m, const void *fatbin)
{
    NEED(ModuleLoadFatBinary, slot);
    NEED(ModuleLoadDataEx, 0);
    if (!m || !fatbin)
        return MT_REAL(ModuleLoadFatBinary, slot)(m, fatbin);
    mod_call c = {slot, m, 0, NULL, NULL};
    return _mt_rt_load(fatbin, 0, mod_load, mod_global, &c);
}

static void *read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n + 65536 + 1 > cap) {
            cap = cap ? cap * 2 : 1 << 20;
            char *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = nb;
        }
        size_t got = fread(buf + n, 1, 65536, f);
        n += got;
        if (got < 65536)
            break;
    }
    fclose(f);
    buf[n] = 0;
    *size = n;
    return buf;
}

CUresult _mt_impl_ModuleLoad(int slot, CUmodule *m, const char *fname)
{
    NEED(ModuleLoad, slot);
    NEED(ModuleLoadDataEx, 0);
    size_t size = 0;
    void *image = m && fname ? read_file(fname, &size) : NULL;
    if (!image)
        return MT_REAL(ModuleLoad, slot)(m, fname);
    mod_call c = {slot, m, 0, NULL, NULL};
    CUresult r = _mt_rt_load(image, size, mod_load, mod_global, &c);
    free(image); /* the driver copies what it loads */
    return r;
}

typedef struct lib_call {
    int slot;
    CUlibrary *lib;
    CUjit_option *jo;
    void **jv;
    unsigned nj;
    CUlibraryOption *lo;
    void **lv;
    unsigned nl;
} lib_call;

static CUresult lib_load(void *ctx, const void *image, int with_log, char *log, size_t logsz)
{
    lib_call *c = ctx;
    mt_fn_LibraryLoadData load = MT_REAL(LibraryLoadData, 0);
    if (!with_log)
        return load(c->lib, image, c->jo, c->jv, c->nj, c->lo, c->lv, c->nl);
    unsigned n = c->nj + 2;
    CUjit_option *o = malloc(n * sizeof *o);
    void **v = malloc(n * sizeof *v);
    if (!o || !v) {
        free(o);
        free(v);
        return load(c->lib, image, c->jo, c->jv, c->nj, c->lo, c->lv, c->nl);
    }
    for (unsigned i = 0; i < c->nj; i++) {
        o[i] = c->jo[i];
        v[i] = c->jv[i];
    }
    o[c->nj] = CU_JIT_ERROR_LOG_BUFFER;
    v[c->nj] = log;
    o[c->nj + 1] = CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES;
    v[c->nj + 1] = (void *)(uintptr_t)logsz;
    CUresult r = load(c->lib, image, o, v, n, c->lo, c->lv, c->nl);
    free(o);
    free(v);
    /* Libraries load lazily: compile the instrumented code now, while a JIT
     * failure can still fall back to the original image. */
    const mt_cu *cu = _mt_rt.dc.cu;
    if (r == CUDA_SUCCESS && cu->LibraryGetModule) {
        CUcontext cur = NULL, popped;
        int pushed = (cu->CtxGetCurrent(&cur) || !cur) && !cu->CtxPushCurrent(_mt_rt.dc.ctx);
        CUmodule m;
        CUresult jr = cu->LibraryGetModule(&m, *c->lib);
        if (pushed)
            cu->CtxPopCurrent(&popped);
        if (jr) {
            if (cu->LibraryUnload)
                cu->LibraryUnload(*c->lib);
            return jr;
        }
    }
    return r;
}

static CUresult lib_global(void *ctx, CUdeviceptr *p, size_t *n, const char *name)
{
    lib_call *c = ctx;
    if (!_mt_rt.dc.cu->LibraryGetGlobal)
        return CUDA_ERROR_NOT_FOUND;
    return _mt_rt.dc.cu->LibraryGetGlobal(p, n, *c->lib, name);
}

CUresult _mt_impl_LibraryLoadData(int slot, CUlibrary *l, const void *code, CUjit_option *jo, void **jv,
                                  unsigned nj, CUlibraryOption *lo, void **lv, unsigned nl)
{
    NEED(LibraryLoadData, slot);
    if (!l || !code)
        return MT_REAL(LibraryLoadData, slot)(l, code, jo, jv, nj, lo, lv, nl);
    lib_call c = {slot, l, jo, jv, jo && jv ? nj : 0, lo, lv, nl};
    return _mt_rt_load(code, 0, lib_load, lib_global, &c);
}

CUresult _mt_impl_LibraryLoadFromFile(int slot, CUlibrary *l, const char *fname, CUjit_option *jo, void **jv,
                                      unsigned nj, CUlibraryOption *lo, void **lv, unsigned nl)
{
    NEED(LibraryLoadFromFile, slot);
    NEED(LibraryLoadData, 0);
    size_t size = 0;
    void *image = l && fname ? read_file(fname, &size) : NULL;
    if (!image)
        return MT_REAL(LibraryLoadFromFile, slot)(l, fname, jo, jv, nj, lo, lv, nl);
    lib_call c = {slot, l, jo, jv, jo && jv ? nj : 0, lo, lv, nl};
    CUresult r = _mt_rt_load(image, size, lib_load, lib_global, &c);
    free(image);
    return r;
}
