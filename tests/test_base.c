/* Base module: version macros agree with the library, mt_strerror covers
 * every code class. */
#include <errno.h>

#include "memtrack/memtrack.h"
#include "mt_test.h"

int main(void)
{
    MT_CHECK_INT_EQ(mt_version(), MT_VERSION);
    MT_CHECK_INT_EQ(MT_VERSION, MT_VERSION_MAJOR * 10000 + MT_VERSION_MINOR * 100 + MT_VERSION_PATCH);
    MT_CHECK(strcmp(mt_version_string(), MT_VERSION_STRING) == 0);

    MT_CHECK(strcmp(mt_strerror(0), "success") == 0);
    MT_CHECK(strcmp(mt_strerror(-ENOMEM), "Cannot allocate memory") == 0);
    MT_CHECK(strcmp(mt_strerror(-EINVAL), "Invalid argument") == 0);
    MT_CHECK(strcmp(mt_strerror(MT_ECHECKSUM), "checksum mismatch") == 0);
    /* Every own code has its own text, distinct from the fallback. */
    for (int c = MT_ECORRUPT; c >= MT_ERROR_LAST; c--) {
        MT_CHECK(mt_strerror(c) != NULL);
        MT_CHECK(strcmp(mt_strerror(c), "unknown error") != 0);
    }
    MT_CHECK(strcmp(mt_strerror(MT_ERROR_LAST - 1), "unknown error") == 0);
    MT_CHECK(strcmp(mt_strerror(-99999), "unknown error") == 0);
    MT_CHECK(mt_strerror(5) != NULL);
    puts("base: ok");
    return 0;
}
