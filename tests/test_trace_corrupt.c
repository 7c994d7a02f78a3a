/* trace: a reader never trusts the file. A small trace cut at every byte
 * reads back exactly the records of its complete chunks; a bit flipped at
 * any byte is detected (an error, or a reported index/tail problem); a
 * writer killed mid-trace leaves a readable prefix; hand-made bad records,
 * headers and replay-rule violations give the documented error codes. */
#include <signal.h>
#include <sys/wait.h>

#include "trace/format.h"
#include "trace_util.h"

static uint64_t rng;

typedef struct chunk_pos {
    uint64_t start, end;
    int kind;
    uint32_t nrecords;
} chunk_pos;

/* The chunks of a well-formed file, parsed with the format's own helpers. */
static size_t chunk_table(const uint8_t *f, size_t size, chunk_pos *out, size_t max)
{
    size_t n = 0;
    uint64_t off = MT_FILE_HEADER_SIZE;
    while (off + MT_CHUNK_HEADER_SIZE <= size && n < max) {
        mt_chunk_header h;
        if (mti_chunk_header_parse(f + off, MT_TRACE_MAX_CHUNK_RAW, &h) != 0)
            break;
        out[n].start = off;
        out[n].end = off + MT_CHUNK_HEADER_SIZE + h.stored_size;
        out[n].kind = h.kind;
        out[n].nrecords = h.nrecords;
        off = out[n++].end;
    }
    return n;
}

/* Reads every record; returns how many, and the first error (0 = clean end). */
static size_t read_all(mt_trace_reader *r, int *err, const tr_rec *exp)
{
    mt_trace_record rec;
    size_t n = 0;
    int rc;
    while ((rc = mt_trace_next(r, &rec)) == 1) {
        if (exp)
            tr_check_equal(&exp[n].r, &rec);
        n++;
    }
    *err = rc;
    return n;
}

static size_t small_trace(const char *path, tr_rec *recs, size_t nrec)
{
    tr_gen g;
    tr_gen_init(&g, mt_test_rand(&rng), 300);
    static const mt_trace_kv meta[] = {{"application", "test"}, {"mode", "guard"}};
    mt_trace_writer_opts o = {.chunk_size = 512, .meta = meta, .nmeta = 2};
    mt_trace_writer *w;
    MT_CHECK_OK(mt_trace_writer_open(path, &o, &w));
    size_t k = 0;
    for (size_t i = 0; i < 2; i++) {
        mt_trace_record r = tr_meta_record(meta[i].key, meta[i].value);
        tr_own(&recs[k++], &r);
    }
    while (k < nrec) {
        mt_trace_record r;
        tr_gen_next(&g, &r);
        if (r.type == MT_TRACE_UPDATE && r.u.update.length > 200)
            r.u.update.length = 200; /* no splitting here: records map 1:1 */
        MT_CHECK_OK(mt_trace_write(w, &r));
        tr_own(&recs[k++], &r);
    }
    MT_CHECK_OK(mt_trace_writer_close(w));
    tr_gen_free(&g);
    return k;
}

static void test_truncation(const uint8_t *f, size_t size, const tr_rec *recs, size_t nrec)
{
    chunk_pos ch[256];
    size_t nch = chunk_table(f, size, ch, 256);
    MT_CHECK(nch >= 4 && ch[nch - 1].kind == MT_CHUNK_INDEX);
    MT_CHECK_UINT_EQ(ch[nch - 1].end + MT_TRAILER_SIZE, size);
    printf("truncation: %zu bytes, %zu record chunks, %zu records\n", size, nch - 1, nrec);
    for (size_t len = 0; len <= size; len++) {
        mt_trace_reader *r;
        int rc = mt_trace_reader_open_mem(f, len, NULL, &r);
        if (len < MT_FILE_HEADER_SIZE) {
            MT_CHECK_INT_EQ(rc, MT_ETRUNCATED);
            continue;
        }
        MT_CHECK_OK(rc);
        size_t complete = 0, want = 0;
        for (size_t i = 0; i + 1 < nch; i++)
            if (ch[i].end <= len)
                complete++, want += ch[i].nrecords;
        mt_trace_info info;
        mt_trace_reader_info(r, &info);
        MT_CHECK_UINT_EQ(info.chunks, complete);
        MT_CHECK_UINT_EQ(info.records, want);
        MT_CHECK_INT_EQ(info.complete, len == size);
        if (len < size) {
            MT_CHECK(info.index_error != 0);
            uint64_t last_end = complete ? ch[complete - 1].end : MT_FILE_HEADER_SIZE;
            MT_CHECK_UINT_EQ(info.readable_size, last_end);
            /* Cut between chunks: nothing wrong with the tail. Inside one: truncated. */
            int between = len == last_end || len >= ch[nch - 1].end;
            MT_CHECK_INT_EQ(info.tail_error, between ? 0 : MT_ETRUNCATED);
        }
        int err;
        size_t got = read_all(r, &err, recs);
        MT_CHECK_INT_EQ(err, 0);
        MT_CHECK_UINT_EQ(got, want);
        mt_trace_reader_close(r);
    }
}

