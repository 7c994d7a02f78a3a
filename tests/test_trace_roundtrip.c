/* trace: thousands of random records (every type, updates split across
 * chunks) written and read back exactly, from a file and from memory, with
 * and without compression; seek to every submit; header metadata; replay
 * with hash verification; reconstruction of memories and objects at random
 * submits against a reference replay; writer errors. */
#include <fcntl.h>
#include <sys/stat.h>

#include "trace_util.h"

static uint64_t rng;

/* Walks the expected records while the reader may return an update in
 * several consecutive pieces. */
typedef struct cmp {
    const tr_rec *recs;
    size_t n, i, done; /* done: bytes of recs[i]'s update already matched */
} cmp;

static void cmp_next(cmp *c, const mt_trace_record *got)
{
    MT_CHECK(c->i < c->n);
    const mt_trace_record *exp = &c->recs[c->i].r;
    if (exp->type != MT_TRACE_UPDATE) {
        tr_check_equal(exp, got);
        c->i++;
        return;
    }
    MT_CHECK_INT_EQ(got->type, MT_TRACE_UPDATE);
    MT_CHECK_UINT_EQ(got->u.update.memory, exp->u.update.memory);
    MT_CHECK_UINT_EQ(got->u.update.object, exp->u.update.object);
    MT_CHECK_UINT_EQ(got->u.update.offset, exp->u.update.offset + c->done);
    MT_CHECK(got->u.update.length <= exp->u.update.length - c->done);
    TR_EQ_BYTES(got->u.update.data, (const uint8_t *)exp->u.update.data + c->done, got->u.update.length);
    c->done += got->u.update.length;
    if (c->done == exp->u.update.length) {
        c->i++;
        c->done = 0;
    } else {
        MT_CHECK(got->u.update.length > 0); /* pieces always make progress */
    }
}

static const mt_trace_kv meta[] = {
    {"application", "vkcube"}, {"driver", "lavapipe 23.2"}, {"memtrack_version", MT_VERSION_STRING}, {"mode", "auto"}};

/* Writes gen's stream; fills recs (meta first) and returns the count. */
static size_t write_trace(const char *path, const mt_trace_writer_opts *o, size_t nrec, tr_rec *recs,
                          uint64_t seed, size_t big)
{
    tr_gen g;
    tr_gen_init(&g, seed, big);
    mt_trace_writer *w;
    MT_CHECK_OK(mt_trace_writer_open(path, o, &w));
    size_t k = 0;
    for (size_t i = 0; i < o->nmeta; i++) {
        mt_trace_record r = tr_meta_record(meta[i].key, meta[i].value);
        tr_own(&recs[k++], &r);
    }
    for (size_t i = 0; i < nrec; i++) {
        mt_trace_record r;
        tr_gen_next(&g, &r);
        uint64_t idx = UINT64_MAX;
        if (r.type == MT_TRACE_SUBMIT && i % 2) {
            MT_CHECK_OK(mt_trace_write_submit(w, r.u.submit.queue, &idx));
            MT_CHECK_UINT_EQ(idx, r.u.submit.index);
        } else if (r.type == MT_TRACE_FRAME && i % 2) {
            MT_CHECK_OK(mt_trace_write_frame(w, &idx));
            MT_CHECK_UINT_EQ(idx, r.u.frame.index);
        } else if (r.type == MT_TRACE_UPDATE && i % 3 == 0) {
            MT_CHECK_OK(mt_trace_write_update(w, r.u.update.memory, r.u.update.object, r.u.update.offset,
                                              r.u.update.data, r.u.update.length));
        } else {
            if (r.type == MT_TRACE_SUBMIT)
                r.u.submit.index = 12345; /* ignored: the writer numbers submits */
            MT_CHECK_OK(mt_trace_write(w, &r));
            if (r.type == MT_TRACE_SUBMIT)
                r.u.submit.index = g.submits - 1;
        }
        tr_own(&recs[k++], &r);
        if (i == nrec / 2) {
            MT_CHECK_OK(mt_trace_writer_flush(w));
            mt_trace_writer_stats st;
            mt_trace_writer_stats_get(w, &st);
            struct stat sb;
            MT_CHECK(stat(path, &sb) == 0);
            MT_CHECK_UINT_EQ(st.file_bytes, (uint64_t)sb.st_size); /* flushed means in the file */
            MT_CHECK_UINT_EQ(st.submits, g.submits);
        }
    }
    mt_trace_writer_stats st;
    mt_trace_writer_stats_get(w, &st);
    MT_CHECK(st.records >= k);
    MT_CHECK_UINT_EQ(st.submits, g.submits);
    MT_CHECK_OK(mt_trace_writer_close(w));
    tr_gen_free(&g);
    return k;
}

