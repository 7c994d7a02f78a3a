/* The validity map: a three-level radix over the 64-bit address space whose
 * image (node entries holding device addresses) is what instrumented kernels
 * walk. See include/memtrack/check.h for the layout.
 *
 * Invariants:
 *  - every image entry is a valid address of the next level: a real node or
 *    chunk, or one of the shared empty nodes / the no-access chunk, so a walk
 *    never meets NULL;
 *  - V bits are only set where A bits are (mark_valid ORs in A), so a chunk
 *    whose A bits are all clear is all zeros and can go back to the free list;
 *  - host map: image entries are host addresses; device map: device addresses,
 *    and `child` holds the host-side objects the entries stand for. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "memtrack/check.h"

#define ENTRIES MT_VMAP_ENTRIES
#define WORDS MT_VMAP_CHUNK_WORDS
#define CHUNKS_PER_SLAB 256u /* device map: chunks per dev_alloc call (4 MiB) */

typedef struct vchunk {
    uint64_t dev;          /* address in the image */
    uint64_t *words;       /* host map: the shadow words; device map: NULL */
    struct vchunk *next;   /* free list */
    uint32_t addressable;  /* host map: bytes with A set */
} vchunk;

typedef struct vnode {
    uint64_t *img;    /* ENTRIES entries, exactly as the device sees them */
    void **child;     /* host objects behind the entries (NULL: empty) */
    uint64_t dev;     /* address of img in the image */
    uint32_t dirty_lo, dirty_hi; /* device map: entries to upload, [lo, hi) */
    int level;        /* 0 root, 1 middle, 2 leaf */
} vnode;

struct mt_vmap {
    int device;
    mt_vmap_opts opts;
    vnode *root;
    vnode *empty_mid, *empty_leaf; /* shared; never written after creation */
    uint64_t noaccess_dev;
    uint64_t *noaccess_words;      /* host map */
    vnode **nodes;                 /* every node, for sync, stats and destroy */
    size_t nnodes, capnodes;
    vchunk **chunk_blocks;         /* vchunk structs, allocated in blocks */
    size_t nblocks, capblocks;
    vchunk *spare;                 /* unused vchunk structs of the last block */
    size_t spare_left;
    vchunk *free_chunks;
    uint64_t slab_dev;             /* device map: rest of the current chunk slab */
    size_t slab_left;
    uint64_t chunks, free_count;
};

static uint32_t idx0(uint64_t a) { return (uint32_t)(a >> 48); }
static uint32_t idx1(uint64_t a) { return (uint32_t)(a >> 32) & (ENTRIES - 1); }
static uint32_t idx2(uint64_t a) { return (uint32_t)(a >> 16) & (ENTRIES - 1); }

static int push_node(mt_vmap *m, vnode *n)
{
    if (m->nnodes == m->capnodes) {
        size_t cap = m->capnodes ? m->capnodes * 2 : 16;
        vnode **nn = realloc(m->nodes, cap * sizeof *nn);
        if (!nn)
            return -ENOMEM;
        m->nodes = nn;
        m->capnodes = cap;
    }
    m->nodes[m->nnodes++] = n;
    return 0;
}

/* A node whose every entry is `fill`. Device map: its whole image is pending
 * upload. */
static int new_node(mt_vmap *m, int level, uint64_t fill, vnode **out)
{
    vnode *n = calloc(1, sizeof *n);
    if (!n)
        return -ENOMEM;
    n->level = level;
    n->img = malloc(MT_VMAP_NODE_BYTES);
    n->child = calloc(ENTRIES, sizeof *n->child);
    int rc = -ENOMEM;
    if (!n->img || !n->child)
        goto fail;
    for (uint32_t i = 0; i < ENTRIES; i++)
        n->img[i] = fill;
    if (m->device) {
        if ((rc = m->opts.dev_alloc(m->opts.dev_ctx, MT_VMAP_NODE_BYTES, &n->dev)) != 0)
            goto fail;
        n->dirty_lo = 0;
        n->dirty_hi = ENTRIES;
    } else {
        n->dev = (uint64_t)(uintptr_t)n->img;
    }
    if ((rc = push_node(m, n)) != 0)
        goto fail;
    *out = n;
    return 0;
fail:
    free(n->img);
    free(n->child);
    free(n);
    return rc;
}

static void set_entry(vnode *n, uint32_t i, uint64_t value, void *child)
{
    n->img[i] = value;
    n->child[i] = child;
    if (n->dirty_lo >= n->dirty_hi) {
        n->dirty_lo = i;
        n->dirty_hi = i + 1;
    } else {
        if (i < n->dirty_lo)
            n->dirty_lo = i;
        if (i >= n->dirty_hi)
            n->dirty_hi = i + 1;
    }
}