/* Every byte, one random bit: the damage must be reported somewhere. */
static void test_bit_flips(const uint8_t *f, size_t size, const tr_rec *recs, size_t nrec)
{
    uint8_t *g = malloc(size);
    MT_CHECK(g);
    size_t open_fail = 0, next_fail = 0, reported = 0;
    for (size_t pos = 0; pos < size; pos++) {
        memcpy(g, f, size);
        g[pos] ^= (uint8_t)(1u << mt_test_below(&rng, 8));
        mt_trace_reader *r;
        int rc = mt_trace_reader_open_mem(g, size, NULL, &r);
        if (rc) {
            MT_CHECK(rc == MT_ECORRUPT || rc == MT_ECHECKSUM || rc == MT_EVERSION || rc == MT_ETRUNCATED);
            open_fail++;
            continue;
        }
        mt_trace_info info;
        mt_trace_reader_info(r, &info);
        int err;
        size_t got = read_all(r, &err, NULL);
        if (err) {
            MT_CHECK(err == MT_ECORRUPT || err == MT_ECHECKSUM || err == MT_EVERSION);
            next_fail++;
        } else {
            /* Read to the end without error: the flip hit the index or the
             * trailer, which the reader reported, and the records are intact. */
            if (!(info.index_error != 0 || info.tail_error != 0)) {
                fprintf(stderr, "undetected flip at byte %zu\n", pos);
                MT_CHECK(0);
            }
            MT_CHECK_UINT_EQ(got, nrec);
            mt_trace_rewind(r);
            read_all(r, &err, recs);
            reported++;
        }
        mt_trace_reader_close(r);
    }
    printf("bit flips: %zu bytes: open failed %zu, read failed %zu, index/tail reported %zu\n", size,
           open_fail, next_fail, reported);
    MT_CHECK_UINT_EQ(open_fail + next_fail + reported, size);
    free(g);
}

