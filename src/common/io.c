/* Complete positional writes (see io.h). */
#include "io.h"

#include <errno.h>
#include <sys/types.h>
#include <unistd.h>

int mti_pwrite_all(int fd, const void *p, size_t n, uint64_t off)
{
    const uint8_t *q = p;
    while (n > 0) {
        ssize_t k = pwrite(fd, q, n, (off_t)off);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (k == 0)
            return -EIO;
        q += k;
        n -= (size_t)k;
        off += (uint64_t)k;
    }
    return 0;
}
