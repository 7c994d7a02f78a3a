/* The trace reader: open (file header, chunk table, header metadata),
 * iteration with per-chunk consistency checks, seeking to a submit. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "reader.h"

static void reset_iter(mt_trace_reader *r, size_t chunk)
{
    r->next_chunk = chunk;
    r->loaded = 0;
    r->pos = r->end = NULL;
    r->err = 0;
}

/* Loads the next chunk after checking that the current one held exactly the
 * records and submits its header promised. Returns 1, 0 at the end, or an error. */
static int advance(mt_trace_reader *r)
{
    if (r->loaded && (r->seen_records != r->hdr.nrecords || r->seen_submits != r->hdr.nsubmits))
        return MT_ECORRUPT;
    r->loaded = 0;
    if (r->next_chunk >= r->nchunks)
        return 0;
    int rc = mti_chunk_read(r, r->next_chunk, &r->hdr);
    if (rc)
        return rc;
    r->next_chunk++;
    r->loaded = 1;
    r->pos = r->raw;
    r->end = r->raw + r->hdr.raw_size;
    r->seen_records = r->seen_submits = 0;
    return 1;
}

int mt_trace_next(mt_trace_reader *r, mt_trace_record *rec)
{
    if (!r || !rec)
        return -EINVAL;
    while (r->err == 0) {
        if (!r->loaded || r->pos >= r->end) {
            int rc = advance(r);
            if (rc <= 0) {
                r->err = rc;
                return rc; /* 0: the end (stays the end until a seek) */
            }
            continue;
        }
        if (r->seen_records == r->hdr.nrecords) {
            r->err = MT_ECORRUPT; /* more records than the header says */
            break;
        }
        int rc = mti_record_get(&r->pos, r->end, rec);
        r->seen_records++;
        if (rc < 0) {
            r->err = rc;
            break;
        }
        if (rc == 0) {
            r->skipped++;
            continue;
        }
        if (rec->type == MT_TRACE_SUBMIT) {
            if (rec->u.submit.index != r->hdr.submits_before + r->seen_submits) {
                r->err = MT_ECORRUPT;
                break;
            }
            r->seen_submits++;
        }
        return 1;
    }
    return r->err;
}

int mt_trace_rewind(mt_trace_reader *r)
{
    if (!r)
        return -EINVAL;
    reset_iter(r, 0);
    return 0;
}

int mt_trace_seek_submit(mt_trace_reader *r, uint64_t n)
{
    if (!r)
        return -EINVAL;
    if (n > r->info.submits)
        return -ENOENT;
    reset_iter(r, 0);
    if (n == 0)
        return 0;
    uint64_t k = n - 1; /* position just after SUBMIT k */
    size_t lo = 0, hi = r->nchunks;
    while (hi - lo > 1) { /* last chunk with submits_before <= k */
        size_t mid = lo + (hi - lo) / 2;
        if (r->chunks[mid].submits_before <= k)
            lo = mid;
        else
            hi = mid;
    }
    reset_iter(r, lo);
    mt_trace_record rec;
    for (;;) {
        int rc = mt_trace_next(r, &rec);
        if (rc <= 0)
            return rc ? rc : MT_ECORRUPT; /* the index promised this submit */
        if (rec.type == MT_TRACE_SUBMIT && rec.u.submit.index == k)
            return 0;
    }
}

void mt_trace_reader_info(const mt_trace_reader *r, mt_trace_info *out) { *out = r->info; }

int mt_trace_meta_at(const mt_trace_reader *r, size_t i, const char **key, const char **value)
{
    if (!r || i >= r->nmeta)
        return -ENOENT;
    if (key)
        *key = r->meta[2 * i];
    if (value)
        *value = r->meta[2 * i + 1];
    return 0;
}

int mt_trace_chunk_at(const mt_trace_reader *r, size_t i, mt_trace_chunk_info *out)
{
    if (i >= r->nchunks)
        return -ENOENT;
    const mt_index_entry *e = &r->chunks[i];
    *out = (mt_trace_chunk_info){e->offset, e->submits_before, e->nsubmits, e->nrecords,
                                 e->raw_size, e->stored_size};
    return 0;
}