/* Specific damage, specific codes. */
static void test_codes(const uint8_t *f, size_t size)
{
    chunk_pos ch[256];
    size_t nch = chunk_table(f, size, ch, 256);
    uint8_t *g = malloc(size);
    MT_CHECK(g);
    mt_trace_reader *r;
    mt_trace_info info;
    int err;

    memcpy(g, f, size), g[0] ^= 1; /* magic */
    MT_CHECK_ERR(mt_trace_reader_open_mem(g, size, NULL, &r), MT_ECORRUPT);
    memcpy(g, f, size), mti_put16(g + 8, 2), mti_put64(g + 24, mt_trace_hash(g, 24)); /* v2, hash ok */
    MT_CHECK_ERR(mt_trace_reader_open_mem(g, size, NULL, &r), MT_EVERSION);
    memcpy(g, f, size), g[ch[0].start + MT_CHUNK_HEADER_SIZE] ^= 0x10; /* chunk 0 payload */
    MT_CHECK_ERR(mt_trace_reader_open_mem(g, size, NULL, &r), MT_ECHECKSUM);

    /* Chunk 2's payload: open works, reading stops there with a checksum error. */
    memcpy(g, f, size), g[ch[2].end - 1] ^= 0x80;
    MT_CHECK_OK(mt_trace_reader_open_mem(g, size, NULL, &r));
    size_t got = read_all(r, &err, NULL);
    MT_CHECK_INT_EQ(err, MT_ECHECKSUM);
    MT_CHECK_UINT_EQ(got, ch[0].nrecords + ch[1].nrecords);
    MT_CHECK_INT_EQ(mt_trace_next(r, &(mt_trace_record){0}), MT_ECHECKSUM); /* sticky */
    MT_CHECK_OK(mt_trace_seek_submit(r, 0)); /* a seek clears it */
    mt_trace_reader_close(r);

    /* Chunk 3's header (not its magic): checksum error when reached via the index. */
    memcpy(g, f, size), g[ch[3].start + 9] ^= 1;
    MT_CHECK_OK(mt_trace_reader_open_mem(g, size, NULL, &r));
    read_all(r, &err, NULL);
    MT_CHECK_INT_EQ(err, MT_ECHECKSUM);
    mt_trace_reader_close(r);

    /* The index payload and the trailer: the reader falls back to scanning. */
    size_t idx = nch - 1;
    memcpy(g, f, size), g[ch[idx].start + MT_CHUNK_HEADER_SIZE] ^= 4;
    MT_CHECK_OK(mt_trace_reader_open_mem(g, size, NULL, &r));
    mt_trace_reader_info(r, &info);
    MT_CHECK_INT_EQ(info.index_error, MT_ECHECKSUM);
    MT_CHECK_INT_EQ(info.indexed, 0);
    MT_CHECK_INT_EQ(info.complete, 0);
    MT_CHECK_INT_EQ(info.tail_error, 0);
    MT_CHECK_UINT_EQ(info.chunks, idx);
    mt_trace_reader_close(r);
    memcpy(g, f, size), g[size - 1] ^= 1; /* trailer hash */
    MT_CHECK_OK(mt_trace_reader_open_mem(g, size, NULL, &r));
    mt_trace_reader_info(r, &info);
    MT_CHECK_INT_EQ(info.index_error, MT_ECHECKSUM);
    mt_trace_reader_close(r);
    memcpy(g, f, size), g[size - MT_TRAILER_SIZE] ^= 1; /* trailer magic: closed, but bad */
    MT_CHECK_OK(mt_trace_reader_open_mem(g, size, NULL, &r));
    mt_trace_reader_info(r, &info);
    MT_CHECK_INT_EQ(info.index_error, MT_ECORRUPT);
    mt_trace_reader_close(r);
    free(g);
}

/* ---- hand-made files ------------------------------------------------------- */

/* File header + one raw record chunk holding `payload`; no index. */
static size_t craft(uint8_t *out, const uint8_t *payload, size_t plen, uint32_t nrecords, uint32_t nsubmits)
{
    mti_file_header_put(out, 4096);
    mt_chunk_header h = {.kind = MT_CHUNK_RECORDS, .codec = MT_CODEC_RAW, .nrecords = nrecords,
                         .stored_size = (uint32_t)plen, .raw_size = (uint32_t)plen, .nsubmits = nsubmits,
                         .payload_hash = mt_trace_hash(payload, plen)};
    mti_chunk_header_put(out + MT_FILE_HEADER_SIZE, &h);
    memcpy(out + MT_FILE_HEADER_SIZE + MT_CHUNK_HEADER_SIZE, payload, plen);
    return MT_FILE_HEADER_SIZE + MT_CHUNK_HEADER_SIZE + plen;
}

/* Opens the crafted file and reads it; returns the number of records read
 * and the final code in *err. open must succeed. */
static size_t crafted_read(const uint8_t *payload, size_t plen, uint32_t nrecords, uint32_t nsubmits, int *err)
{
    uint8_t f[4096];
    size_t n = craft(f, payload, plen, nrecords, nsubmits);
    mt_trace_reader *r;
    int rc = mt_trace_reader_open_mem(f, n, NULL, &r);
    if (rc) {
        *err = rc;
        return 0;
    }
    mt_trace_info info;
    mt_trace_reader_info(r, &info);
    MT_CHECK_INT_EQ(info.index_error, MT_ETRUNCATED); /* never closed */
    size_t got = read_all(r, err, NULL);
    mt_trace_reader_close(r);
    return got;
}