static vchunk *new_chunk_struct(mt_vmap *m)
{
    if (!m->spare_left) {
        if (m->nblocks == m->capblocks) {
            size_t cap = m->capblocks ? m->capblocks * 2 : 16;
            vchunk **nb = realloc(m->chunk_blocks, cap * sizeof *nb);
            if (!nb)
                return NULL;
            m->chunk_blocks = nb;
            m->capblocks = cap;
        }
        vchunk *blk = calloc(256, sizeof *blk);
        if (!blk)
            return NULL;
        m->chunk_blocks[m->nblocks++] = blk;
        m->spare = blk;
        m->spare_left = 256;
    }
    m->spare_left--;
    return m->spare++;
}

static int alloc_chunk(mt_vmap *m, vchunk **out)
{
    vchunk *c = m->free_chunks;
    if (c) { /* zero by the invariant: no A bit, hence no V bit */
        m->free_chunks = c->next;
        m->free_count--;
        c->next = NULL;
        *out = c;
        return 0;
    }
    if (!(c = new_chunk_struct(m)))
        return -ENOMEM;
    if (m->device) {
        if (!m->slab_left) {
            int rc = m->opts.dev_alloc(m->opts.dev_ctx, (size_t)CHUNKS_PER_SLAB * MT_VMAP_CHUNK_BYTES,
                                       &m->slab_dev);
            if (rc) {
                m->spare--; /* give the struct back */
                m->spare_left++;
                return rc;
            }
            m->slab_left = CHUNKS_PER_SLAB;
        }
        c->dev = m->slab_dev;
        m->slab_dev += MT_VMAP_CHUNK_BYTES;
        m->slab_left--;
    } else {
        if (!(c->words = calloc(WORDS, sizeof *c->words))) {
            m->spare--;
            m->spare_left++;
            return -ENOMEM;
        }
        c->dev = (uint64_t)(uintptr_t)c->words;
    }
    *out = c;
    return 0;
}

/* The chunk covering `a`, created with its leaf and middle node if needed. */
static int ensure_chunk(mt_vmap *m, uint64_t a, vchunk **out)
{
    vnode *mid = m->root->child[idx0(a)];
    int rc;
    if (!mid) {
        if ((rc = new_node(m, 1, m->empty_leaf->dev, &mid)) != 0)
            return rc;
        set_entry(m->root, idx0(a), mid->dev, mid);
    }
    vnode *leaf = mid->child[idx1(a)];
    if (!leaf) {
        if ((rc = new_node(m, 2, m->noaccess_dev, &leaf)) != 0)
            return rc;
        set_entry(mid, idx1(a), leaf->dev, leaf);
    }
    vchunk *c = leaf->child[idx2(a)];
    if (!c) {
        if ((rc = alloc_chunk(m, &c)) != 0)
            return rc;
        set_entry(leaf, idx2(a), c->dev, c);
        m->chunks++;
    }
    *out = c;
    return 0;
}

static vchunk *find_chunk(const mt_vmap *m, uint64_t a)
{
    vnode *mid = m->root->child[idx0(a)];
    vnode *leaf = mid ? mid->child[idx1(a)] : NULL;
    return leaf ? leaf->child[idx2(a)] : NULL;
}

uint64_t mt_vmap_apply_word(uint64_t word, uint32_t mask, mt_vmap_op op)
{
    uint64_t m = mask, both = m | m << 32;
    switch (op) {
    case MT_VMAP_OP_NOACCESS: return word & ~both;
    case MT_VMAP_OP_UNDEFINED: return (word | m) & ~(m << 32);
    case MT_VMAP_OP_DEFINED: return word | both;
    case MT_VMAP_OP_VALID: return word | (word & m) << 32;
    }
    return word;
}

/* Bits of the bytes [first, last] of the group that starts at g
 * (inclusive bounds: a range may end at 2^64 - 1). */
static uint32_t group_mask(uint64_t g, uint64_t first, uint64_t last)
{
    unsigned a = (unsigned)(first - g), b = (unsigned)(last - g);
    return (0xffffffffu >> (31 - b)) & (0xffffffffu << a);
}

