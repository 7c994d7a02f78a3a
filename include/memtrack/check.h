/* memtrack check: address validity for GPU kernels, after Panoptes.
 *
 * Three parts, all plain C and usable without a GPU:
 *
 *  - the validity map (mt_vmap): for a 64-bit address space, which bytes are
 *    addressable and which of those hold initialised data, in a layout that is
 *    copied to device memory and read there directly by instrumented kernels;
 *  - the PTX instrumenter (mt_ptx_instrument): rewrites PTX text so that every
 *    ld/st/atom/red/prefetch/prefetchu in the global and generic spaces (and
 *    ld/st in the local space) is checked first against the map, and a failing
 *    access is redirected to a safe address and recorded in a device buffer;
 *  - the error records and the report (mt_check_format): what a failing check
 *    wrote, turned into text a person can act on.
 *
 * The CUDA side (libmemtrack_check.so, `memtrack check -- app`) lives in
 * src/check/runtime and is documented in docs/check.md.
 *
 * Layout of the map, as the device reads it (all little-endian 64-bit words):
 *
 *   root:  65536 entries indexed by address bits 63..48 -> a middle node
 *   middle: 65536 entries indexed by bits 47..32 -> a leaf
 *   leaf:  65536 entries indexed by bits 31..16 -> a chunk (64 KiB of addresses)
 *   chunk: 2048 shadow words; word (a & 0xffff) >> 5 describes the 32 bytes
 *          starting at a & ~31: bit i (0..31) = byte i addressable (A),
 *          bit 32 + i = byte i initialised (V). V is only ever set where A is.
 *
 * Every entry holds the device address of the next level; absent parts point
 * to shared empty nodes and to one all-zero "no access" chunk, so a lookup is
 * always exactly four dependent loads and never tests for NULL. */
#ifndef MEMTRACK_CHECK_H
#define MEMTRACK_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "memtrack/base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- layout ---------------------------------------------------------------- */

#define MT_VMAP_LEVEL_BITS 16u
#define MT_VMAP_ENTRIES (1u << MT_VMAP_LEVEL_BITS)   /* entries per node */
#define MT_VMAP_NODE_BYTES (MT_VMAP_ENTRIES * 8u)     /* 512 KiB */
#define MT_VMAP_CHUNK_SPAN (1u << 16)                 /* addresses per chunk */
#define MT_VMAP_GROUP_BYTES 32u                       /* bytes per shadow word */
#define MT_VMAP_CHUNK_WORDS (MT_VMAP_CHUNK_SPAN / MT_VMAP_GROUP_BYTES) /* 2048 */
#define MT_VMAP_CHUNK_BYTES (MT_VMAP_CHUNK_WORDS * 8u) /* 16 KiB */

/* Errors: MT_ECHECK_NOACCESS, MT_ECHECK_UNINIT, MT_ECHECK_PTX (memtrack/base.h). */

/* ---- validity map ------------------------------------------------------------ */

typedef struct mt_vmap mt_vmap;

typedef enum mt_vmap_state {
    MT_VMAP_NOACCESS = 0,  /* not addressable (unregistered, red zone, freed) */
    MT_VMAP_UNDEFINED = 1, /* addressable, contents not initialised */
    MT_VMAP_DEFINED = 2,   /* addressable and initialised */
} mt_vmap_state;

typedef enum mt_vmap_access {
    MT_VMAP_READ = 1,  /* needs A and V on every byte */
    MT_VMAP_WRITE = 2, /* needs A on every byte */
} mt_vmap_access;

/* Allocates `size` bytes of zero-filled device memory and stores its device
 * address in *dev_addr. Returns 0 or a negative error. */
typedef int (*mt_vmap_dev_alloc_fn)(void *ctx, size_t size, uint64_t *dev_addr);
/* Copies `len` bytes from host `src` to device address `dev`. Returns 0 or a
 * negative error. */
typedef int (*mt_vmap_upload_fn)(void *ctx, uint64_t dev, const void *src, size_t len);

