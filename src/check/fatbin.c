/* Finding the PTX in what cuModuleLoadData and cuLibraryLoadData receive.
 *
 * A fatbinary is a 16-byte header (magic 0xBA55ED50, version, header size,
 * size of what follows) and entries, each a header of its own size followed
 * by its payload: kind 1 is PTX, kind 2 an ELF cubin. Entry fields used here
 * (offsets in the entry header): kind u16 @0, header size u32 @4, payload size
 * u32 @8 (padded to 8), compressed size u32 @16, virtual architecture u32 @28,
 * flags u64 @40 (0x2000: LZ4, 0x8000: zstd; CUDA 13 compresses PTX with zstd
 * by default), uncompressed size u64 @56. The CUDA runtime passes a wrapper
 * instead: {u32 magic 0x466243B1, u32 version 1|2, const void *fatbin, ...}.
 * LZ4 (older toolkits) is decoded with liblz4, loaded when first needed.
 * Containers whose entries hold no code at all (nvcc emits an empty ELF per
 * translation unit) are told apart: -ENODATA. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "memtrack/check.h"

#define FATBIN_MAGIC 0xBA55ED50u
#define WRAPPER_MAGIC 0x466243B1u
#define FLAG_LZ4 0x2000ull
#define FLAG_ZSTD 0x8000ull
#define MAX_PTX (1ull << 30)

static uint32_t rd32(const unsigned char *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t rd64(const unsigned char *p) { uint64_t v; memcpy(&v, p, 8); return v; }

typedef int (*lz4_fn)(const char *src, char *dst, int src_size, int dst_cap);

static lz4_fn lz4_decoder(void)
{
    static lz4_fn fn;
    static int tried;
    if (!tried) { /* benign race: every thread finds the same function */
        void *h = dlopen("liblz4.so.1", RTLD_NOW | RTLD_LOCAL);
        fn = h ? (lz4_fn)(uintptr_t)dlsym(h, "LZ4_decompress_safe") : NULL;
        tried = 1;
    }
    return fn;
}

static int extract(const unsigned char *entry, const unsigned char *data, uint32_t payload,
                   char **ptx, size_t *len)
{
    uint64_t flags = rd64(entry + 40), unc = rd64(entry + 56);
    uint32_t csz = rd32(entry + 16);
    char *out;
    if (flags & (FLAG_LZ4 | FLAG_ZSTD)) {
        if (!unc || unc > MAX_PTX || !csz || csz > payload)
            return MT_ECORRUPT;
        if (!(out = malloc(unc + 1)))
            return -ENOMEM;
        if (flags & FLAG_ZSTD) {
            size_t got = ZSTD_decompress(out, unc, data, csz);
            if (ZSTD_isError(got) || got != unc) {
                free(out);
                return MT_ECORRUPT;
            }
        } else {
            lz4_fn lz4 = lz4_decoder();
            if (!lz4) {
                free(out);
                return MT_EUNSUPPORTED; /* liblz4.so.1 is not installed */
            }
            if (unc > 0x7fffffff || lz4((const char *)data, out, (int)csz, (int)unc) != (int)unc) {
                free(out);
                return MT_ECORRUPT;
            }
        }
        out[unc] = 0;
    } else {
        if (!(out = malloc((size_t)payload + 1)))
            return -ENOMEM;
        memcpy(out, data, payload);
        out[payload] = 0;
    }
    *ptx = out;
    *len = strlen(out); /* the payload is padded with NULs */
    return 0;
}

/* Does an ELF entry hold machine code (a .text.<kernel> section)? Compressed
 * entries are looked into after decompression. */
static int elf_has_code(const unsigned char *entry, const unsigned char *data, uint32_t payload)
{
    char *elf = NULL;
    size_t len = 0;
    int code = 1; /* when in doubt, say there is code: the caller then warns */
    if (extract(entry, data, payload, &elf, &len) == 0) {
        uint64_t flags = rd64(entry + 40);
        size_t n = (flags & (FLAG_LZ4 | FLAG_ZSTD)) ? (size_t)rd64(entry + 56) : payload;
        code = memmem(elf, n, ".text.", 6) != NULL;
        free(elf);
    }
    return code;
}