static void test_crafted_records(void)
{
    int err;
    /* MEMORY id 5 size 100 type 1 flags 7: a good record, to start from. */
    const uint8_t mem[] = {2, 4, 5, 100, 1, 7};
    MT_CHECK_UINT_EQ(crafted_read(mem, sizeof mem, 1, 0, &err), 1);
    MT_CHECK_INT_EQ(err, 0);
    /* Extra body bytes (a later minor version's field): accepted. */
    const uint8_t longer[] = {2, 6, 5, 100, 1, 7, 9, 9};
    MT_CHECK_UINT_EQ(crafted_read(longer, sizeof longer, 1, 0, &err), 1);
    MT_CHECK_INT_EQ(err, 0);
    /* Unknown skippable type 50 between two good ones: skipped. */
    const uint8_t skip[] = {2, 4, 5, 100, 1, 7, 50, 3, 1, 2, 3, 6, 1, 5};
    MT_CHECK_UINT_EQ(crafted_read(skip, sizeof skip, 3, 0, &err), 2);
    MT_CHECK_INT_EQ(err, 0);
    /* A critical unknown type (>= 128): version error. */
    const uint8_t crit[] = {2, 4, 5, 100, 1, 7, 200, 0};
    MT_CHECK_UINT_EQ(crafted_read(crit, sizeof crit, 2, 0, &err), 1);
    MT_CHECK_INT_EQ(err, MT_EVERSION);
    /* Type 0, a body past the chunk, a short body, an 11-byte varint. */
    const uint8_t zero[] = {0, 0};
    crafted_read(zero, sizeof zero, 1, 0, &err);
    MT_CHECK_INT_EQ(err, MT_ECORRUPT);
    const uint8_t past[] = {2, 40, 5, 100};
    crafted_read(past, sizeof past, 1, 0, &err);
    MT_CHECK_INT_EQ(err, MT_ECORRUPT);
    const uint8_t shortb[] = {2, 2, 5, 100};
    crafted_read(shortb, sizeof shortb, 1, 0, &err);
    MT_CHECK_INT_EQ(err, MT_ECORRUPT);
    const uint8_t longv[] = {6, 11, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01};
    crafted_read(longv, sizeof longv, 1, 0, &err);
    MT_CHECK_INT_EQ(err, MT_ECORRUPT);
    const uint8_t bit64[] = {6, 10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02};
    crafted_read(bit64, sizeof bit64, 1, 0, &err);
    MT_CHECK_INT_EQ(err, MT_ECORRUPT); /* 10th byte above 1: more than 64 bits */
    /* MEMORY type index over 32 bits. */
    const uint8_t wide[] = {2, 8, 5, 100, 0x80, 0x80, 0x80, 0x80, 0x10, 7};
    crafted_read(wide, sizeof wide, 1, 0, &err);
    MT_CHECK_INT_EQ(err, MT_ECORRUPT);
    /* The chunk header's counts must match its records. */
    MT_CHECK_UINT_EQ(crafted_read(mem, sizeof mem, 2, 0, &err), 1);
    MT_CHECK_INT_EQ(err, MT_ECORRUPT);
    const uint8_t two[] = {2, 4, 5, 100, 1, 7, 2, 4, 6, 100, 1, 7};
    MT_CHECK_UINT_EQ(crafted_read(two, sizeof two, 1, 0, &err), 1);
    MT_CHECK_INT_EQ(err, MT_ECORRUPT);
    /* SUBMIT numbering: 0 then 1 is right, 0 then 2 is not. */
    const uint8_t sub_ok[] = {8, 2, 0, 0, 8, 2, 1, 0};
    MT_CHECK_UINT_EQ(crafted_read(sub_ok, sizeof sub_ok, 2, 2, &err), 2);
    MT_CHECK_INT_EQ(err, 0);
    const uint8_t sub_bad[] = {8, 2, 0, 0, 8, 2, 2, 0};
    crafted_read(sub_bad, sizeof sub_bad, 2, 2, &err);
    MT_CHECK_INT_EQ(err, MT_ECORRUPT);
    /* A chunk whose raw size exceeds the file's max_chunk_raw: the scan stops. */
    uint8_t f[8192];
    uint8_t big[5000] = {0};
    size_t n = craft(f, big, sizeof big, 1, 0);
    mt_trace_reader *r;
    MT_CHECK_OK(mt_trace_reader_open_mem(f, n, NULL, &r));
    mt_trace_info info;
    mt_trace_reader_info(r, &info);
    MT_CHECK_INT_EQ(info.tail_error, MT_ECORRUPT);
    MT_CHECK_UINT_EQ(info.chunks, 0);
    mt_trace_reader_close(r);
}

