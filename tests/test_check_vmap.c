/* check: the validity map, randomised against a byte-per-byte reference.
 *
 * Four windows of the address space (one at 0, one straddling a leaf
 * boundary at 4 GiB, one straddling a middle-node boundary at 2^48, one
 * ending at 2^64) get random set/mark_valid operations. After every step a
 * few random queries must agree with the reference (result, first bad byte);
 * every 64 steps the whole windows are compared bit by bit through the same
 * four-load walk the device does. A device map, run in lockstep on a fake
 * device (host memory handed out as "device" memory, ops applied to it
 * through the uploaded image as the device kernel does), must hold the same
 * bits. Trim must release every chunk once nothing is addressable.
 * --seed N replays. */
#include <errno.h>

#include "mt_test.h"
#include "memtrack/check.h"

#define NWIN 4
#define WIN_SIZE (3u * 65536u + 4096u)

static const uint64_t win_base[NWIN] = {
    0x0,
    0x100000000ull - 2 * 65536,             /* leaf boundary (bits 31..16 wrap) */
    0x1000000000000ull - 65536 - 1000,      /* middle-node boundary (bit 48) */
    0ull - WIN_SIZE,                         /* ends at 2^64 */
};

typedef struct ref {
    uint8_t *st[NWIN]; /* 0 no access, 1 undefined, 2 defined */
} ref;

/* ---- fake device: every dev_alloc is host memory; addresses are real ---- */

typedef struct fake_dev {
    void **blocks;
    size_t n, cap;
    uint64_t uploads, upload_bytes;
} fake_dev;

static int fake_alloc(void *ctx, size_t size, uint64_t *addr)
{
    fake_dev *d = ctx;
    void *p = calloc(1, size);
    if (!p)
        return -12;
    if (d->n == d->cap) {
        d->cap = d->cap ? 2 * d->cap : 64;
        d->blocks = realloc(d->blocks, d->cap * sizeof *d->blocks);
        MT_CHECK(d->blocks != NULL);
    }
    d->blocks[d->n++] = p;
    *addr = (uint64_t)(uintptr_t)p;
    return 0;
}

static int fake_upload(void *ctx, uint64_t dev, const void *src, size_t len)
{
    fake_dev *d = ctx;
    memcpy((void *)(uintptr_t)dev, src, len);
    d->uploads++;
    d->upload_bytes += len;
    return 0;
}

/* What the device's shadow-op kernel does: walk the uploaded image per group,
 * apply the op with the group's mask; never write the shared no-access chunk
 * (a walk that ends there only ever needs a no-op). */
static void fake_apply(uint64_t root, uint64_t base, uint64_t size, mt_vmap_op op)
{
    uint64_t last = base + (size - 1);
    for (uint64_t g = base & ~31ull;; g += 32) {
        uint64_t a = g < base ? base : g, b = g + 31 > last ? last : g + 31;
        uint32_t mask = (0xffffffffu >> (31 - (unsigned)(b - g))) & (0xffffffffu << (unsigned)(a - g));
        uint64_t *w = (uint64_t *)mt_vmap_shadow_word(root, g);
        uint64_t nw = mt_vmap_apply_word(*w, mask, op);
        if (nw != *w)
            *w = nw;
        if (g + 31 >= last)
            break;
    }
}

static uint8_t ref_state(const ref *r, int w, uint64_t off) { return r->st[w][off]; }

static void ref_op(ref *r, int w, uint64_t off, uint64_t len, int op)
{
    for (uint64_t i = off; i < off + len; i++) {
        uint8_t *s = &r->st[w][i];
        if (op == 3)
            *s = *s ? 2 : 0;
        else
            *s = (uint8_t)op;
    }
}

/* Expected query result and first bad byte from the reference. */
static int ref_query(const ref *r, int w, uint64_t off, uint64_t len, int read, uint64_t *bad)
{
    for (uint64_t i = off; i < off + len; i++) {
        uint8_t s = ref_state(r, w, i);
        if (s == 0 || (read && s == 1)) {
            *bad = win_base[w] + i;
            return s == 0 ? MT_ECHECK_NOACCESS : MT_ECHECK_UNINIT;
        }
    }
    return 0;
}

static void compare_all(const ref *r, mt_vmap *host, mt_vmap *dev)
{
    for (int w = 0; w < NWIN; w++)
        for (uint64_t i = 0; i < WIN_SIZE; i++) {
            uint64_t a = win_base[w] + i;
            uint64_t hw = *mt_vmap_shadow_word(mt_vmap_root(host), a);
            uint64_t dw = *mt_vmap_shadow_word(mt_vmap_root(dev), a);
            unsigned bit = (unsigned)(a & 31);
            unsigned st = (unsigned)((hw >> bit) & 1) + (unsigned)((hw >> (32 + bit)) & 1);
            if (st != ref_state(r, w, i) || hw != dw) {
                fprintf(stderr, "window %d byte %#jx: reference %u, host word %#jx, device word %#jx\n",
                        w, (uintmax_t)i, ref_state(r, w, i), (uintmax_t)hw, (uintmax_t)dw);
                MT_CHECK(0);
            }
        }
}

