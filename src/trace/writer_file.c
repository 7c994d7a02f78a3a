/* The trace file: opening it safely, the token that decides who writes it,
 * and the two things written under the token, chunks and the index.
 *
 * Every write is a pwrite(2) at an offset the token holder knows, so that
 * whoever holds the token (a compressor thread, a checkpoint, the emergency
 * flush of a dying process) continues exactly after the last complete chunk,
 * whatever the fd's own offset is. Nothing here allocates or takes a lock
 * while the token is held: the emergency flush waits for the token, and the
 * thread it runs in may hold any lock, the allocator's included (so the
 * index grows in a buffer allocated outside the token: index_want, alloc,
 * adopt). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <xxhash.h>

#include "../common/fdpark.h"
#include "writer.h"

long mti_wfile_tid(void) { return (long)syscall(SYS_gettid); }

/* Open without O_TRUNC, lock, and only then truncate: a second process that
 * opens the same path (an exec'd child inheriting the output path, or an
 * unrelated one) must find it locked and leave the first one's trace alone.
 * O_NONBLOCK: opening a FIFO must not wait for a reader. */
int mti_wfile_open(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOCTTY | O_NONBLOCK, 0644);
    if (fd < 0) {
        struct stat st;
        int e = errno;
        /* A FIFO without a reader refuses a non-blocking writer (ENXIO). */
        if (e == ENXIO && stat(path, &st) == 0 && !S_ISREG(st.st_mode))
            return -ESPIPE;
        return -e;
    }
    struct stat st;
    int rc = fstat(fd, &st) < 0 ? -errno : S_ISREG(st.st_mode) ? 0 : -ESPIPE;
    while (rc == 0 && flock(fd, LOCK_EX | LOCK_NB) < 0) {
        if (errno == EINTR)
            continue;
        /* EWOULDBLOCK: someone writes it. Filesystems without locks
         * (ENOLCK, EOPNOTSUPP) get no protection, not a failure. */
        if (errno == EWOULDBLOCK)
            rc = -EBUSY;
        break;
    }
    int fl = rc == 0 ? fcntl(fd, F_GETFL) : 0;
    if (rc == 0 && (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0))
        rc = -errno;
    if (rc == 0 && ftruncate(fd, 0) < 0)
        rc = -errno;
    if (rc) {
        close(fd);
        return rc;
    }
    return fd;
}

int mti_wfile_ours(const mt_trace_writer *w) { return mti_fd_names(w->fd, w->fd_dev, w->fd_ino); }

/* Acquire pairs with the release in mti_wfile_leave(): the new holder sees
 * file_off, the index and everything the previous holder wrote. Normal
 * holders do not contend (compressors write one at a time under `writing`,
 * checkpoints run when every chunk is written); should one find another
 * there anyway, it waits its turn. Only the emergency flush makes it fail. */
int mti_wfile_enter(mt_trace_writer *w)
{
    long tid = mti_wfile_tid();
    for (;;) {
        long expect = 0;
        if (atomic_compare_exchange_weak_explicit(&w->token, &expect, tid, memory_order_acquire,
                                                  memory_order_relaxed))
            return 0;
        if (expect == MT_TOKEN_EMERGENCY)
            return -ECANCELED;
        if (expect != 0)
            sched_yield();
    }
}

void mti_wfile_leave(mt_trace_writer *w) { atomic_store_explicit(&w->token, 0, memory_order_release); }

static void index_entry(mt_trace_writer *w, uint64_t offset, const mt_chunk_header *h)
{
    mt_index_entry e = {offset, h->submits_before, h->nsubmits, h->nrecords, h->raw_size,
                        h->stored_size};
    mti_index_entry_put(w->index_buf + MT_CHUNK_HEADER_SIZE + (size_t)w->nindex * MT_INDEX_ENTRY_SIZE,
                       &e);
    w->nindex++;
    w->submits_written += h->nsubmits;
}