static void check_stream(mt_trace_reader *r, const tr_rec *recs, size_t n)
{
    cmp c = {recs, n, 0, 0};
    mt_trace_record got;
    int rc;
    while ((rc = mt_trace_next(r, &got)) == 1)
        cmp_next(&c, &got);
    MT_CHECK_INT_EQ(rc, 0);
    MT_CHECK_UINT_EQ(c.i, n);
    MT_CHECK_INT_EQ(mt_trace_next(r, &got), 0); /* the end stays the end */
}

static void check_seek(mt_trace_reader *r, const tr_rec *recs, size_t n, uint64_t submits)
{
    for (uint64_t s = 0; s <= submits; s++) {
        MT_CHECK_OK(mt_trace_seek_submit(r, s));
        size_t i = 0; /* first expected record after SUBMIT s-1 */
        if (s > 0)
            while (!(recs[i].r.type == MT_TRACE_SUBMIT && recs[i].r.u.submit.index == s - 1)) {
                i++;
                MT_CHECK(i < n);
            }
        i += s > 0;
        cmp c = {recs, n, i, 0};
        mt_trace_record got;
        /* Every record of submit s, up to its SUBMIT (or the end). */
        for (;;) {
            int rc = mt_trace_next(r, &got);
            if (rc == 0) {
                MT_CHECK_UINT_EQ(s, submits);
                MT_CHECK_UINT_EQ(c.i, n);
                break;
            }
            MT_CHECK_INT_EQ(rc, 1);
            cmp_next(&c, &got);
            if (got.type == MT_TRACE_SUBMIT) {
                MT_CHECK_UINT_EQ(got.u.submit.index, s);
                break;
            }
        }
    }
    MT_CHECK_ERR(mt_trace_seek_submit(r, submits + 1), -ENOENT);
}

/* Expected object content at a submit from the reference records. */
static long ref_object(const tr_rec *recs, size_t n, uint64_t obj, uint64_t submit, uint8_t *out,
                       uint8_t *scratch)
{
    uint64_t mem = 0, off = 0, used = 0;
    int created = 0, bound = 0;
    for (size_t i = 0; i < n; i++) {
        const mt_trace_record *r = &recs[i].r;
        if (r->type == MT_TRACE_SUBMIT && r->u.submit.index == submit)
            break;
        if (r->type == MT_TRACE_OBJECT && r->u.object.id == obj)
            created = 1, used = r->u.object.used_size;
        if (r->type == MT_TRACE_BIND && r->u.bind.object == obj)
            bound = 1, mem = r->u.bind.memory, off = r->u.bind.offset;
    }
    if (!created || !bound)
        return -ENOENT;
    long size = tr_ref_content(recs, n, mem, submit, scratch);
    if (size < 0)
        return -ENOENT;
    if (off + used > (uint64_t)size)
        return MT_ECORRUPT;
    memcpy(out, scratch + off, used);
    return (long)used;
}