static void test_random(uint64_t seed)
{
    uint64_t rng = seed;
    ref r;
    for (int w = 0; w < NWIN; w++)
        MT_CHECK((r.st[w] = calloc(WIN_SIZE, 1)) != NULL);
    mt_vmap *host, *dev;
    fake_dev fd = {0};
    MT_CHECK_OK(mt_vmap_create(NULL, &host));
    mt_vmap_opts o = {.dev_alloc = fake_alloc, .dev_ctx = &fd};
    MT_CHECK_OK(mt_vmap_create(&o, &dev));
    MT_CHECK_OK(mt_vmap_sync(dev, fake_upload, &fd));
    compare_all(&r, host, dev);

    for (int step = 0; step < 3000; step++) {
        int w = (int)mt_test_below(&rng, NWIN);
        uint64_t off, len;
        switch (mt_test_below(&rng, 4)) {
        case 0: len = 1 + mt_test_below(&rng, 40); break;               /* small */
        case 1: len = 1 + mt_test_below(&rng, 5000); break;             /* pages */
        case 2: len = 1 + mt_test_below(&rng, WIN_SIZE); break;          /* chunks */
        default: len = WIN_SIZE; break;
        }
        off = mt_test_below(&rng, WIN_SIZE - len + 1);
        int op = (int)mt_test_below(&rng, 4);
        uint64_t a = win_base[w] + off;
        if (op == 3) {
            MT_CHECK_OK(mt_vmap_mark_valid(host, a, len));
            MT_CHECK_OK(mt_vmap_mark_valid(dev, a, len));
        } else {
            MT_CHECK_OK(mt_vmap_set(host, a, len, (mt_vmap_state)op));
            MT_CHECK_OK(mt_vmap_set(dev, a, len, (mt_vmap_state)op));
        }
        MT_CHECK_OK(mt_vmap_sync(dev, fake_upload, &fd));
        fake_apply(mt_vmap_root(dev), a, len, (mt_vmap_op)op);
        ref_op(&r, w, off, len, op);

        for (int q = 0; q < 8; q++) {
            int qw = (int)mt_test_below(&rng, NWIN);
            uint64_t qlen = 1 + mt_test_below(&rng, q < 6 ? 64 : WIN_SIZE);
            uint64_t qoff = mt_test_below(&rng, WIN_SIZE - qlen + 1);
            int read = (int)mt_test_below(&rng, 2);
            uint64_t bad = 0, ebad = 0;
            int got = mt_vmap_query(host, win_base[qw] + qoff, qlen, read ? MT_VMAP_READ : MT_VMAP_WRITE, &bad);
            int exp = ref_query(&r, qw, qoff, qlen, read, &ebad);
            MT_CHECK_INT_EQ(got, exp);
            if (exp)
                MT_CHECK_UINT_EQ(bad, ebad);
        }
        if (step % 64 == 63)
            compare_all(&r, host, dev);
    }
    compare_all(&r, host, dev);
    MT_CHECK_ERR(mt_vmap_query(dev, 0, 1, MT_VMAP_READ, NULL), MT_EUNSUPPORTED);

    /* Nothing addressable: trim gives every chunk back, reuse takes them again. */
    for (int w = 0; w < NWIN; w++)
        MT_CHECK_OK(mt_vmap_set(host, win_base[w], WIN_SIZE, MT_VMAP_NOACCESS));
    mt_vmap_stats st;
    mt_vmap_stats_get(host, &st);
    uint64_t chunks = st.chunks;
    MT_CHECK(chunks >= 4 * 4);
    MT_CHECK_UINT_EQ(mt_vmap_trim(host), chunks);
    mt_vmap_stats_get(host, &st);
    MT_CHECK_UINT_EQ(st.chunks, 0);
    MT_CHECK_UINT_EQ(st.free_chunks, chunks);
    MT_CHECK_ERR(mt_vmap_query(host, win_base[1], WIN_SIZE, MT_VMAP_WRITE, NULL), MT_ECHECK_NOACCESS);
    MT_CHECK_OK(mt_vmap_set(host, win_base[1], 100, MT_VMAP_DEFINED));
    mt_vmap_stats_get(host, &st);
    MT_CHECK_UINT_EQ(st.chunks, 1);
    MT_CHECK_OK(mt_vmap_query(host, win_base[1], 100, MT_VMAP_READ, NULL));
    MT_CHECK_ERR(mt_vmap_query(host, win_base[1], 101, MT_VMAP_READ, NULL), MT_ECHECK_NOACCESS);
    MT_CHECK_UINT_EQ(mt_vmap_trim(dev), 0);
    printf("random: %d windows, %llu device uploads (%llu bytes), %llu chunks at peak\n", NWIN,
           (unsigned long long)fd.uploads, (unsigned long long)fd.upload_bytes, (unsigned long long)chunks);

    mt_vmap_destroy(host);
    mt_vmap_destroy(dev);
    for (size_t i = 0; i < fd.n; i++)
        free(fd.blocks[i]);
    free(fd.blocks);
    for (int w = 0; w < NWIN; w++)
        free(r.st[w]);
}