int mti_wfile_append(mt_trace_writer *w, const mt_chunk_header *h, const void *a, size_t na,
                    const void *b, size_t nb)
{
    if (w->nindex >= w->index_cap)
        return -ENOMEM; /* the spare room ran out: growing failed repeatedly */
    if (!mti_wfile_ours(w))
        return -EBADF; /* the number is not the trace's any more: write nothing there */
    /* A checkpoint's index lies here: cut it off first, so that a crash
     * during this write leaves complete chunks and then at most a part of
     * this one, never the old trailer after it. */
    if (w->index_end) {
        if (w->regular && ftruncate(w->fd, (off_t)w->file_off) < 0)
            return -errno;
        w->index_end = 0;
    }
    int rc = mti_pwrite_all(w->fd, a, na, w->file_off);
    if (rc == 0 && nb)
        rc = mti_pwrite_all(w->fd, b, nb, w->file_off + na);
    if (rc)
        return rc;
    index_entry(w, w->file_off, h);
    w->file_off += na + nb;
    return 0;
}

/* Spare entries kept: the emergency flush appends at most nslots chunks
 * without allocating; twice that, so that growing can wait for a moment
 * outside the token. */
static size_t index_spare(const mt_trace_writer *w) { return 2 * ((size_t)w->nslots + 1); }

size_t mti_wfile_index_want(const mt_trace_writer *w)
{
    size_t need = (size_t)w->nindex + index_spare(w);
    if (need <= w->index_cap)
        return 0;
    size_t cap = w->index_cap ? 2 * w->index_cap : 256;
    while (cap < need)
        cap *= 2;
    return cap;
}

uint8_t *mti_wfile_index_alloc(size_t cap) { return malloc(MT_CHUNK_HEADER_SIZE + cap * MT_INDEX_ENTRY_SIZE); }

uint8_t *mti_wfile_index_adopt(mt_trace_writer *w, uint8_t *buf, size_t cap)
{
    if (cap <= w->index_cap)
        return buf; /* grown meanwhile */
    if (w->index_buf)
        memcpy(buf + MT_CHUNK_HEADER_SIZE, w->index_buf + MT_CHUNK_HEADER_SIZE,
               (size_t)w->nindex * MT_INDEX_ENTRY_SIZE);
    uint8_t *old = w->index_buf;
    w->index_buf = buf;
    w->index_cap = cap;
    return old;
}

int mti_wfile_write_index(mt_trace_writer *w, uint32_t end_reason)
{
    size_t len = (size_t)w->nindex * MT_INDEX_ENTRY_SIZE;
    if (len > MT_TRACE_MAX_CHUNK_RAW)
        return -EFBIG; /* > 2 million chunks: the trace stays readable by scanning */
    mt_chunk_header h = {.kind = MT_CHUNK_INDEX, .codec = MT_CODEC_RAW, .seq = w->nindex,
                         .nrecords = w->nindex, .stored_size = (uint32_t)len,
                         .raw_size = (uint32_t)len, .submits_before = w->submits_written,
                         .end_reason = end_reason};
    h.payload_hash = XXH3_64bits(w->index_buf + MT_CHUNK_HEADER_SIZE, len);
    mti_chunk_header_put(w->index_buf, &h);
    if (!mti_wfile_ours(w))
        return -EBADF;
    uint8_t tr[MT_TRAILER_SIZE];
    mti_trailer_put(tr, w->file_off, w->nindex, w->submits_written);
    uint64_t at = w->file_off + MT_CHUNK_HEADER_SIZE + len;
    /* The old index, if any, is overwritten in place: same start, and this
     * one is at least as long. */
    int rc = mti_pwrite_all(w->fd, w->index_buf, MT_CHUNK_HEADER_SIZE + len, w->file_off);
    if (rc == 0)
        rc = mti_pwrite_all(w->fd, tr, sizeof tr, at);
    if (rc == 0)
        w->index_end = at + sizeof tr;
    return rc;
}