static void check_replay(mt_trace_reader *r, const tr_rec *recs, size_t n, uint64_t submits, size_t big)
{
    size_t nhash = 0;
    for (size_t i = 0; i < n; i++)
        nhash += recs[i].r.type == MT_TRACE_CONTENT_HASH;
    mt_trace_replay *rp;
    mt_trace_replay_opts o = {.flags = MT_TRACE_REPLAY_VERIFY};
    MT_CHECK_OK(mt_trace_replay_create(r, &o, &rp));
    int rc;
    while ((rc = mt_trace_replay_next(rp, NULL)) == 1)
        ;
    MT_CHECK_INT_EQ(rc, 0);
    mt_trace_replay_stats st;
    mt_trace_replay_stats_get(rp, &st);
    MT_CHECK_UINT_EQ(st.hashes_checked, nhash);
    MT_CHECK_UINT_EQ(st.hashes_mismatched, 0);
    MT_CHECK_UINT_EQ(st.submits, submits);
    mt_trace_replay_destroy(rp);

    size_t cap = 3 * big + 8;
    uint8_t *exp = malloc(cap), *got = malloc(cap), *scratch = malloc(cap);
    MT_CHECK(exp && got && scratch);
    int found = 0, objs = 0;
    for (int t = 0; t < 80 && submits > 0; t++) {
        /* A memory (or bound object) and one of the next submits after it
         * appears: alive then, or destroyed (-ENOENT), both are checked. */
        size_t i = mt_test_below(&rng, n);
        while (i < n && recs[i].r.type != MT_TRACE_MEMORY && recs[i].r.type != MT_TRACE_BIND)
            i++;
        if (i == n)
            continue;
        uint64_t id = recs[i].r.type == MT_TRACE_MEMORY ? recs[i].r.u.memory.id : recs[i].r.u.bind.object;
        uint64_t s = UINT64_MAX;
        for (size_t j = i, skip = mt_test_below(&rng, 4); j < n; j++)
            if (recs[j].r.type == MT_TRACE_SUBMIT && skip-- == 0) {
                s = recs[j].r.u.submit.index;
                break;
            }
        if (s == UINT64_MAX)
            continue;
        long e = tr_ref_content(recs, n, id, s, exp);
        int64_t g = mt_trace_reconstruct(r, id, s, got, cap);
        if (e < 0) {
            MT_CHECK_INT_EQ(g, -ENOENT); /* not a memory, or not alive then */
        } else {
            MT_CHECK_INT_EQ(g, e);
            MT_CHECK_MEM_EQ(got, exp, (size_t)e);
            found++;
        }
        e = ref_object(recs, n, id, s, exp, scratch);
        g = mt_trace_reconstruct_object(r, id, s, got, cap);
        MT_CHECK_INT_EQ(g, e);
        if (e >= 0) {
            MT_CHECK_MEM_EQ(got, exp, (size_t)e);
            objs++;
        }
    }
    printf("  reconstructed %d memories, %d objects\n", found, objs);
    MT_CHECK(submits == 0 || found > 0);
    MT_CHECK_ERR(mt_trace_reconstruct(r, 1, submits, got, cap), -ENOENT); /* no such submit */
    free(exp);
    free(got);
    free(scratch);
}