const char *mt_trace_meta_get(const mt_trace_reader *r, const char *key)
{
    for (size_t i = 0; r && key && i < r->nmeta; i++)
        if (strcmp(r->meta[2 * i], key) == 0)
            return r->meta[2 * i + 1];
    return NULL;
}

/* Copies the META records that open chunk 0 (its header metadata). The copy
 * is bounded by the chunk's raw size. */
static int load_meta(mt_trace_reader *r)
{
    mt_trace_record rec;
    size_t n = 0, bytes = 0;
    int rc;
    while ((rc = mt_trace_next(r, &rec)) == 1 && rec.type == MT_TRACE_META && r->next_chunk == 1) {
        n++;
        bytes += rec.u.meta.key_len + rec.u.meta.value_len + 2;
    }
    if (rc < 0)
        return rc;
    r->meta = calloc(2 * n + 1, sizeof *r->meta);
    r->meta_buf = malloc(bytes + 1);
    if (!r->meta || !r->meta_buf)
        return -ENOMEM;
    mt_trace_rewind(r);
    char *p = r->meta_buf;
    for (size_t i = 0; i < n && mt_trace_next(r, &rec) == 1; i++) {
        r->meta[2 * i] = p;
        memcpy(p, rec.u.meta.key, rec.u.meta.key_len);
        p += rec.u.meta.key_len;
        *p++ = 0;
        r->meta[2 * i + 1] = p;
        memcpy(p, rec.u.meta.value, rec.u.meta.value_len);
        p += rec.u.meta.value_len;
        *p++ = 0;
    }
    r->nmeta = n;
    mt_trace_rewind(r);
    return 0;
}

static int open_src(mt_src src, mt_trace_reader **out)
{
    mt_trace_reader *r = calloc(1, sizeof *r);
    if (!r) {
        if (src.fd >= 0)
            close(src.fd);
        return -ENOMEM;
    }
    r->src = src;
    r->info.file_size = src.size;
    uint8_t h[MT_FILE_HEADER_SIZE];
    int rc = src.size < sizeof h ? MT_ETRUNCATED : mti_src_read(&src, 0, h, sizeof h);
    if (rc == 0)
        rc = mti_file_header_parse(h, &r->max_chunk_raw, &r->info.version_minor);
    if (rc == 0) {
        r->info.version_major = MT_TRACE_VERSION_MAJOR;
        r->info.end = MT_TRACE_END_SCANNED; /* until the index says otherwise */
        rc = mti_chunks_load(r);
    }
    if (rc == 0)
        mti_chunks_tail(r);
    if (rc == 0)
        rc = load_meta(r);
    if (rc) {
        mt_trace_reader_close(r);
        return rc;
    }
    *out = r;
    return 0;
}

int mt_trace_reader_open(const char *path, const mt_trace_reader_opts *opts, mt_trace_reader **out)
{
    (void)opts;
    if (!path || !out)
        return -EINVAL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int e = -errno;
        close(fd);
        return e;
    }
    return open_src((mt_src){fd, NULL, (uint64_t)st.st_size}, out);
}

int mt_trace_reader_open_mem(const void *data, size_t size, const mt_trace_reader_opts *opts,
                             mt_trace_reader **out)
{
    (void)opts;
    if ((!data && size) || !out)
        return -EINVAL;
    return open_src((mt_src){-1, data, size}, out);
}

void mt_trace_reader_close(mt_trace_reader *r)
{
    if (!r)
        return;
    if (r->src.fd >= 0)
        close(r->src.fd);
    ZSTD_freeDCtx(r->dctx);
    free(r->chunks);
    free(r->raw);
    free(r->stored);
    free(r->meta);
    free(r->meta_buf);
    free(r);
}

const char *mt_trace_rec_type_name(int type)
{
    static const char *const names[] = {NULL, "meta", "memory", "object", "bind", "map", "unmap",
                                        "update", "submit", "frame", "destroy", "annotation",
                                        "content-hash", "mode", "mismatch"};
    return type > 0 && type <= MT_REC_LAST_KNOWN ? names[type] : "unknown";
}