/* Records that encode fine but break the replay rules. */
static void test_replay_rules(void)
{
    char path[256];
    tr_tmp_path(path, sizeof path, "rules");
    uint8_t data[16] = {1, 2, 3};
    for (int c = 0; c < 7; c++) {
        mt_trace_writer *w;
        MT_CHECK_OK(mt_trace_writer_open(path, NULL, &w));
        MT_CHECK_OK(mt_trace_write_memory(w, 1, 100, 0, 0));
        switch (c) {
        case 0: MT_CHECK_OK(mt_trace_write_update(w, 2, 0, 0, data, 3)); break;   /* unknown memory */
        case 1: MT_CHECK_OK(mt_trace_write_update(w, 1, 0, 98, data, 3)); break;  /* past its end */
        case 2: MT_CHECK_OK(mt_trace_write_memory(w, 1, 10, 0, 0)); break;        /* id twice */
        case 3: MT_CHECK_OK(mt_trace_write_bind(w, 9, 1, 0)); break;              /* unknown object */
        case 4: MT_CHECK_OK(mt_trace_write_destroy(w, MT_TRACE_DESTROY_MEMORY, 3)); break;
        case 5: MT_CHECK_OK(mt_trace_write_content_hash(w, 1, 0, 101, 0)); break;    /* hash past the end */
        case 6: /* a huge memory: the image budget refuses it, nothing is allocated */
            MT_CHECK_OK(mt_trace_write_memory(w, 2, 1ull << 60, 0, 0));
            MT_CHECK_OK(mt_trace_write_update(w, 2, 0, 1ull << 59, data, 3));
            break;
        }
        MT_CHECK_OK(mt_trace_write_submit(w, 0, NULL));
        MT_CHECK_OK(mt_trace_writer_close(w));
        mt_trace_reader *r;
        MT_CHECK_OK(mt_trace_reader_open(path, NULL, &r));
        mt_trace_replay *rp;
        mt_trace_replay_opts o = {.flags = MT_TRACE_REPLAY_VERIFY};
        MT_CHECK_OK(mt_trace_replay_create(r, &o, &rp));
        MT_CHECK_ERR(mt_trace_replay_to_submit(rp, 0), c == 6 ? -ENOMEM : MT_ECORRUPT);
        mt_trace_replay_destroy(rp);
        mt_trace_reader_close(r);
    }
    unlink(path);
}

/* A writer that dies: what it flushed is readable, in full. */
static void test_killed_writer(void)
{
    char path[256];
    tr_tmp_path(path, sizeof path, "killed");
    fflush(stdout);
    pid_t pid = fork();
    MT_CHECK(pid >= 0);
    if (pid == 0) {
        mt_trace_writer *w;
        mt_trace_writer_opts o = {.chunk_size = 1024};
        if (mt_trace_writer_open(path, &o, &w))
            _exit(3);
        uint8_t data[100];
        memset(data, 0xab, sizeof data);
        mt_trace_write_memory(w, 1, 1 << 20, 0, 0);
        for (int s = 0; s < 50; s++) {
            mt_trace_write_update(w, 1, 0, (uint64_t)s * 100, data, sizeof data);
            mt_trace_write_submit(w, 0, NULL);
        }
        if (mt_trace_writer_flush(w))
            _exit(4);
        for (int s = 50; s < 53; s++) /* not flushed: may or may not be there */
            mt_trace_write_submit(w, 0, NULL);
        raise(SIGKILL);
        _exit(5);
    }
    int status;
    MT_CHECK(waitpid(pid, &status, 0) == pid);
    MT_CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    mt_trace_reader *r;
    MT_CHECK_OK(mt_trace_reader_open(path, NULL, &r));
    mt_trace_info info;
    mt_trace_reader_info(r, &info);
    MT_CHECK_INT_EQ(info.complete, 0);
    MT_CHECK_INT_EQ(info.index_error, MT_ETRUNCATED);
    MT_CHECK(info.submits >= 50);
    uint8_t content[5000];
    MT_CHECK_INT_EQ(mt_trace_reconstruct(r, 1, 49, content, sizeof content), 1 << 20);
    for (size_t i = 0; i < sizeof content; i++)
        MT_CHECK_UINT_EQ(content[i], 0xab);
    mt_trace_reader_close(r);
    unlink(path);
}

int main(int argc, char **argv)
{
    rng = mt_test_seed(argc, argv);
    char path[256];
    tr_tmp_path(path, sizeof path, "corrupt");
    tr_rec recs[80];
    size_t nrec = small_trace(path, recs, 80);
    size_t size;
    uint8_t *f = tr_read_file(path, &size);
    test_truncation(f, size, recs, nrec);
    test_bit_flips(f, size, recs, nrec);
    test_codes(f, size);
    test_crafted_records();
    test_replay_rules();
    test_killed_writer();
    free(f);
    for (size_t i = 0; i < nrec; i++)
        free(recs[i].owned);
    unlink(path);
    printf("ok\n");
    return 0;
}
