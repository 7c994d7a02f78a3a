/* The device half of checking (see devcheck.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devcheck.h"

#define OP_THREADS 256u
#define OP_MAX_BLOCKS 4096u

static int dev_alloc(void *ctx, size_t size, uint64_t *addr)
{
    mt_devcheck *d = ctx;
    CUdeviceptr p;
    CUresult r = d->cu->MemAlloc(&p, size);
    if (r)
        return r == CUDA_ERROR_OUT_OF_MEMORY ? -ENOMEM : -EIO;
    /* The map's contract: zero-filled. Ordered before any op on the own
     * stream; ops on other streams come after the structure upload, which
     * waits for the own stream. */
    if ((r = d->cu->MemsetD8Async(p, 0, size, d->own)) != 0) {
        d->cu->MemFree(p);
        return -EIO;
    }
    *addr = p;
    return 0;
}

static int upload(void *ctx, uint64_t dev, const void *src, size_t len)
{
    mt_devcheck *d = ctx;
    return d->cu->MemcpyHtoDAsync(dev, src, len, d->own) ? -EIO : 0;
}

/* Uploads pending node entries and waits, so that every stream sees them. */
static int sync_structure(mt_devcheck *d)
{
    int rc = mt_vmap_sync(d->map, upload, d);
    if (rc)
        return rc;
    return d->cu->StreamSynchronize(d->own) ? -EIO : 0;
}

static int launch_op(mt_devcheck *d, uint64_t base, uint64_t size, mt_vmap_op op, CUstream s)
{
    uint64_t root = mt_vmap_root(d->map), lo = base, last = base + (size - 1);
    uint32_t opv = (uint32_t)op;
    uint64_t groups = (last >> 5) - (lo >> 5) + 1;
    uint64_t blocks = (groups + OP_THREADS - 1) / OP_THREADS;
    if (blocks > OP_MAX_BLOCKS)
        blocks = OP_MAX_BLOCKS;
    void *params[] = {&root, &lo, &last, &opv};
    d->ops++;
    d->op_groups += groups;
    return d->cu->LaunchKernel(d->op_fn, (unsigned)blocks, 1, 1, OP_THREADS, 1, 1, 0, s, params, NULL) ? -EIO : 0;
}

int _mt_devcheck_set(mt_devcheck *d, uint64_t base, uint64_t size, mt_vmap_state st, CUstream stream,
                     int stream_ordered)
{
    int rc = mt_vmap_set(d->map, base, size, st);
    if (rc || (rc = sync_structure(d)) != 0)
        return rc;
    mt_vmap_op op = st == MT_VMAP_NOACCESS ? MT_VMAP_OP_NOACCESS
                    : st == MT_VMAP_UNDEFINED ? MT_VMAP_OP_UNDEFINED
                                              : MT_VMAP_OP_DEFINED;
    if (stream_ordered)
        return launch_op(d, base, size, op, stream);
    if ((rc = launch_op(d, base, size, op, d->own)) != 0)
        return rc;
    return d->cu->StreamSynchronize(d->own) ? -EIO : 0;
}

int _mt_devcheck_mark_valid(mt_devcheck *d, uint64_t base, uint64_t size, CUstream stream)
{
    if (!size || base + (size - 1) < base)
        return -EINVAL;
    return launch_op(d, base, size, MT_VMAP_OP_VALID, stream);
}

long _mt_devcheck_read_errors(mt_devcheck *d, mt_check_record *out, uint32_t max, uint64_t *lost)
{
    uint32_t count;
    *lost = 0;
    if (d->cu->MemcpyDtoHAsync(&count, d->errbuf, sizeof count, d->own) || d->cu->StreamSynchronize(d->own))
        return -EIO;
    uint32_t fresh = count - d->cursor; /* wraps with the counter */
    if (!fresh)
        return 0;
    uint32_t keep = fresh > d->errcap ? d->errcap : fresh;
    if (keep > max)
        keep = max;
    *lost = fresh - keep;
    uint32_t first = count - keep; /* the newest `keep` records */
    for (uint32_t i = 0; i < keep;) {
        uint32_t slot = (first + i) & (d->errcap - 1);
        uint32_t run = d->errcap - slot; /* contiguous up to the ring's end */
        if (run > keep - i)
            run = keep - i;
        if (d->cu->MemcpyDtoHAsync(out + i, d->errbuf + 64 + (uint64_t)slot * MT_CHECK_RECORD_BYTES,
                                   (size_t)run * MT_CHECK_RECORD_BYTES, d->own))
            return -EIO;
        i += run;
    }
    if (d->cu->StreamSynchronize(d->own))
        return -EIO;
    d->cursor = count;
    return keep;
}

int _mt_devcheck_shadow_word(mt_devcheck *d, uint64_t addr, uint64_t *word)
{
    uint64_t node = mt_vmap_root(d->map);
    uint64_t at[3] = {(addr >> 48) * 8, ((addr >> 32) & 0xffff) * 8, ((addr >> 16) & 0xffff) * 8};
    for (int l = 0; l < 3; l++)
        if (d->cu->MemcpyDtoHAsync(&node, node + at[l], 8, d->own) || d->cu->StreamSynchronize(d->own))
            return -EIO;
    if (d->cu->MemcpyDtoHAsync(word, node + ((addr >> 5) & (MT_VMAP_CHUNK_WORDS - 1)) * 8, 8, d->own) ||
        d->cu->StreamSynchronize(d->own))
        return -EIO;
    return 0;
}

