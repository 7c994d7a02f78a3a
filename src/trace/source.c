/* Reader input: a file read with pread (never mmap: a file truncated under
 * a mapping would raise SIGBUS), or a caller's memory. */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "reader.h"

int mti_src_read(const mt_src *s, uint64_t off, void *buf, size_t n)
{
    if (off > s->size || n > s->size - off)
        return MT_ETRUNCATED;
    if (n == 0)
        return 0;
    if (s->fd < 0) {
        memcpy(buf, s->mem + off, n);
        return 0;
    }
    uint8_t *p = buf;
    while (n > 0) {
        ssize_t k = pread(s->fd, p, n, (off_t)off);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (k == 0)
            return MT_ETRUNCATED;
        p += k;
        off += (uint64_t)k;
        n -= (size_t)k;
    }
    return 0;
}