/* One container at p; `avail` bytes readable (0: trust the header). */
static int from_fatbin(const unsigned char *p, size_t avail, int sm, char **ptx, size_t *len, size_t *used)
{
    uint16_t hsize = (uint16_t)(p[6] | p[7] << 8);
    uint64_t body = rd64(p + 8), total = hsize + body;
    if (hsize < 16 || body > (1ull << 40) || (avail && total > avail))
        return MT_ECORRUPT;
    *used = (size_t)total;
    const unsigned char *best = NULL;
    uint32_t best_arch = 0;
    int code = 0;
    for (uint64_t off = hsize; off < total;) {
        const unsigned char *e = p + off;
        if (total - off < 64)
            return MT_ECORRUPT;
        uint32_t ehs = rd32(e + 4), payload = rd32(e + 8), arch = rd32(e + 28);
        if (ehs < 64 || (uint64_t)ehs + payload > total - off)
            return MT_ECORRUPT;
        uint16_t kind = (uint16_t)(e[0] | e[1] << 8);
        if (kind == 1 && arch <= (uint32_t)sm && arch >= best_arch) {
            best = e;
            best_arch = arch;
        } else if (kind != 1 && !code) {
            code = elf_has_code(e, e + ehs, payload);
        }
        off += (uint64_t)ehs + payload;
    }
    if (!best)
        return code ? -ENOENT : -ENODATA;
    return extract(best, best + rd32(best + 4), rd32(best + 8), ptx, len);
}

int mt_check_find_ptx(const void *image, size_t size, int sm, char **ptx, size_t *len)
{
    if (!image || !ptx || !len)
        return -EINVAL;
    const unsigned char *p = image;
    if (size && size < 4)
        return MT_ECORRUPT;
    uint32_t magic = rd32(p);
    if (magic == WRAPPER_MAGIC && (rd32(p + 4) == 1 || rd32(p + 4) == 2)) {
        const void *inner;
        memcpy(&inner, p + 8, sizeof inner);
        if (!inner)
            return MT_ECORRUPT;
        return mt_check_find_ptx(inner, 0, sm, ptx, len);
    }
    if (magic == FATBIN_MAGIC || magic == WRAPPER_MAGIC) { /* 0x466243B1 also heads relocatable containers */
        /* Containers may follow each other (a whole .nv_fatbin section). */
        int rc = -ENODATA;
        size_t off = 0;
        while (!size || off + 16 <= size) {
            size_t used = 0;
            uint32_t m = rd32(p + off);
            if (m != FATBIN_MAGIC && m != WRAPPER_MAGIC)
                break;
            int one = from_fatbin(p + off, size ? size - off : 0, sm, ptx, len, &used);
            if (one == 0 || (one != -ENOENT && one != -ENODATA) || !size)
                return one;
            if (rc != -ENOENT)
                rc = one; /* -ENOENT (code without PTX) wins over -ENODATA */
            off += (used + 7) & ~(size_t)7;
        }
        return rc;
    }
    if (magic == 0x464c457fu) /* "\x7fELF": a cubin, machine code only */
        return -ENOENT;
    /* PTX text: what the first non-blank characters say. */
    size_t max = size ? size : MAX_PTX, i = 0;
    while (i < max && (p[i] == ' ' || p[i] == '\t' || p[i] == '\n' || p[i] == '\r'))
        i++;
    if (i < max && (p[i] == '/' || p[i] == '.')) {
        size_t n = strnlen((const char *)p, max);
        char *out = malloc(n + 1);
        if (!out)
            return -ENOMEM;
        memcpy(out, p, n);
        out[n] = 0;
        *ptx = out;
        *len = n;
        return 0;
    }
    return MT_ECORRUPT;
}
