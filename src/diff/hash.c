/* Hash mode: one XXH3-64 per chunk instead of a shadow copy. A changed chunk
 * is found when its hash changes, so a change is missed only on a 64-bit hash
 * collision (docs/diff.md). Reports whole chunks, adjacent ones merged. */
#include <errno.h>
#include <stdlib.h>
#include <xxhash.h>

#include "job.h"

struct mt_diff_hashes {
    size_t size, chunk, nchunks;
    uint64_t *hash;
};

static uint64_t chunk_hash(const mt_diff_hashes *h, const uint8_t *live, size_t c)
{
    size_t off = c * h->chunk;
    size_t len = h->size - off < h->chunk ? h->size - off : h->chunk;
    return XXH3_64bits(live + off, len);
}

int mt_diff_hashes_create(const void *live, size_t size, const mt_diff_hash_opts *opts,
                          mt_diff_hashes **out)
{
    size_t chunk = opts && opts->chunk_size ? opts->chunk_size : MT_DIFF_DEFAULT_HASH_CHUNK;
    if (!out || (!live && size) || chunk < 64)
        return -EINVAL;
    mt_diff_hashes *h = calloc(1, sizeof *h);
    if (!h)
        return -ENOMEM;
    h->size = size;
    h->chunk = chunk;
    h->nchunks = size / chunk + (size % chunk != 0);
    h->hash = calloc(h->nchunks ? h->nchunks : 1, sizeof *h->hash);
    if (!h->hash) {
        free(h);
        return -ENOMEM;
    }
    for (size_t c = 0; c < h->nchunks; c++)
        h->hash[c] = chunk_hash(h, live, c);
    *out = h;
    return 0;
}

long mt_diff_hashed(mt_diff_hashes *h, mt_diff_job *job, mt_diff_region *out, size_t max)
{
    int rc = mti_diff_job_check(job);
    if (rc < 0)
        return rc;
    if (!h || job->shadow || job->writeback || job->size != h->size || (!out && max > 0))
        return -EINVAL;
    mt_diff_region whole;
    size_t nreg, nout = 0;
    const mt_diff_region *reg = mti_diff_job_regions(job, &whole, &nreg);
    size_t next_chunk = job->cursor / h->chunk; /* chunks below were done */

    for (size_t i = mti_diff_job_first(reg, nreg, job->cursor); i < nreg; i++) {
        if (reg[i].length == 0)
            continue;
        size_t first = reg[i].offset / h->chunk, last = (reg[i].offset + reg[i].length - 1) / h->chunk;
        for (size_t c = first > next_chunk ? first : next_chunk; c <= last; c++) {
            uint64_t v = chunk_hash(h, job->live, c);
            if (v == h->hash[c])
                continue;
            size_t off = c * h->chunk;
            size_t len = h->size - off < h->chunk ? h->size - off : h->chunk;
            if (nout > 0 && out[nout - 1].offset + out[nout - 1].length == off) {
                out[nout - 1].length += len;
            } else if (nout == max) {
                job->cursor = off;
                return (long)nout;
            } else {
                out[nout].offset = off;
                out[nout].length = len;
                nout++;
            }
            h->hash[c] = v;
        }
        if (last + 1 > next_chunk)
            next_chunk = last + 1;
    }
    job->cursor = job->size;
    return (long)nout;
}

size_t mt_diff_hashes_chunk_size(const mt_diff_hashes *h) { return h ? h->chunk : 0; }

void mt_diff_hashes_destroy(mt_diff_hashes *h)
{
    if (!h)
        return;
    free(h->hash);
    free(h);
}