static void roundtrip(uint32_t flags, size_t chunk, size_t nrec, size_t big)
{
    char path[256];
    tr_tmp_path(path, sizeof path, "roundtrip");
    tr_rec *recs = calloc(nrec + 8, sizeof *recs);
    MT_CHECK(recs);
    mt_trace_writer_opts o = {.chunk_size = chunk, .flags = flags, .meta = meta, .nmeta = 4,
                              .queue_depth = (unsigned)mt_test_below(&rng, 3)};
    size_t n = write_trace(path, &o, nrec, recs, mt_test_rand(&rng), big);
    uint64_t submits = 0;
    for (size_t i = 0; i < n; i++)
        submits += recs[i].r.type == MT_TRACE_SUBMIT;

    size_t fsize;
    uint8_t *file = tr_read_file(path, &fsize);
    for (int via_mem = 0; via_mem < 2; via_mem++) {
        mt_trace_reader *r;
        if (via_mem)
            MT_CHECK_OK(mt_trace_reader_open_mem(file, fsize, NULL, &r));
        else
            MT_CHECK_OK(mt_trace_reader_open(path, NULL, &r));
        mt_trace_info info;
        mt_trace_reader_info(r, &info);
        MT_CHECK_INT_EQ(info.complete, 1);
        MT_CHECK_INT_EQ(info.indexed, 1);
        MT_CHECK_INT_EQ(info.index_error, 0);
        MT_CHECK_INT_EQ(info.tail_error, 0);
        MT_CHECK_UINT_EQ(info.version_major, 1);
        MT_CHECK_UINT_EQ(info.file_size, fsize);
        MT_CHECK_UINT_EQ(info.readable_size, fsize);
        MT_CHECK_UINT_EQ(info.submits, submits);
        MT_CHECK(info.records >= n);
        if (flags & MT_TRACE_NO_COMPRESS)
            MT_CHECK_UINT_EQ(info.stored_bytes, info.raw_bytes);
        else
            MT_CHECK(info.stored_bytes < info.raw_bytes);
        printf("  %s, chunk %zu: %zu records, %" PRIu64 " chunks, %" PRIu64 " submits, %" PRIu64
               " raw -> %" PRIu64 " stored\n", flags ? "raw" : "zstd", chunk, n, info.chunks, info.submits,
               info.raw_bytes, info.stored_bytes);
        for (size_t i = 0; i < 4; i++) {
            const char *k, *v;
            MT_CHECK_OK(mt_trace_meta_at(r, i, &k, &v));
            MT_CHECK(strcmp(k, meta[i].key) == 0 && strcmp(v, meta[i].value) == 0);
        }
        MT_CHECK_ERR(mt_trace_meta_at(r, 4, NULL, NULL), -ENOENT);
        /* The chunks add up to the totals, tile the file in order, and
         * number the submits without a gap. */
        mt_trace_chunk_info ci;
        uint64_t raw = 0, stored = 0, recs_in = 0, subs = 0, last_off = 0;
        for (size_t i = 0; i < info.chunks; i++) {
            MT_CHECK_OK(mt_trace_chunk_at(r, i, &ci));
            MT_CHECK(i == 0 || ci.offset > last_off);
            MT_CHECK_UINT_EQ(ci.submits_before, subs);
            if (flags & MT_TRACE_NO_COMPRESS)
                MT_CHECK_UINT_EQ(ci.stored_bytes, ci.raw_bytes);
            last_off = ci.offset;
            raw += ci.raw_bytes, stored += ci.stored_bytes, recs_in += ci.records, subs += ci.submits;
        }
        MT_CHECK_ERR(mt_trace_chunk_at(r, info.chunks, &ci), -ENOENT);
        MT_CHECK_UINT_EQ(raw, info.raw_bytes);
        MT_CHECK_UINT_EQ(stored, info.stored_bytes);
        MT_CHECK_UINT_EQ(recs_in, info.records);
        MT_CHECK_UINT_EQ(subs, info.submits);
        MT_CHECK(strcmp(mt_trace_meta_get(r, "driver"), "lavapipe 23.2") == 0);
        MT_CHECK(mt_trace_meta_get(r, "nope") == NULL);

        check_stream(r, recs, n);
        MT_CHECK_OK(mt_trace_rewind(r));
        check_stream(r, recs, n);
        check_seek(r, recs, n, submits);
        if (!via_mem)
            check_replay(r, recs, n, submits, big);
        mt_trace_reader_close(r);
    }
    free(file);
    for (size_t i = 0; i < n; i++)
        free(recs[i].owned);
    free(recs);
    unlink(path);
}

/* Writes a burst of compressible updates much faster than one compressor
 * can keep up with (a 64 KiB copy against ~100+ us of zstd level 1), reads
 * them back byte for byte, and returns the writer's fast_chunks. */
static uint64_t burst(const mt_trace_writer_opts *o)
{
    char path[256];
    tr_tmp_path(path, sizeof path, "burst");
    enum { LEN = 64 << 10, N = 400 };
    uint8_t *src = malloc(LEN + N * 64);
    MT_CHECK(src);
    uint64_t s = 5;
    for (size_t i = 0; i < LEN + N * 64; i++) /* a gradient with noise */
        src[i] = (uint8_t)(i / 64 + mt_test_below(&s, 8));
    mt_trace_writer *w;
    MT_CHECK_OK(mt_trace_writer_open(path, o, &w));
    for (size_t i = 0; i < N; i++) {
        MT_CHECK_OK(mt_trace_write_update(w, 1, 0, i * LEN, src + i * 64, LEN));
        MT_CHECK_OK(mt_trace_write_submit(w, 0, NULL));
    }
    MT_CHECK_OK(mt_trace_writer_flush(w));
    mt_trace_writer_stats st;
    mt_trace_writer_stats_get(w, &st);
    MT_CHECK(st.fast_chunks <= st.chunks);
    MT_CHECK_OK(mt_trace_writer_close(w));
    mt_trace_reader *r;
    MT_CHECK_OK(mt_trace_reader_open(path, NULL, &r));
    mt_trace_record rec;
    size_t got = 0, at = 0;
    while (mt_trace_next(r, &rec) == 1) {
        if (rec.type != MT_TRACE_UPDATE)
            continue;
        size_t i = (size_t)(rec.u.update.offset / LEN), in = (size_t)(rec.u.update.offset % LEN);
        MT_CHECK(i < N && in == at);
        MT_CHECK(memcmp(rec.u.update.data, src + i * 64 + in, rec.u.update.length) == 0);
        at = (at + rec.u.update.length) % LEN;
        got += rec.u.update.length;
    }
    MT_CHECK_UINT_EQ(got, (uint64_t)N * LEN);
    mt_trace_reader_close(r);
    unlink(path);
    free(src);
    return st.fast_chunks;
}

