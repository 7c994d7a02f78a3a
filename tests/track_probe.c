/* mt_track_probe uffd: prints 1 when the kernel offers the uffd backend
 * (uffd-wp async and PAGEMAP_SCAN), else 0. For test scripts that must skip,
 * not silently pass, what this kernel cannot do. */
#include <stdio.h>
#include <string.h>

#include "memtrack/track.h"

int main(int argc, char **argv)
{
    if (argc != 2 || strcmp(argv[1], "uffd") != 0) {
        fprintf(stderr, "usage: mt_track_probe uffd\n");
        return 2;
    }
    printf("%d\n", mt_track_backend_available(MT_TRACK_UFFD));
    return 0;
}