static uint64_t probe_local_top(mt_devcheck *d)
{
    uint64_t top = 0;
    uint32_t idx = 3;
    CUdeviceptr out = 0;
    if (!d->probe_fn || d->cu->MemAlloc(&out, 16))
        return 0;
    void *params[] = {&out, &idx};
    if (!d->cu->LaunchKernel(d->probe_fn, 1, 1, 1, 1, 1, 1, 0, d->own, params, NULL))
        d->cu->MemcpyDtoHAsync(&top, out, 8, d->own);
    if (d->cu->StreamSynchronize(d->own))
        top = 0;
    d->cu->MemFree(out);
    /* Plausible: inside the 16 MiB window, above where any frame starts. */
    return top > 0x800000 && top <= 0x1000000 ? top : 0;
}

/* The helper module with the first header the JIT accepts: the GPU's own
 * target with a PTX version that has it, then older ones. */
static int load_helper(mt_devcheck *d)
{
    int sm = d->sm;
    const char *ver = sm >= 120 ? "8.7" : sm >= 100 ? "8.6" : sm >= 89 ? "7.8" : sm >= 86 ? "7.1"
                      : sm >= 80 ? "7.0" : "6.3";
    char own[64];
    snprintf(own, sizeof own, ".version %s\n.target sm_%d\n", ver, sm);
    const char *headers[] = {own, ".version 6.4\n.target sm_75\n", ".version 6.0\n.target sm_70\n"};
    size_t body = strlen(_mt_helper_ptx);
    char *text = malloc(64 + body + 1);
    if (!text)
        return -ENOMEM;
    CUresult r = CUDA_ERROR_NOT_FOUND;
    for (size_t i = 0; i < sizeof headers / sizeof headers[0]; i++) {
        snprintf(text, 64 + body + 1, "%s%s", headers[i], _mt_helper_ptx);
        CUjit_option o[2] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
        void *v[2] = {d->jit_log, (void *)(uintptr_t)sizeof d->jit_log};
        d->jit_log[0] = 0;
        r = d->cu->ModuleLoadDataEx(&d->helper, text, 2, o, v);
        if (r == CUDA_SUCCESS) {
            snprintf(d->ptx_header, sizeof d->ptx_header, "%s", headers[i]);
            break;
        }
    }
    free(text);
    if (r) {
        d->fail_step = "loading the helper kernels";
        d->fail_cu = r;
        return -EIO;
    }
    if ((r = d->cu->ModuleGetFunction(&d->op_fn, d->helper, "_mt_shadow_op")) != 0) {
        d->fail_step = "finding the helper kernels";
        d->fail_cu = r;
        return -EIO;
    }
    /* The probe is optional: without it the local bound is the window's end. */
    size_t n = strlen(d->ptx_header) + strlen(_mt_probe_ptx) + 1;
    char *probe = malloc(n);
    if (!probe || (snprintf(probe, n, "%s%s", d->ptx_header, _mt_probe_ptx), d->cu->ModuleLoadData(&d->probe, probe)) ||
        d->cu->ModuleGetFunction(&d->probe_fn, d->probe, "_mt_local_probe"))
        d->probe_fn = NULL;
    free(probe);
    return 0;
}

int _mt_devcheck_init(mt_devcheck *d, uint32_t errcap)
{
    memset(d, 0, sizeof *d);
    if (!(d->cu = _mt_cu()))
        return -ENOSYS;
    const mt_cu *cu = d->cu;
    int major = 0, minor = 0;
    if (cu->CtxGetCurrent(&d->ctx) || !d->ctx || cu->CtxGetDevice(&d->dev) ||
        cu->DeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d->dev) ||
        cu->DeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d->dev))
        return -ENODEV;
    d->sm = major * 10 + minor;
    d->errcap = errcap ? errcap : MT_PTX_DEFAULT_ERR_CAP;
    while (d->errcap & (d->errcap - 1))
        d->errcap &= d->errcap - 1;
    int rc = -EIO;
    CUresult cr;
    if ((cr = cu->StreamCreate(&d->own, CU_STREAM_NON_BLOCKING)) != 0) {
        d->fail_step = "creating a stream";
        d->fail_cu = cr;
        return -EIO;
    }
    if ((rc = load_helper(d)) != 0)
        goto fail;
    uint64_t a;
    d->fail_step = "allocating device memory";
    if ((rc = dev_alloc(d, MT_CHECK_ERRBUF_BYTES(d->errcap), &a)) != 0)
        goto fail;
    d->errbuf = a;
    if ((rc = dev_alloc(d, 256, &a)) != 0)
        goto fail;
    d->safe = a;
    if ((rc = dev_alloc(d, 256, &a)) != 0)
        goto fail;
    d->sink = a;
    mt_vmap_opts o = {.dev_alloc = dev_alloc, .dev_ctx = d};
    d->fail_step = "creating the device map";
    if ((rc = mt_vmap_create(&o, &d->map)) != 0 || (rc = sync_structure(d)) != 0)
        goto fail;
    d->fail_step = NULL;
    d->local_top = probe_local_top(d);
    d->local_top_measured = d->local_top != 0;
    if (!d->local_top)
        d->local_top = MT_LOCAL_TOP_FALLBACK;
    return 0;
fail:
    _mt_devcheck_fini(d);
    return rc ? rc : -EIO;
}

void _mt_devcheck_fini(mt_devcheck *d)
{
    /* Device memory of the map goes with the context; the host side here. */
    mt_vmap_destroy(d->map);
    d->map = NULL;
}