/* Host map: applies `op` to the bytes [first, last] of one chunk. */
static void apply_range(vchunk *c, uint64_t first, uint64_t last, mt_vmap_op op)
{
    uint64_t g = first & ~(uint64_t)(MT_VMAP_GROUP_BYTES - 1);
    uint64_t *w = &c->words[(first & (MT_VMAP_CHUNK_SPAN - 1)) / MT_VMAP_GROUP_BYTES];
    int32_t delta = 0;
    for (;; g += MT_VMAP_GROUP_BYTES, w++) {
        uint64_t g_last = g + (MT_VMAP_GROUP_BYTES - 1);
        uint64_t a = g < first ? first : g, b = g_last > last ? last : g_last;
        uint64_t old = *w, nw = mt_vmap_apply_word(old, group_mask(g, a, b), op);
        delta += __builtin_popcount((uint32_t)nw) - __builtin_popcount((uint32_t)old);
        *w = nw;
        if (g_last >= last)
            break;
    }
    c->addressable = (uint32_t)((int64_t)c->addressable + delta);
}

static int check_range(uint64_t base, uint64_t size)
{
    if (size == 0 || base + (size - 1) < base)
        return -EINVAL;
    return 0;
}

int mt_vmap_set(mt_vmap *m, uint64_t base, uint64_t size, mt_vmap_state state)
{
    if (!m || check_range(base, size) || (unsigned)state > MT_VMAP_DEFINED)
        return -EINVAL;
    mt_vmap_op op = state == MT_VMAP_NOACCESS ? MT_VMAP_OP_NOACCESS
                    : state == MT_VMAP_UNDEFINED ? MT_VMAP_OP_UNDEFINED
                                                 : MT_VMAP_OP_DEFINED;
    uint64_t last = base + (size - 1);
    uint64_t lo = base;
    for (;;) {
        uint64_t piece_last = lo | (MT_VMAP_CHUNK_SPAN - 1);
        if (piece_last > last)
            piece_last = last;
        vchunk *c = NULL;
        if (state == MT_VMAP_NOACCESS) {
            c = find_chunk(m, lo);
        } else {
            int rc = ensure_chunk(m, lo, &c);
            if (rc)
                return rc;
        }
        if (c && !m->device)
            apply_range(c, lo, piece_last, op);
        if (piece_last == last)
            break;
        lo = piece_last + 1;
    }
    return 0;
}

int mt_vmap_mark_valid(mt_vmap *m, uint64_t base, uint64_t size)
{
    if (!m || check_range(base, size))
        return -EINVAL;
    if (m->device)
        return 0; /* the device applies MT_VMAP_OP_VALID; no structure changes */
    uint64_t last = base + (size - 1), lo = base;
    for (;;) {
        uint64_t piece_last = lo | (MT_VMAP_CHUNK_SPAN - 1);
        if (piece_last > last)
            piece_last = last;
        vchunk *c = find_chunk(m, lo);
        if (c)
            apply_range(c, lo, piece_last, MT_VMAP_OP_VALID);
        if (piece_last == last)
            break;
        lo = piece_last + 1;
    }
    return 0;
}

int mt_vmap_query(const mt_vmap *m, uint64_t addr, uint64_t size, mt_vmap_access access, uint64_t *bad)
{
    if (!m || check_range(addr, size) || (access != MT_VMAP_READ && access != MT_VMAP_WRITE))
        return -EINVAL;
    if (m->device)
        return MT_EUNSUPPORTED;
    uint64_t last = addr + (size - 1);
    uint64_t g = addr & ~(uint64_t)(MT_VMAP_GROUP_BYTES - 1);
    for (;;) {
        uint64_t a = g < addr ? addr : g;
        uint64_t b_last = g + (MT_VMAP_GROUP_BYTES - 1) > last ? last : g + (MT_VMAP_GROUP_BYTES - 1);
        uint32_t mask = group_mask(g, a, b_last);
        const vchunk *c = find_chunk(m, g);
        uint64_t w = c ? c->words[(g & (MT_VMAP_CHUNK_SPAN - 1)) / MT_VMAP_GROUP_BYTES] : 0;
        uint32_t A = (uint32_t)w, V = (uint32_t)(w >> 32);
        uint32_t noacc = mask & ~A;
        uint32_t uninit = access == MT_VMAP_READ ? mask & A & ~V : 0;
        if (noacc | uninit) {
            unsigned first = (unsigned)__builtin_ctz(noacc | uninit);
            if (bad)
                *bad = g + first;
            return (noacc >> first) & 1 ? MT_ECHECK_NOACCESS : MT_ECHECK_UNINIT;
        }
        if (b_last == last)
            return 0;
        g += MT_VMAP_GROUP_BYTES;
    }
}

uint64_t mt_vmap_root(const mt_vmap *m)
{
    return m ? m->root->dev : 0;
}

