/* Writes the seed corpus of the fuzz targets: mt_gen_fuzz_corpus DIR writes
 * DIR/trace_reader/ and DIR/diff/. Seeds are small, valid or nearly valid
 * inputs covering every record type, both codecs, a closed trace, a trace
 * whose writer died, traces ending at a checkpoint or an emergency flush, a
 * checkpoint's index overwritten by later chunks, and damaged ones.
 * Deterministic (fixed seed). The v1.0-* seeds were written by the 1.0
 * writer (compressed index, no end reason) and are kept as they are. */
#include <sys/stat.h>

#include "trace_util.h"

static void save(const char *dir, const char *name, const uint8_t *b, size_t n)
{
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    MT_CHECK(f && fwrite(b, 1, n, f) == n);
    fclose(f);
}

enum { END_CLOSE, END_CHECKPOINT, END_EMERGENCY, END_APPENDED };

/* A trace of nrec generated records, ended as `end` says (END_APPENDED: a
 * checkpoint, then more chunks over its index); returns its bytes. */
static uint8_t *make_trace_end(const char *tmp, uint32_t flags, size_t chunk, size_t nrec, uint64_t seed,
                               int end, size_t *size)
{
    static const mt_trace_kv meta[] = {{"application", "seed"}, {"mode", "auto"}};
    mt_trace_writer_opts o = {.chunk_size = chunk, .flags = flags, .meta = meta, .nmeta = 2};
    mt_trace_writer *w;
    MT_CHECK_OK(mt_trace_writer_open(tmp, &o, &w));
    tr_gen g;
    tr_gen_init(&g, seed, 200);
    for (size_t i = 0; i < nrec; i++) {
        mt_trace_record r;
        tr_gen_next(&g, &r);
        if (r.type == MT_TRACE_UPDATE && r.u.update.length > 64)
            r.u.update.length = 64;
        MT_CHECK_OK(mt_trace_write(w, &r));
    }
    /* One of each rare type, so every decoder case has a seed. */
    MT_CHECK_OK(mt_trace_write_object(w, 1000, MT_TRACE_OBJECT_IMAGE, 64, 64));
    MT_CHECK_OK(mt_trace_write_bind(w, 1000, 1, 0));
    MT_CHECK_OK(mt_trace_write_annotation(w, 0, "vkQueueBindSparse unsupported"));
    MT_CHECK_OK(mt_trace_write_mode(w, 1, "scan"));
    MT_CHECK_OK(mt_trace_write_mismatch(w, 1, 0, 64, 4096, MT_TRACE_MISMATCH_HOST, 0));
    MT_CHECK_OK(mt_trace_write_frame(w, NULL));
    MT_CHECK_OK(mt_trace_write_submit(w, 0, NULL));
    MT_CHECK_OK(mt_trace_write_destroy(w, MT_TRACE_DESTROY_OBJECT, 1000)); /* after the last submit */
    uint8_t *b = NULL;
    if (end == END_CHECKPOINT || end == END_APPENDED) {
        MT_CHECK_OK(mt_trace_writer_checkpoint(w));
        if (end == END_APPENDED) {
            MT_CHECK_OK(mt_trace_write_frame(w, NULL));
            MT_CHECK_OK(mt_trace_writer_flush(w));
        }
        b = tr_read_file(tmp, size); /* as a killed writer leaves it */
    } else if (end == END_EMERGENCY) {
        MT_CHECK_OK(mt_trace_write_frame(w, NULL)); /* in the chunk being filled */
        MT_CHECK_OK(mt_trace_writer_emergency_flush(w, 1000));
    }
    MT_CHECK_OK(mt_trace_writer_close(w));
    tr_gen_free(&g);
    return b ? b : tr_read_file(tmp, size);
}

static uint8_t *make_trace(const char *tmp, uint32_t flags, size_t chunk, size_t nrec, uint64_t seed, size_t *size)
{
    return make_trace_end(tmp, flags, chunk, nrec, seed, END_CLOSE, size);
}

int main(int argc, char **argv)
{
    MT_CHECK(argc == 2);
    char dir[900], tmp[256];
    tr_tmp_path(tmp, sizeof tmp, "corpus");
    snprintf(dir, sizeof dir, "%s/trace_reader", argv[1]);
    mkdir(dir, 0755);
    size_t n;
    uint8_t *b = make_trace(tmp, 0, 512, 40, 1, &n);
    save(dir, "zstd-closed", b, n);
    save(dir, "zstd-cut", b, n * 2 / 3); /* the writer died */
    b[n - 50] ^= 1;                      /* index damaged */
    save(dir, "zstd-bad-index", b, n);
    save(dir, "header-only", b, 32);
    free(b);
    b = make_trace(tmp, MT_TRACE_NO_COMPRESS, 512, 40, 2, &n);
    save(dir, "raw-closed", b, n);
    save(dir, "raw-cut", b, n / 2);
    free(b);
    b = make_trace(tmp, MT_TRACE_NO_COMPRESS, 4096, 15, 3, &n);
    save(dir, "raw-one-chunk", b, n);
    free(b);
    static const char *const ends[] = {NULL, "checkpoint", "emergency", "checkpoint-appended"};
    for (int e = END_CHECKPOINT; e <= END_APPENDED; e++) {
        b = make_trace_end(tmp, 0, 512, 30, 4 + (uint64_t)e, e, &n);
        save(dir, ends[e], b, n);
        free(b);
    }
    unlink(tmp);

    snprintf(dir, sizeof dir, "%s/diff", argv[1]);
    mkdir(dir, 0755);
    uint64_t rng = 7;
    for (int s = 0; s < 6; s++) {
        uint8_t in[2 + 2 * 700];
        size_t half = 50 + 110 * (size_t)s;
        in[0] = (uint8_t)(s * 9), in[1] = (uint8_t)s;
        for (size_t i = 0; i < half; i++)
            in[2 + i] = in[2 + half + i] = (uint8_t)mt_test_rand(&rng);
        for (int e = 0; e < 3 * s; e++) /* a few changed runs */
            for (size_t i = 0, at = mt_test_below(&rng, half); i < 1 + (size_t)e && at + i < half; i++)
                in[2 + half + at + i] ^= 0x5a;
        char name[32];
        snprintf(name, sizeof name, "edits-%d", s);
        save(dir, name, in, 2 + 2 * half);
    }
    printf("corpus written to %s\n", argv[1]);
    return 0;
}
