/* Fuzz target: the trace reader and replayer on arbitrary bytes.
 *
 * Each input is read twice: as given (the validation of magic, hashes and
 * sizes), and with every checksum recomputed, so that mutations reach the
 * record decoder, the chunk consistency checks and the replayer instead of
 * dying at the first hash. Invariants: nothing crashes or leaks (ASan), every
 * error is one of the documented codes, a clean read returns no more
 * records than the chunk headers promised, and the end state (how the trace
 * ends, records after the last submit) is consistent. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "memtrack/trace.h"
#include "trace/format.h"

static int known_error(int rc)
{
    return rc == MT_ECORRUPT || rc == MT_ECHECKSUM || rc == MT_ETRUNCATED || rc == MT_EVERSION ||
           rc == -ENOMEM || rc == -ENOENT;
}

/* Recomputes the hashes of the file header, of each chunk found by walking
 * stored sizes, and of a trailer at the end. */
static void fix_checksums(uint8_t *f, size_t size)
{
    if (size < MT_FILE_HEADER_SIZE)
        return;
    mti_put64(f + 24, mt_trace_hash(f, 24));
    uint64_t off = MT_FILE_HEADER_SIZE;
    while (size - off >= MT_CHUNK_HEADER_SIZE) {
        uint8_t *h = f + off;
        memcpy(h, MT_CHUNK_MAGIC, 4);
        uint64_t stored = mti_get32(h + 16);
        uint64_t left = size - off - MT_CHUNK_HEADER_SIZE;
        if (stored <= left)
            mti_put64(h + 40, mt_trace_hash(h + MT_CHUNK_HEADER_SIZE, (size_t)stored));
        mti_put64(h + 48, mt_trace_hash(h, 48));
        if (stored > left)
            break;
        off += MT_CHUNK_HEADER_SIZE + stored;
    }
    if (size >= MT_FILE_HEADER_SIZE + MT_TRAILER_SIZE) {
        uint8_t *t = f + size - MT_TRAILER_SIZE;
        if (memcmp(t, MT_TRAILER_MAGIC, 8) == 0)
            mti_put64(t + 32, mt_trace_hash(t, 32));
    }
}

static void read_records(mt_trace_reader *r, const mt_trace_info *info)
{
    mt_trace_record rec;
    uint64_t n = 0, sum = 0;
    int rc;
    while ((rc = mt_trace_next(r, &rec)) == 1) {
        n++;
        if (rec.type == MT_TRACE_UPDATE && rec.u.update.length) /* touch the bytes: ASan checks bounds */
            sum += ((const uint8_t *)rec.u.update.data)[rec.u.update.length - 1];
    }
    MT_FUZZ_CHECK(rc == 0 || known_error(rc));
    MT_FUZZ_CHECK(n <= info->records);
    (void)sum;
}

static void replay(mt_trace_reader *r)
{
    mt_trace_replay *rp;
    mt_trace_replay_opts o = {.max_bytes = 1u << 20, .flags = MT_TRACE_REPLAY_VERIFY};
    if (mt_trace_replay_create(r, &o, &rp))
        return;
    mt_trace_record rec;
    int rc;
    uint64_t last_mem = 0;
    while ((rc = mt_trace_replay_next(rp, &rec)) == 1)
        if (rec.type == MT_TRACE_MEMORY)
            last_mem = rec.u.memory.id;
    MT_FUZZ_CHECK(rc == 0 || known_error(rc));
    uint8_t buf[64];
    int64_t size = mt_trace_replay_memory_size(rp, last_mem);
    if (size >= 0)
        mt_trace_replay_read(rp, last_mem, 0, buf, size < 64 ? (size_t)size : 64);
    mt_trace_replay_destroy(rp);
    if (last_mem) {
        int64_t n = mt_trace_reconstruct(r, last_mem, 0, buf, sizeof buf);
        MT_FUZZ_CHECK(n >= 0 || known_error((int)n));
        n = mt_trace_reconstruct_object(r, last_mem, 0, buf, sizeof buf);
        MT_FUZZ_CHECK(n >= 0 || known_error((int)n));
    }
}

static void one(const uint8_t *data, size_t size)
{
    mt_trace_reader *r;
    int rc = mt_trace_reader_open_mem(data, size, NULL, &r);
    if (rc) {
        MT_FUZZ_CHECK(known_error(rc));
        return;
    }
    mt_trace_info info;
    mt_trace_reader_info(r, &info);
    MT_FUZZ_CHECK(info.readable_size <= size && info.submits <= info.records);
    MT_FUZZ_CHECK(info.tail_records <= info.records);
    MT_FUZZ_CHECK(info.end >= MT_TRACE_END_SCANNED && info.end <= MT_TRACE_END_EMERGENCY);
    MT_FUZZ_CHECK(info.complete == (info.end != MT_TRACE_END_SCANNED));
    const char *k, *v;
    for (size_t i = 0; mt_trace_meta_at(r, i, &k, &v) == 0; i++)
        MT_FUZZ_CHECK(strlen(k) <= size && strlen(v) <= size);
    read_records(r, &info);
    uint64_t seeks[3] = {info.submits / 2, info.submits, info.submits + 1};
    for (int i = 0; i < 3; i++) {
        rc = mt_trace_seek_submit(r, seeks[i]);
        MT_FUZZ_CHECK(rc == 0 || known_error(rc));
        if (rc == 0)
            read_records(r, &info);
    }
    replay(r);
    mt_trace_reader_close(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    one(data, size);
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    fix_checksums(copy, size);
    one(copy, size);
    free(copy);
    return 0;
}