static void test_edges(void)
{
    mt_vmap *m;
    MT_CHECK_OK(mt_vmap_create(NULL, &m));
    MT_CHECK_ERR(mt_vmap_set(m, 0, 0, MT_VMAP_DEFINED), -EINVAL);
    MT_CHECK_ERR(mt_vmap_set(m, UINT64_MAX, 2, MT_VMAP_DEFINED), -EINVAL);
    MT_CHECK_ERR(mt_vmap_set(m, 0, 1, (mt_vmap_state)7), -EINVAL);
    MT_CHECK_ERR(mt_vmap_mark_valid(m, 5, 0), -EINVAL);
    MT_CHECK_ERR(mt_vmap_query(m, 0, 0, MT_VMAP_READ, NULL), -EINVAL);
    MT_CHECK_ERR(mt_vmap_query(m, 0, 1, (mt_vmap_access)0, NULL), -EINVAL);
    MT_CHECK_ERR(mt_vmap_create(NULL, NULL), -EINVAL);
    /* the last byte of the address space */
    MT_CHECK_OK(mt_vmap_set(m, UINT64_MAX, 1, MT_VMAP_UNDEFINED));
    uint64_t bad = 0;
    MT_CHECK_ERR(mt_vmap_query(m, UINT64_MAX, 1, MT_VMAP_READ, &bad), MT_ECHECK_UNINIT);
    MT_CHECK_UINT_EQ(bad, UINT64_MAX);
    MT_CHECK_OK(mt_vmap_query(m, UINT64_MAX, 1, MT_VMAP_WRITE, NULL));
    MT_CHECK_OK(mt_vmap_mark_valid(m, UINT64_MAX - 10, 11));
    MT_CHECK_OK(mt_vmap_query(m, UINT64_MAX, 1, MT_VMAP_READ, NULL));
    MT_CHECK_ERR(mt_vmap_query(m, UINT64_MAX - 1, 2, MT_VMAP_READ, &bad), MT_ECHECK_NOACCESS);
    MT_CHECK_UINT_EQ(bad, UINT64_MAX - 1);
    /* a 256 MiB registration costs entries, not bytes, on the structure */
    MT_CHECK_OK(mt_vmap_set(m, 0x7f0000000000ull, 256ull << 20, MT_VMAP_UNDEFINED));
    mt_vmap_stats st;
    mt_vmap_stats_get(m, &st);
    MT_CHECK_UINT_EQ(st.chunks, 4096 + 1);
    MT_CHECK_ERR(mt_vmap_query(m, 0x7f0000000000ull - 1, 1, MT_VMAP_WRITE, NULL), MT_ECHECK_NOACCESS);
    MT_CHECK_ERR(mt_vmap_query(m, 0x7f0000000000ull + (256ull << 20), 1, MT_VMAP_WRITE, NULL), MT_ECHECK_NOACCESS);
    MT_CHECK_OK(mt_vmap_query(m, 0x7f0000000000ull + (256ull << 20) - 4, 4, MT_VMAP_WRITE, NULL));
    /* apply_word: the reference semantics of the four ops */
    MT_CHECK_UINT_EQ(mt_vmap_apply_word(0, 0xf0, MT_VMAP_OP_UNDEFINED), 0xf0);
    MT_CHECK_UINT_EQ(mt_vmap_apply_word(0xf0, 0x30, MT_VMAP_OP_VALID), 0x30000000f0ull);
    MT_CHECK_UINT_EQ(mt_vmap_apply_word(0x30000000f0ull, 0x10, MT_VMAP_OP_UNDEFINED), 0x20000000f0ull);
    MT_CHECK_UINT_EQ(mt_vmap_apply_word(0x20000000f0ull, 0xff, MT_VMAP_OP_NOACCESS), 0);
    MT_CHECK_UINT_EQ(mt_vmap_apply_word(0, 0x1, MT_VMAP_OP_DEFINED), 0x100000001ull);
    mt_vmap_destroy(m);
    mt_vmap_destroy(NULL);
}

int main(int argc, char **argv)
{
    uint64_t seed = mt_test_seed(argc, argv);
    test_edges();
    test_random(seed);
    printf("test_check_vmap: ok\n");
    return 0;
}