/* DEFAULT compresses at FAST's level only the chunks that find the
 * compressors behind; an explicit level or another preset never adapts. */
static void test_adaptive_level(void)
{
    mt_trace_writer_opts o = {.chunk_size = 64 << 10, .threads = 1};
    uint64_t fast = burst(&o);
    printf("  adaptive: %" PRIu64 " chunks at the fast level\n", fast);
    MT_CHECK(fast > 0);
    o.level = 1;
    MT_CHECK_UINT_EQ(burst(&o), 0);
    o.level = 0, o.compression = MT_TRACE_COMPRESSION_FAST;
    MT_CHECK_UINT_EQ(burst(&o), 0);
}

/* A wrong content hash is found, at the right submit and memory. */
static void test_mismatch(void)
{
    char path[256];
    tr_tmp_path(path, sizeof path, "mismatch");
    mt_trace_writer *w;
    MT_CHECK_OK(mt_trace_writer_open(path, NULL, &w));
    uint8_t buf[1000] = {0};
    MT_CHECK_OK(mt_trace_write_memory(w, 7, sizeof buf, 2, 0xe));
    MT_CHECK_OK(mt_trace_write_memory(w, 9, 10, 2, 0xe));
    for (int s = 0; s < 6; s++) {
        buf[s * 10] = (uint8_t)(s + 1);
        MT_CHECK_OK(mt_trace_write_update(w, 7, 0, (uint64_t)s * 10, &buf[s * 10], 1));
        uint64_t h = mt_trace_hash(buf, sizeof buf);
        MT_CHECK_OK(mt_trace_write_content_hash(w, 7, 0, sizeof buf, s == 3 ? h ^ 1 : h));
        MT_CHECK_OK(mt_trace_write_content_hash(w, 9, 0, 10, mt_trace_hash(buf + 500, 10))); /* zeros */
        MT_CHECK_OK(mt_trace_write_submit(w, 0, NULL));
    }
    MT_CHECK_OK(mt_trace_writer_close(w));
    mt_trace_reader *r;
    MT_CHECK_OK(mt_trace_reader_open(path, NULL, &r));
    mt_trace_replay *rp;
    mt_trace_replay_opts o = {.flags = MT_TRACE_REPLAY_VERIFY};
    MT_CHECK_OK(mt_trace_replay_create(r, &o, &rp));
    MT_CHECK_OK(mt_trace_replay_to_submit(rp, 5));
    mt_trace_replay_stats st;
    mt_trace_replay_stats_get(rp, &st);
    MT_CHECK_UINT_EQ(st.hashes_checked, 12);
    MT_CHECK_UINT_EQ(st.hashes_mismatched, 1);
    MT_CHECK_UINT_EQ(st.first_mismatch_submit, 3);
    MT_CHECK_UINT_EQ(st.first_mismatch_memory, 7);
    MT_CHECK_ERR(mt_trace_replay_to_submit(rp, 2), -ENOENT); /* passed */
    MT_CHECK_ERR(mt_trace_replay_to_submit(rp, 6), -ENOENT); /* never comes */
    mt_trace_replay_destroy(rp);
    /* A small image budget: the 1000-byte memory cannot be kept. */
    mt_trace_replay_opts tight = {.max_bytes = 999};
    MT_CHECK_OK(mt_trace_replay_create(r, &tight, &rp));
    MT_CHECK_ERR(mt_trace_replay_to_submit(rp, 0), -ENOMEM);
    mt_trace_replay_destroy(rp);
    mt_trace_reader_close(r);
    unlink(path);
}