typedef struct mt_vmap_opts {
    /* NULL: a host map. Nodes and chunks live in host memory, every "device
     * address" in the image is the host address, the map keeps the A and V
     * bits itself and answers mt_vmap_query.
     * Set: a device map. Node images are kept on the host and mirrored to
     * device memory from dev_alloc by mt_vmap_sync; chunks (the bits) live
     * only on the device, where the caller applies each range operation (see
     * mt_vmap_op) in order; mt_vmap_query is not available. */
    mt_vmap_dev_alloc_fn dev_alloc;
    void *dev_ctx;
    uint64_t reserved[4]; /* zero: room to grow (docs/design.md, "Options") */
} mt_vmap_opts;

/* Range operations as the device applies them to the shadow words of
 * [lo, hi): the reference semantics of mt_vmap_set and mt_vmap_mark_valid. */
typedef enum mt_vmap_op {
    MT_VMAP_OP_NOACCESS = 0,  /* A = 0, V = 0 */
    MT_VMAP_OP_UNDEFINED = 1, /* A = 1, V = 0 */
    MT_VMAP_OP_DEFINED = 2,   /* A = 1, V = 1 */
    MT_VMAP_OP_VALID = 3,     /* V |= A */
} mt_vmap_op;

typedef struct mt_vmap_stats {
    uint64_t nodes;        /* interior nodes and leaves, excluding the shared empty ones */
    uint64_t chunks;       /* chunks in use */
    uint64_t free_chunks;  /* chunks kept for reuse */
    uint64_t shadow_bytes; /* node images + chunks, host or device */
} mt_vmap_stats;

/* Creates an empty map (every address not addressable). opts may be NULL
 * (host map). Returns 0, -ENOMEM, or the error of opts->dev_alloc.
 * A map is not thread-safe: callers serialise every call on one map. */
MT_API int mt_vmap_create(const mt_vmap_opts *opts, mt_vmap **out);

/* Frees the map and its host memory (device memory from dev_alloc is the
 * caller's to free). NULL is a no-op. */
MT_API void mt_vmap_destroy(mt_vmap *m);

/* Sets every byte of [base, base + size) to `state`: registering an
 * allocation (UNDEFINED, or DEFINED for memory the host writes directly),
 * unregistering it (NOACCESS). Cost: one entry per 64 KiB chunk touched plus,
 * on a host map, the range's shadow words; independent of how many ranges
 * are registered. Returns 0, -EINVAL (size 0, wraps past 2^64, bad state),
 * -ENOMEM. */
MT_API int mt_vmap_set(mt_vmap *m, uint64_t base, uint64_t size, mt_vmap_state state);

/* Marks the addressable bytes of [base, base + size) initialised (a copy or
 * memset wrote them); bytes that are not addressable stay so. Returns 0 or
 * -EINVAL. */
MT_API int mt_vmap_mark_valid(mt_vmap *m, uint64_t base, uint64_t size);

/* Host map: checks an access of `size` bytes at `addr`. Returns 0 when every
 * byte passes, MT_ECHECK_NOACCESS or MT_ECHECK_UNINIT for the first byte that
 * does not (its address in *bad when bad is not NULL), -EINVAL for size 0 or a
 * wrapping range, MT_EUNSUPPORTED on a device map. */
MT_API int mt_vmap_query(const mt_vmap *m, uint64_t addr, uint64_t size, mt_vmap_access access,
                         uint64_t *bad);

/* The device address of the root node: what instrumented kernels start their
 * lookup from. Constant for the map's life. */
MT_API uint64_t mt_vmap_root(const mt_vmap *m);

/* Device map: hands every node entry changed since the last call to
 * `upload`, in order, then forgets them. Call before any kernel may read the
 * entries (the runtime calls it right after each mt_vmap_set). Host map: a
 * no-op. Returns 0 or the first error of `upload` (entries stay pending). */
MT_API int mt_vmap_sync(mt_vmap *m, mt_vmap_upload_fn upload, void *ctx);

/* Host map: releases chunks with no addressable byte left (entries point back
 * to the no-access chunk) and returns how many. Device map: returns 0 (its
 * chunks stay until destroy, bounded by the peak footprint). */
MT_API size_t mt_vmap_trim(mt_vmap *m);

/* Fills *st. Any time the map is not being modified. */
MT_API void mt_vmap_stats_get(const mt_vmap *m, mt_vmap_stats *st);

