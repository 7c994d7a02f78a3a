/* The CUDA backend: NVIDIA GPUs through the driver API, loaded at run time.
 *
 * dlopen("libcuda.so.1") finds the driver; without it (or without a GPU)
 * mt_coh_add_cuda_devices adds nothing. Each device uses the GPU's primary
 * context and two non-blocking streams, one per engine; an op is submitted
 * to its stream followed by an event, and the completer thread waits for
 * the event (ops of one engine complete in order, as the context expects).
 *
 * Device memory: regions from cuMemAlloc (256 MiB, or the request if
 * larger), up to mem_limit, suballocated by the context.
 *
 * Copies with many segments (the dirty pages of a tracked buffer) do not
 * issue one copy per segment, which runs at ~1.6 GB/s for 4 KiB pages: the
 * root's host memory is pinned and mapped on first use (host_attach:
 * cuMemHostRegister with DEVICEMAP), and one launch of a copy kernel reads
 * the segments straight from host memory over PCIe (or writes them, for a
 * download). The kernel is PTX embedded in the library (cuda_copy.cu), JIT
 * compiled by the driver when the device is added. Few large segments use
 * the DMA engines (cuMemcpy*Async), which are a little faster for them. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../internal.h"
#include "cuda_api.h"
#include "cuda_copy_ptx.h"

/* ---- loading the driver ------------------------------------------------------------ */

static coh_cuda_api api;
static int api_ok;
static pthread_once_t api_once = PTHREAD_ONCE_INIT;