const uint64_t *mt_vmap_shadow_word(uint64_t root, uint64_t addr)
{
    /* The same four dependent loads as the instrumented code (src/check/ptx/emit.c). */
    const uint64_t *r = (const uint64_t *)(uintptr_t)root;
    const uint64_t *mid = (const uint64_t *)(uintptr_t)r[addr >> 48];
    const uint64_t *leaf = (const uint64_t *)(uintptr_t)mid[(addr >> 32) & 0xffff];
    const uint64_t *chunk = (const uint64_t *)(uintptr_t)leaf[(addr >> 16) & 0xffff];
    return &chunk[(addr >> 5) & (WORDS - 1)];
}

int mt_vmap_sync(mt_vmap *m, mt_vmap_upload_fn upload, void *ctx)
{
    if (!m || !upload)
        return -EINVAL;
    if (!m->device)
        return 0;
    for (size_t i = 0; i < m->nnodes; i++) {
        vnode *n = m->nodes[i];
        if (n->dirty_lo >= n->dirty_hi)
            continue;
        int rc = upload(ctx, n->dev + (uint64_t)n->dirty_lo * 8, n->img + n->dirty_lo,
                        (size_t)(n->dirty_hi - n->dirty_lo) * 8);
        if (rc)
            return rc;
        n->dirty_lo = n->dirty_hi = 0;
    }
    return 0;
}

size_t mt_vmap_trim(mt_vmap *m)
{
    if (!m || m->device)
        return 0;
    size_t released = 0;
    for (size_t i = 0; i < m->nnodes; i++) {
        vnode *n = m->nodes[i];
        if (n->level != 2 || n == m->empty_leaf)
            continue;
        for (uint32_t e = 0; e < ENTRIES; e++) {
            vchunk *c = n->child[e];
            if (!c || c->addressable)
                continue;
            set_entry(n, e, m->noaccess_dev, NULL);
            c->next = m->free_chunks;
            m->free_chunks = c;
            m->free_count++;
            m->chunks--;
            released++;
        }
    }
    return released;
}

void mt_vmap_stats_get(const mt_vmap *m, mt_vmap_stats *st)
{
    memset(st, 0, sizeof *st);
    if (!m)
        return;
    st->nodes = m->nnodes >= 2 ? m->nnodes - 2 : 0; /* the root, not the two empty nodes */
    st->chunks = m->chunks;
    st->free_chunks = m->free_count;
    st->shadow_bytes = (uint64_t)m->nnodes * MT_VMAP_NODE_BYTES +
                       (m->chunks + m->free_count + 1) * (uint64_t)MT_VMAP_CHUNK_BYTES;
}

int mt_vmap_create(const mt_vmap_opts *opts, mt_vmap **out)
{
    if (!out)
        return -EINVAL;
    *out = NULL;
    mt_vmap *m = calloc(1, sizeof *m);
    if (!m)
        return -ENOMEM;
    if (opts)
        m->opts = *opts;
    m->device = m->opts.dev_alloc != NULL;
    int rc;
    if (m->device) {
        if ((rc = m->opts.dev_alloc(m->opts.dev_ctx, MT_VMAP_CHUNK_BYTES, &m->noaccess_dev)) != 0)
            goto fail;
    } else {
        rc = -ENOMEM;
        if (!(m->noaccess_words = calloc(WORDS, sizeof *m->noaccess_words)))
            goto fail;
        m->noaccess_dev = (uint64_t)(uintptr_t)m->noaccess_words;
    }
    if ((rc = new_node(m, 2, m->noaccess_dev, &m->empty_leaf)) != 0 ||
        (rc = new_node(m, 1, m->empty_leaf->dev, &m->empty_mid)) != 0 ||
        (rc = new_node(m, 0, m->empty_mid->dev, &m->root)) != 0)
        goto fail;
    *out = m;
    return 0;
fail:
    mt_vmap_destroy(m);
    return rc;
}

void mt_vmap_destroy(mt_vmap *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->nnodes; i++) {
        free(m->nodes[i]->img);
        free(m->nodes[i]->child);
        free(m->nodes[i]);
    }
    free(m->nodes);
    for (size_t b = 0; b < m->nblocks; b++) {
        size_t used = (b + 1 == m->nblocks) ? 256 - m->spare_left : 256;
        for (size_t j = 0; j < used; j++)
            free(m->chunk_blocks[b][j].words);
        free(m->chunk_blocks[b]);
    }
    free(m->chunk_blocks);
    free(m->noaccess_words);
    free(m);
}
