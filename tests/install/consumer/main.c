#include <stdio.h>
#include <string.h>

#include <memtrack/memtrack.h>

int main(void)
{
    if (mt_version() != MT_VERSION) {
        fprintf(stderr, "header/library version mismatch\n");
        return 1;
    }
    mt_tracker *t = NULL;
    if (mt_tracker_create(NULL, &t) != 0)
        return 1;
    mt_tracker_destroy(t);
    printf("consumer: memtrack %s, %s\n", mt_version_string(), mt_strerror(MT_ECHECKSUM));
    return strcmp(mt_strerror(MT_ECHECKSUM), "checksum mismatch") != 0;
}