static void api_load(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return;
#define SYM(field, name)                                          \
    do {                                                          \
        void *p_ = dlsym(h, name);                                \
        if (!p_)                                                  \
            goto fail;                                            \
        memcpy(&api.field, &p_, sizeof p_);                       \
    } while (0)
    SYM(Init, "cuInit");
    SYM(DeviceGetCount, "cuDeviceGetCount");
    SYM(DeviceGet, "cuDeviceGet");
    SYM(DeviceGetName, "cuDeviceGetName");
    SYM(DeviceGetAttribute, "cuDeviceGetAttribute");
    SYM(DeviceCanAccessPeer, "cuDeviceCanAccessPeer");
    SYM(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    SYM(DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2");
    SYM(CtxSetCurrent, "cuCtxSetCurrent");
    SYM(CtxGetCurrent, "cuCtxGetCurrent");
    SYM(CtxEnablePeerAccess, "cuCtxEnablePeerAccess");
    SYM(MemGetInfo, "cuMemGetInfo_v2");
    SYM(MemAlloc, "cuMemAlloc_v2");
    SYM(MemFree, "cuMemFree_v2");
    SYM(MemHostAlloc, "cuMemHostAlloc");
    SYM(MemFreeHost, "cuMemFreeHost");
    SYM(MemHostRegister, "cuMemHostRegister_v2");
    SYM(MemHostUnregister, "cuMemHostUnregister");
    SYM(MemHostGetDevicePointer, "cuMemHostGetDevicePointer_v2");
    SYM(StreamCreate, "cuStreamCreate");
    SYM(StreamDestroy, "cuStreamDestroy_v2");
    SYM(StreamSynchronize, "cuStreamSynchronize");
    SYM(EventCreate, "cuEventCreate");
    SYM(EventRecord, "cuEventRecord");
    SYM(EventSynchronize, "cuEventSynchronize");
    SYM(EventDestroy, "cuEventDestroy_v2");
    SYM(MemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2");
    SYM(MemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2");
    SYM(MemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2");
    SYM(MemcpyPeerAsync, "cuMemcpyPeerAsync");
    SYM(ModuleLoadData, "cuModuleLoadData");
    SYM(ModuleUnload, "cuModuleUnload");
    SYM(ModuleGetFunction, "cuModuleGetFunction");
    SYM(LaunchKernel, "cuLaunchKernel");
    SYM(GetErrorString, "cuGetErrorString");
#undef SYM
    if (api.Init(0) != CUDA_SUCCESS)
        goto fail;
    api_ok = 1;
    return; /* the library stays loaded for the process's life */
fail:
    dlclose(h);
}

const coh_cuda_api *mti_coh_cuda_api_get(void)
{
    pthread_once(&api_once, api_load);
    return api_ok ? &api : NULL;
}

/* Sticky context errors mean the GPU context is gone: the device is lost. */
static int err_of(CUresult r)
{
    switch (r) {
    case CUDA_SUCCESS:
        return 0;
    case 2: /* CUDA_ERROR_OUT_OF_MEMORY */
        return -ENOMEM;
    case 700: /* ILLEGAL_ADDRESS */
    case 702: /* LAUNCH_TIMEOUT */
    case 714: case 715: case 716: case 717: case 718: case 719: case 720:
    case 999: /* UNKNOWN */
        return MT_EDEVLOST;
    default:
        return -EIO;
    }
}

/* ---- devices ------------------------------------------------------------------------------- */

#define TILE_MAX (64u << 10)

typedef struct tile {
    uint64_t src, dst, len;
} tile;

/* A pinned, mapped table of tiles for one kernel launch in flight. */
typedef struct table {
    tile *host;
    CUdeviceptr dptr;
    size_t cap; /* tiles */
    struct table *next;
} table;

typedef struct cu_dev {
    const coh_cuda_api *cu;
    CUdevice dev;
    CUcontext ctx;
    CUstream st[2];
    CUmodule mod;
    CUfunction copy; /* NULL: the PTX did not load; copies go segment by segment */
    uint64_t limit, given;
    pthread_mutex_t lock; /* the free lists below */
    CUevent *events;
    size_t nevents, capevents;
    table *tables;
} cu_dev;

/* A pinned registration (host_attach, svm_attach). */
typedef struct pin {
    void *base;
    size_t len;
    CUdeviceptr dptr;
    int owned; /* 0: registered by another device, or by the application */
} pin;

/* Calls from threads that are not the device's engines keep their own
 * current context. */
static CUcontext enter(cu_dev *g)
{
    CUcontext prev = NULL;
    g->cu->CtxGetCurrent(&prev);
    if (prev != g->ctx)
        g->cu->CtxSetCurrent(g->ctx);
    return prev;
}

static void leave(cu_dev *g, CUcontext prev)
{
    if (prev != g->ctx)
        g->cu->CtxSetCurrent(prev);
}

static int cu_grow(void *dev, uint64_t min_size, uint64_t *base, uint64_t *size)
{
    cu_dev *g = dev;
    uint64_t left = g->limit > g->given ? g->limit - g->given : 0;
    uint64_t want = min_size > (256u << 20) ? min_size : 256u << 20;
    want = (want + (2u << 20) - 1) & ~(uint64_t)((2u << 20) - 1);
    if (want > left)
        want = left;
    if (want < min_size)
        return -ENOSPC;
    CUcontext prev = enter(g);
    CUdeviceptr p = 0;
    CUresult r = g->cu->MemAlloc(&p, want);
    if (r != CUDA_SUCCESS && want > min_size) {
        want = min_size;
        r = g->cu->MemAlloc(&p, want);
    }
    leave(g, prev);
    if (r != CUDA_SUCCESS)
        return -ENOSPC;
    g->given += want;
    *base = p;
    *size = want;
    return 0;
}

static void cu_release(void *dev, uint64_t base, uint64_t size)
{
    cu_dev *g = dev;
    CUcontext prev = enter(g);
    g->cu->MemFree(base);
    leave(g, prev);
    g->given -= size;
}

static CUevent get_event(cu_dev *g)
{
    CUevent e = NULL;
    pthread_mutex_lock(&g->lock);
    if (g->nevents)
        e = g->events[--g->nevents];
    pthread_mutex_unlock(&g->lock);
    if (!e && g->cu->EventCreate(&e, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS)
        e = NULL;
    return e;
}

static void put_event(cu_dev *g, CUevent e)
{
    pthread_mutex_lock(&g->lock);
    if (g->nevents == g->capevents) {
        size_t cap = g->capevents ? g->capevents * 2 : 16;
        CUevent *v = realloc(g->events, cap * sizeof *v);
        if (!v) {
            pthread_mutex_unlock(&g->lock);
            g->cu->EventDestroy(e);
            return;
        }
        g->events = v;
        g->capevents = cap;
    }
    g->events[g->nevents++] = e;
    pthread_mutex_unlock(&g->lock);
}

static table *get_table(cu_dev *g, size_t tiles)
{
    pthread_mutex_lock(&g->lock);
    table **pp = &g->tables, *t = NULL;
    for (; *pp; pp = &(*pp)->next)
        if ((*pp)->cap >= tiles) {
            t = *pp;
            *pp = t->next;
            break;
        }
    pthread_mutex_unlock(&g->lock);
    if (t)
        return t;
    t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    size_t cap = 4096;
    while (cap < tiles)
        cap *= 2;
    void *h = NULL;
    unsigned fl = CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE;
    if (g->cu->MemHostAlloc(&h, cap * sizeof(tile), fl) != CUDA_SUCCESS ||
        g->cu->MemHostGetDevicePointer(&t->dptr, h, 0) != CUDA_SUCCESS) {
        if (h)
            g->cu->MemFreeHost(h);
        free(t);
        return NULL;
    }
    t->host = h;
    t->cap = cap;
    return t;
}

static void put_table(cu_dev *g, table *t)
{
    pthread_mutex_lock(&g->lock);
    t->next = g->tables;
    g->tables = t;
    pthread_mutex_unlock(&g->lock);
}

/* One launch copying every segment: src and dst are device addresses
 * (device memory, or mapped host memory). */
static int launch_copy(cu_dev *g, CUstream s, const mt_coh_op *op, CUdeviceptr src, CUdeviceptr dst,
                       table **out)
{
    size_t n = 0;
    for (uint32_t i = 0; i < op->nsegs; i++)
        n += (op->segs[i].len + TILE_MAX - 1) / TILE_MAX;
    table *t = get_table(g, n);
    if (!t)
        return -ENOMEM;
    size_t k = 0;
    for (uint32_t i = 0; i < op->nsegs; i++)
        for (uint64_t o = 0; o < op->segs[i].len; o += TILE_MAX) {
            uint64_t len = op->segs[i].len - o < TILE_MAX ? op->segs[i].len - o : TILE_MAX;
            t->host[k++] = (tile){op->segs[i].src + o, op->segs[i].dst + o, len};
        }
    unsigned long long nt = n;
    void *params[] = {&t->dptr, &nt, &src, &dst};
    CUresult r = g->cu->LaunchKernel(g->copy, (unsigned)n, 1, 1, 256, 1, 1, 0, s, params, NULL);
    if (r != CUDA_SUCCESS) {
        put_table(g, t);
        return err_of(r);
    }
    *out = t;
    return 0;
}

/* Kernel or DMA: many or small segments go to the kernel. */
static int use_kernel(const cu_dev *g, const mt_coh_op *op)
{
    return g->copy && op->nsegs > 4 && op->bytes / op->nsegs < (1u << 20);
}

static int copy_op(cu_dev *g, mt_coh_op *op, table **tab)
{
    CUstream s = g->st[MT_COH_ENGINE_COPY];
    const pin *hp = op->host_token;
    /* The host side as a device address (mapped, pinned memory). */
    CUdeviceptr hd = hp ? hp->dptr + (CUdeviceptr)((char *)op->host - (char *)hp->base) : 0;
    char *h = op->host;
    const mt_coh_seg *sg = op->segs;
    CUresult r = CUDA_SUCCESS;
    switch (op->kind) {
    case MT_COH_OP_UPLOAD:
        if (hp && use_kernel(g, op))
            return launch_copy(g, s, op, hd, op->dev_addr, tab);
        for (uint32_t i = 0; i < op->nsegs && r == CUDA_SUCCESS; i++)
            r = g->cu->MemcpyHtoDAsync(op->dev_addr + sg[i].dst, h + sg[i].src, sg[i].len, s);
        return err_of(r);
    case MT_COH_OP_DOWNLOAD:
        if (hp && use_kernel(g, op))
            return launch_copy(g, s, op, op->dev_addr, hd, tab);
        for (uint32_t i = 0; i < op->nsegs && r == CUDA_SUCCESS; i++)
            r = g->cu->MemcpyDtoHAsync(h + sg[i].dst, op->dev_addr + sg[i].src, sg[i].len, s);
        return err_of(r);
    case MT_COH_OP_PEER: {
        cu_dev *o = op->peer;
        if (o->ctx == g->ctx && use_kernel(g, op))
            return launch_copy(g, s, op, op->peer_addr, op->dev_addr, tab);
        for (uint32_t i = 0; i < op->nsegs && r == CUDA_SUCCESS; i++) {
            CUdeviceptr d = op->dev_addr + sg[i].dst, src = op->peer_addr + sg[i].src;
            r = o->ctx == g->ctx ? g->cu->MemcpyDtoDAsync(d, src, sg[i].len, s)
                                 : g->cu->MemcpyPeerAsync(d, g->ctx, src, o->ctx, sg[i].len, s);
        }
        return err_of(r);
    }
    default:
        return -EINVAL;
    }
}

static int cu_submit(void *dev, int engine, mt_coh_op *op)
{
    cu_dev *g = dev;
    /* An engine thread, or the planner's (MT_COH_CAP_SUBMIT_ANY_THREAD),
     * whose current context is the application's: given back as found. */
    CUcontext prev = enter(g);
    int rc;
    table *tab = NULL;
    if (op->kind == MT_COH_OP_RUN) {
        op->exec.native = g->st[MT_COH_ENGINE_COMPUTE];
        op->exec.device_handle = g->ctx;
        rc = op->fn(op->user, &op->exec);
    } else
        rc = copy_op(g, op, &tab);
    if (rc) {
        /* Copies queued before the error may still run: let them finish
         * before the command completes (and its memory may be reused). */
        g->cu->StreamSynchronize(g->st[engine]);
        leave(g, prev);
        return rc;
    }
    CUevent e = get_event(g);
    CUresult r = e ? g->cu->EventRecord(e, g->st[engine]) : 1;
    if (r != CUDA_SUCCESS) {
        if (e)
            put_event(g, e);
        rc = err_of(g->cu->StreamSynchronize(g->st[engine]));
        if (tab)
            put_table(g, tab);
        leave(g, prev);
        return rc;
    }
    op->scratch[0] = (uint64_t)(uintptr_t)e;
    op->scratch[1] = (uint64_t)(uintptr_t)tab;
    leave(g, prev);
    return 1;
}

static int cu_wait(void *dev, int engine, mt_coh_op *op)
{
    cu_dev *g = dev;
    (void)engine;
    g->cu->CtxSetCurrent(g->ctx);
    CUevent e = (CUevent)(uintptr_t)op->scratch[0];
    int rc = err_of(g->cu->EventSynchronize(e));
    put_event(g, e);
    if (op->scratch[1])
        put_table(g, (table *)(uintptr_t)op->scratch[1]);
    return rc;
}

static int cu_can_peer(void *dev, void *src)
{
    cu_dev *g = dev, *o = src;
    if (g->ctx == o->ctx)
        return 1;
    int ok = 0;
    if (g->cu->DeviceCanAccessPeer(&ok, g->dev, o->dev) != CUDA_SUCCESS || !ok)
        return 0;
    CUcontext prev = enter(g);
    CUresult r = g->cu->CtxEnablePeerAccess(o->ctx, 0);
    leave(g, prev);
    return r == CUDA_SUCCESS || r == 704 /* PEER_ACCESS_ALREADY_ENABLED */;
}

/* What this backend registered (its owners' pins), for every device of
 * every context: a second device pinning the same pages uses the owner's
 * registration (PORTABLE: mapped in every context) without asking the
 * driver to register them again, which it refuses with
 * HOST_MEMORY_ALREADY_REGISTERED, an error compute-sanitizer reports in the
 * application's run. The owner unregisters at its unpin, as before. */
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static pin *regs[256];
static size_t nregs;

/* 1: [a, b) lies in one of ours; -1: it overlaps one (registering fails);
 * 0: neither. Under reg_lock. */
static int reg_find(uintptr_t a, uintptr_t b)
{
    int overlap = 0;
    for (size_t i = 0; i < nregs; i++) {
        uintptr_t ra = (uintptr_t)regs[i]->base, rb = ra + regs[i]->len;
        if (ra <= a && b <= rb)
            return 1;
        overlap |= a < rb && ra < b;
    }
    return overlap ? -1 : 0;
}

static void reg_drop(pin *p)
{
    pthread_mutex_lock(&reg_lock);
    for (size_t i = 0; i < nregs; i++)
        if (regs[i] == p) {
            regs[i] = regs[--nregs];
            break;
        }
    pthread_mutex_unlock(&reg_lock);
}

/* Pins [ptr, ptr+len) (whole pages) and maps it for the GPU. */
static int do_pin(cu_dev *g, void *ptr, uint64_t len, pin **out)
{
    uintptr_t a = (uintptr_t)ptr & ~(uintptr_t)4095;
    uintptr_t b = ((uintptr_t)ptr + len + 4095) & ~(uintptr_t)4095;
    pin *p = calloc(1, sizeof *p);
    if (!p)
        return -ENOMEM;
    p->base = (void *)a;
    p->len = b - a;
    CUcontext prev = enter(g);
    /* Under reg_lock from the look-up to the record: two devices pinning
     * the same pages at once register them once. */
    pthread_mutex_lock(&reg_lock);
    int ours = reg_find(a, b);
    /* Part of one of ours: the driver would refuse, and the mapping of its
     * start would not cover the rest (1: fail, copies stage instead). */
    CUresult r = ours > 0   ? 712
                 : ours < 0 ? 1
                            : g->cu->MemHostRegister((void *)a, b - a,
                                                     CU_MEMHOSTREGISTER_DEVICEMAP |
                                                         CU_MEMHOSTREGISTER_PORTABLE);
    p->owned = r == CUDA_SUCCESS;
    if (p->owned && nregs < sizeof regs / sizeof regs[0])
        regs[nregs++] = p; /* a full table only costs the driver's refusal later */
    pthread_mutex_unlock(&reg_lock);
    /* 712, HOST_MEMORY_ALREADY_REGISTERED (ours, or the driver's answer
     * for the application's registration): use that mapping. */
    if ((r == CUDA_SUCCESS || r == 712) &&
        g->cu->MemHostGetDevicePointer(&p->dptr, (void *)a, 0) == CUDA_SUCCESS) {
        r = CUDA_SUCCESS;
    } else {
        if (p->owned) {
            reg_drop(p);
            g->cu->MemHostUnregister((void *)a);
        }
        r = 1;
    }
    leave(g, prev);
    if (r != CUDA_SUCCESS) {
        free(p);
        return -EIO; /* e.g. already registered by someone else: copies stage instead */
    }
    *out = p;
    return 0;
}

static void do_unpin(cu_dev *g, pin *p)
{
    if (!p)
        return;
    if (p->owned) {
        reg_drop(p);
        CUcontext prev = enter(g);
        g->cu->MemHostUnregister(p->base);
        leave(g, prev);
    }
    free(p);
}

static int cu_host_attach(void *dev, void *ptr, uint64_t len, void **token)
{
    /* Pinning costs time and pinned memory: worth it for buffers large
     * enough that segment-by-segment copies would hurt. */
    if (len < (1u << 20))
        return -EINVAL;
    return do_pin(dev, ptr, len, (pin **)token);
}

static void cu_host_detach(void *dev, void *token)
{
    do_unpin(dev, token);
}

static int cu_svm_attach(void *dev, void *ptr, uint64_t len, uint64_t *addr, void **token)
{
    pin *p;
    int rc = do_pin(dev, ptr, len, &p);
    if (rc)
        return rc;
    *addr = p->dptr + (CUdeviceptr)((char *)ptr - (char *)p->base);
    *token = p;
    return 0;
}

static void cu_svm_detach(void *dev, void *token)
{
    do_unpin(dev, token);
}

static void cu_destroy(void *dev)
{
    cu_dev *g = dev;
    /* The application's thread (mt_coh_destroy): its context given back. */
    CUcontext prev = enter(g);
    for (int i = 0; i < 2; i++)
        if (g->st[i]) {
            g->cu->StreamSynchronize(g->st[i]);
            g->cu->StreamDestroy(g->st[i]);
        }
    for (size_t i = 0; i < g->nevents; i++)
        g->cu->EventDestroy(g->events[i]);
    while (g->tables) {
        table *t = g->tables;
        g->tables = t->next;
        g->cu->MemFreeHost(t->host);
        free(t);
    }
    if (g->mod)
        g->cu->ModuleUnload(g->mod);
    leave(g, prev);
    g->cu->DevicePrimaryCtxRelease(g->dev);
    pthread_mutex_destroy(&g->lock);
    free(g->events);
    free(g);
}

static const mt_coh_backend coh_cuda_backend = {
    .name = "cuda",
    .caps = MT_COH_CAP_ASYNC | MT_COH_CAP_IN_ORDER | MT_COH_CAP_FINE_SVM |
            MT_COH_CAP_SUBMIT_ANY_THREAD,
    .mem_grow = cu_grow,
    .mem_release = cu_release,
    .submit = cu_submit,
    .wait = cu_wait,
    .can_peer = cu_can_peer,
    .host_attach = cu_host_attach,
    .host_detach = cu_host_detach,
    .svm_attach = cu_svm_attach,
    .svm_detach = cu_svm_detach,
    .destroy = cu_destroy,
};

/* The PTX to load: the embedded one, or a file named by MT_COH_CUDA_PTX (to
 * try a kernel built with nvcc without rebuilding the library). */
static char *ptx_text(void)
{
    const char *path = getenv("MT_COH_CUDA_PTX");
    if (!path || !*path)
        return strdup(mt_coh_copy_ptx);
    FILE *f = fopen(path, "rb");
    if (!f)
        return strdup(mt_coh_copy_ptx);
    char *buf = NULL;
    size_t n = 0, cap = 0;
    int ch;
    while ((ch = fgetc(f)) != EOF) {
        if (n + 1 >= cap) {
            cap = cap ? cap * 2 : 65536;
            char *p = realloc(buf, cap);
            if (!p) {
                free(buf);
                fclose(f);
                return strdup(mt_coh_copy_ptx);
            }
            buf = p;
        }
        buf[n++] = (char)ch;
    }
    fclose(f);
    if (!buf)
        return strdup(mt_coh_copy_ptx);
    buf[n] = 0;
    return buf;
}

static int dev_open(const coh_cuda_api *cu, int ordinal, uint64_t limit, cu_dev **out, char *name,
                    size_t name_len)
{
    cu_dev *g = calloc(1, sizeof *g);
    if (!g)
        return -ENOMEM;
    g->cu = cu;
    pthread_mutex_init(&g->lock, NULL);
    if (cu->DeviceGet(&g->dev, ordinal) != CUDA_SUCCESS ||
        cu->DevicePrimaryCtxRetain(&g->ctx, g->dev) != CUDA_SUCCESS) {
        pthread_mutex_destroy(&g->lock);
        free(g);
        return -ENODEV;
    }
    CUcontext prev = enter(g);
    int rc = 0;
    for (int i = 0; i < 2 && !rc; i++)
        rc = err_of(cu->StreamCreate(&g->st[i], CU_STREAM_NON_BLOCKING));
    char *ptx = rc ? NULL : ptx_text();
    if (ptx && (cu->ModuleLoadData(&g->mod, ptx) != CUDA_SUCCESS ||
                cu->ModuleGetFunction(&g->copy, g->mod, "mt_coh_copy_tiles") != CUDA_SUCCESS))
        g->copy = NULL; /* copies go segment by segment; reported in the name */
    free(ptx);
    size_t freeb = 0, total = 0;
    cu->MemGetInfo(&freeb, &total);
    g->limit = limit ? limit : (uint64_t)freeb / 10 * 9;
    char gpu[48] = "?";
    cu->DeviceGetName(gpu, sizeof gpu, g->dev);
    snprintf(name, name_len, "cuda%d %s%s", ordinal, gpu, g->copy ? "" : " [no copy kernel]");
    leave(g, prev);
    if (rc) {
        cu_destroy(g);
        return rc;
    }
    *out = g;
    return 0;
}

int mt_coh_add_cuda_devices(mt_coh *c, const mt_coh_cuda_opts *opts, uint32_t *first,
                            uint32_t *count)
{
    if (!c || !first || !count)
        return -EINVAL;
    if (mti_coh_forked(c))
        return MT_EFORKED; /* and a forked child must not touch CUDA */
    mt_coh_cuda_opts o = {0};
    if (opts)
        o = *opts;
    *first = 0;
    *count = 0;
    const coh_cuda_api *cu = mti_coh_cuda_api_get();
    int n = 0;
    if (!cu || cu->DeviceGetCount(&n) != CUDA_SUCCESS || n <= 0)
        return 0; /* no driver, no GPU: no CUDA devices */
    uint32_t repeat = o.repeat ? o.repeat : 1;
    for (int ord = 0; ord < n && (!o.max_devices || (uint32_t)ord < o.max_devices); ord++)
        for (uint32_t k = 0; k < repeat; k++) {
            cu_dev *g;
            char name[64];
            uint64_t limit = o.mem_limit;
            int rc = dev_open(cu, ord, 0, &g, name, sizeof name);
            if (rc)
                return rc;
            if (!limit)
                limit = g->limit / repeat;
            g->limit = limit;
            mt_coh_device_opts dopt = {.name = name};
            uint32_t id;
            rc = mt_coh_device_add(c, &coh_cuda_backend, g, &dopt, &id);
            if (rc)
                return rc;
            if (!*count)
                *first = id;
            (*count)++;
        }
    return 0;
}