static void test_writer_errors(void)
{
    char path[256];
    tr_tmp_path(path, sizeof path, "errors");
    mt_trace_writer *w;
    mt_trace_writer_opts bad = {.chunk_size = 100};
    MT_CHECK_ERR(mt_trace_writer_open(path, &bad, &w), -EINVAL);
    bad = (mt_trace_writer_opts){.level = 99};
    MT_CHECK_ERR(mt_trace_writer_open(path, &bad, &w), -EINVAL);
    MT_CHECK_ERR(mt_trace_writer_open("/nonexistent-dir/x.mtrace", NULL, &w), -ENOENT);
    MT_CHECK_OK(mt_trace_writer_open(path, NULL, &w));
    mt_trace_record r = {.type = (mt_trace_rec_type)99};
    MT_CHECK_ERR(mt_trace_write(w, &r), -EINVAL);
    char *big = malloc(MT_TRACE_MAX_TEXT + 2);
    MT_CHECK(big);
    memset(big, 'x', MT_TRACE_MAX_TEXT + 1);
    big[MT_TRACE_MAX_TEXT + 1] = 0;
    MT_CHECK_ERR(mt_trace_write_annotation(w, 0, big), -EINVAL);
    big[MT_TRACE_MAX_TEXT] = 0;
    MT_CHECK_OK(mt_trace_write_annotation(w, 0, big)); /* exactly the limit */
    MT_CHECK_ERR(mt_trace_write_update(w, 1, 0, 0, NULL, 5), -EINVAL);
    MT_CHECK_ERR(mt_trace_write_update(w, 1, 0, UINT64_MAX, "ab", 2), -EINVAL);
    MT_CHECK_OK(mt_trace_writer_close(w));
    free(big);
    unlink(path);

    /* A full disk: the compressor's write fails; callers get -ENOSPC. */
    int fd = open("/dev/full", O_WRONLY);
    if (fd >= 0) {
        int rc = mt_trace_writer_open_fd(fd, NULL, &w);
        if (rc == 0) { /* the 32-byte header may or may not have failed already */
            uint8_t data[4096] = {1};
            for (int i = 0; i < 1000 && rc == 0; i++)
                rc = mt_trace_write_update(w, 1, 0, 0, data, sizeof data);
            if (rc == 0)
                rc = mt_trace_writer_flush(w);
            MT_CHECK_INT_EQ(rc, -ENOSPC);
            MT_CHECK_ERR(mt_trace_write_submit(w, 0, NULL), -ENOSPC);
            MT_CHECK_ERR(mt_trace_writer_close(w), -ENOSPC);
        } else {
            MT_CHECK_INT_EQ(rc, -ENOSPC);
        }
    }
    MT_CHECK_INT_EQ(mt_trace_writer_close(NULL), 0);
}

/* Traces written by the format 1.0 writer (kept in the fuzz corpus) still
 * read: closed ones as closed, a damaged index by scanning. */
static void test_old_traces(const char *dir)
{
    static const struct { const char *name; int end, indexed; } cases[] = {
        {"v1.0-zstd-closed", MT_TRACE_END_CLOSED, 1},
        {"v1.0-zstd-bad-index", MT_TRACE_END_SCANNED, 0},
        {"v1.0-raw-cut", MT_TRACE_END_SCANNED, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, cases[i].name);
        mt_trace_reader *r;
        MT_CHECK_OK(mt_trace_reader_open(path, NULL, &r));
        mt_trace_info info;
        mt_trace_reader_info(r, &info);
        MT_CHECK_INT_EQ(info.version_minor, 0);
        MT_CHECK_INT_EQ(info.end, cases[i].end);
        MT_CHECK_INT_EQ(info.indexed, cases[i].indexed);
        MT_CHECK(strcmp(mt_trace_meta_get(r, "application"), "seed") == 0);
        mt_trace_record rec;
        uint64_t n = 0;
        int rc;
        while ((rc = mt_trace_next(r, &rec)) == 1)
            n++;
        MT_CHECK_INT_EQ(rc, 0);
        MT_CHECK_UINT_EQ(n, info.records);
        MT_CHECK(n > 10 && info.tail_records <= n);
        mt_trace_reader_close(r);
    }
}

int main(int argc, char **argv)
{
    rng = mt_test_seed(argc, argv);
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "--corpus") == 0)
            test_old_traces(argv[i + 1]);
    roundtrip(0, 2048, 3000, 6000);                    /* many chunks, split updates */
    roundtrip(MT_TRACE_NO_COMPRESS, 512, 1500, 3000);  /* smallest chunks, raw */
    roundtrip(0, 0, 3000, 6000);                       /* default 1 MiB: one chunk */
    test_mismatch();
    test_writer_errors();
    test_adaptive_level();
    printf("ok\n");
    return 0;
}