/* Host map only: the shadow word for `addr`, found exactly as an instrumented
 * kernel finds it (four dependent loads from the root image). For tests and
 * for the C reference of the device check. */
MT_API const uint64_t *mt_vmap_shadow_word(uint64_t root, uint64_t addr);

/* Applies range operation `op` to one shadow word: `mask` selects the bytes of
 * its 32-byte group. The reference for the device's shadow-op kernel. */
MT_API uint64_t mt_vmap_apply_word(uint64_t word, uint32_t mask, mt_vmap_op op);

/* ---- error records ------------------------------------------------------------ */

/* What an instrumented kernel writes when a check fails. */
typedef enum mt_check_kind {
    MT_CHECK_MISALIGNED = 1,    /* address not aligned to the access size */
    MT_CHECK_LOCAL_BOUND = 2,   /* local address beyond the top of the local window */
    MT_CHECK_NOACCESS = 3,      /* global address not addressable */
    MT_CHECK_UNINIT = 4,        /* load of bytes never initialised (not redirected) */
} mt_check_kind;

/* The device error buffer: a header, then `capacity` records used as a ring.
 * `count` only grows (atomic add by the failing threads); the host keeps its
 * own cursor, so nothing needs resetting between launches. */
typedef struct mt_check_errbuf_header {
    uint32_t count;
    uint32_t reserved[15];
} mt_check_errbuf_header;

typedef struct mt_check_record {
    uint64_t addr;      /* the address the instruction used */
    uint32_t site;      /* mt_check_site.id */
    uint32_t kind;      /* mt_check_kind */
    uint32_t block[3];  /* %ctaid */
    uint32_t thread[3]; /* %tid */
    uint32_t reserved[2];
} mt_check_record;

#define MT_CHECK_RECORD_BYTES 48u
#define MT_CHECK_ERRBUF_BYTES(cap) (64u + (uint64_t)(cap) * MT_CHECK_RECORD_BYTES)

/* ---- PTX instrumenter ---------------------------------------------------------- */

typedef enum mt_check_access {
    MT_CHECK_LOAD = 1,
    MT_CHECK_STORE = 2,
    MT_CHECK_ATOMIC = 3, /* atom (reads and writes) */
    MT_CHECK_REDUCE = 4, /* red (reads and writes, returns nothing) */
    MT_CHECK_PREFETCH = 5,
} mt_check_access;

typedef enum mt_check_space {
    MT_CHECK_GENERIC = 1,
    MT_CHECK_GLOBAL = 2,
    MT_CHECK_LOCAL = 3,
} mt_check_space;

/* One instrumented instruction. Strings point into the result. */
typedef struct mt_check_site {
    uint32_t id;
    uint8_t access;      /* mt_check_access */
    uint8_t space;       /* mt_check_space */
    uint8_t size;        /* bytes accessed (prefetch: 1) */
    uint8_t uniform;     /* prefetchu */
    const char *function; /* the .entry or .func it is in */
    const char *text;    /* the instruction as written, without the trailing ';' */
    uint32_t ptx_line;   /* 1-based line in the input PTX */
    const char *file;    /* source file from the last .loc, or NULL */
    uint32_t src_line;   /* source line from the last .loc, or 0 */
} mt_check_site;

/* A variable the module defines in the global or const space; its generic
 * address is in the module's table (see MT_PTX_GLOBALS_TABLE). */
typedef struct mt_check_variable {
    const char *name;
    uint64_t size;
    uint8_t is_const;
} mt_check_variable;

#define MT_PTX_GLOBALS_TABLE "__memtrack_check_globals"
#define MT_PTX_DEFAULT_LOCAL_TOP 0xFFFCA0u /* Panoptes's bound; measure per device */
#define MT_PTX_DEFAULT_ERR_CAP 4096u

enum mt_ptx_flags {
    MT_PTX_NO_INIT_CHECK = 1u << 0, /* skip validity bits (addressability only) */
    MT_PTX_NO_LOCAL = 1u << 1,      /* leave explicit .local accesses alone */
};

