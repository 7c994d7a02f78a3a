/* mt_diff_apply(): the replay side. All packets are checked before any is
 * written, so a bad packet list leaves the image untouched. */
#include <errno.h>
#include <string.h>

#include "memtrack/diff.h"

int mt_diff_apply(void *base, size_t size, const mt_diff_packet *packets, size_t n)
{
    if ((!base && size) || (!packets && n))
        return -EINVAL;
    for (size_t i = 0; i < n; i++) {
        const mt_diff_packet *p = &packets[i];
        if (p->offset > size || p->length > size - p->offset || (!p->data && p->length))
            return -EINVAL;
    }
    for (size_t i = 0; i < n; i++)
        if (packets[i].length)
            memmove((unsigned char *)base + packets[i].offset, packets[i].data, packets[i].length);
    return 0;
}
