/* The libFuzzer entry point every target defines. The same sources are
 * linked with libFuzzer (fuzz/CMakeLists.txt, clang, -DMT_FUZZ=ON) and with
 * replay_main.c into a CTest test that replays the committed corpus. */
#ifndef MT_FUZZ_H
#define MT_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A broken invariant: report and abort, so both libFuzzer and CTest see it. */
void mt_fuzz_fail(const char *what);

#define MT_FUZZ_CHECK(cond)                                                                        \
    do {                                                                                           \
        if (!(cond))                                                                               \
            mt_fuzz_fail(#cond);                                                                   \
    } while (0)

#endif