typedef struct mt_ptx_opts {
    uint64_t map_root;    /* mt_vmap_root() of the device map */
    uint64_t err_buf;     /* device address of the error buffer */
    uint32_t err_cap;     /* its records; 0: MT_PTX_DEFAULT_ERR_CAP */
    uint32_t site_base;   /* id of the first site */
    uint64_t safe_load;   /* >= 256 readable bytes, 256-aligned: failed loads and prefetches */
    uint64_t safe_store;  /* >= 256 writable bytes, 256-aligned: failed stores and atomics */
    uint64_t local_top;   /* top of the local window; 0: MT_PTX_DEFAULT_LOCAL_TOP */
    uint32_t flags;       /* mt_ptx_flags */
    uint64_t reserved[4]; /* zero: room to grow (docs/design.md, "Options") */
} mt_ptx_opts;

typedef struct mt_ptx_result {
    char *text;              /* the instrumented PTX, NUL-terminated */
    size_t len;
    mt_check_site *sites;    /* ids site_base .. site_base + nsites - 1 */
    size_t nsites;
    mt_check_variable *vars; /* in the order of the table's entries */
    size_t nvars;
    char **notes;            /* what was passed through uninstrumented, and why */
    size_t nnotes;
    uint32_t functions;      /* .entry and .func bodies seen */
    uint32_t skipped;        /* memory instructions left uninstrumented */
    uint32_t unknown;        /* instructions whose opcode is not PTX as known here */
} mt_ptx_result;

/* Instruments `len` bytes of PTX text (NUL not required). On success *out
 * holds the result (free with mt_ptx_result_free) and 0 is returned; the
 * output assembles wherever the input did and computes the same results when
 * no check fails. Returns -EINVAL (NULL arguments), MT_ECHECK_PTX (text that
 * is not PTX this parser understands: no .version/.target, 32-bit addresses,
 * unbalanced braces; *out is NULL), -ENOMEM. Any thread. */
MT_API int mt_ptx_instrument(const char *ptx, size_t len, const mt_ptx_opts *opts,
                             mt_ptx_result **out);

/* Frees a result. NULL is a no-op. */
MT_API void mt_ptx_result_free(mt_ptx_result *r);

/* ---- fatbinaries ------------------------------------------------------------- */

/* Finds the PTX of an image handed to cuModuleLoadData/cuLibraryLoadData: PTX
 * text, a fatbinary (0xBA55ED50) or its wrapper (0x466243B1). Picks the PTX
 * with the highest virtual architecture <= sm (e.g. 90), decompressing it
 * (zstd or LZ4) into a malloc'd NUL-terminated *ptx of *len bytes (free()).
 * `size` bounds the reads when known, 0 when the image is only a pointer
 * (the fatbinary header then gives the size). Returns 0, -ENOENT (an ELF
 * cubin, or a fatbinary with code but no suitable PTX), -ENODATA (a
 * fatbinary with no code at all), MT_ECORRUPT, MT_EUNSUPPORTED (LZ4 without
 * liblz4.so.1), -ENOMEM. Any thread. */
MT_API int mt_check_find_ptx(const void *image, size_t size, int sm, char **ptx, size_t *len);

/* ---- reports ----------------------------------------------------------------- */

/* What the runtime knows about the memory around a failing address. */
typedef struct mt_check_where {
    int relation;          /* 0 unknown, 1 inside, 2 before, 3 after, 4 inside freed */
    uint64_t alloc_base;   /* the allocation the address relates to */
    uint64_t alloc_size;
    uint64_t alloc_serial; /* n-th allocation of the process */
    const char *alloc_api; /* e.g. "cuMemAlloc" */
} mt_check_where;

/* Writes the report of one failing check into buf (at most cap bytes, always
 * NUL-terminated): what failed, where in which kernel and thread, and what the
 * address relates to. `more` is how many further records of the same site and
 * kind were folded into this one. `demangled` may be NULL. Returns the length
 * the full report has (snprintf-style). Any thread. */
MT_API size_t mt_check_format(char *buf, size_t cap, const mt_check_record *rec,
                              const mt_check_site *site, const char *demangled,
                              const mt_check_where *where, uint64_t more);

/* Short name of a kind ("misaligned", ...); "unknown" otherwise. */
MT_API const char *mt_check_kind_name(uint32_t kind);

#ifdef __cplusplus
}
#endif
#endif
