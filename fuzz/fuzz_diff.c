/* Fuzz target: diff, write-back and apply on arbitrary buffers. The input is
 * [gap byte][max byte][old | new]: the halves are the shadow and the live
 * content. Invariants, checked exactly: the runs are sorted and inside the
 * range, cover every changed byte, the shadow ends equal to the live
 * content, the write-back target got exactly the changed bytes, and applying
 * the runs to the old content gives the new one. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "memtrack/diff.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    size_t gap = data[0], max = 1 + data[1] % 16, n = (size - 2) / 2;
    const uint8_t *old = data + 2, *cur = data + 2 + n;
    uint8_t *shadow = malloc(n + 1), *wb = malloc(n + 1), *img = malloc(n + 1);
    mt_diff_region *runs = malloc((n + 1) * sizeof *runs);
    mt_diff_packet *pk = malloc((n + 1) * sizeof *pk);
    MT_FUZZ_CHECK(shadow && wb && img && runs && pk);
    memcpy(shadow, old, n);
    memcpy(img, old, n);
    for (size_t i = 0; i < n; i++)
        wb[i] = (uint8_t)~old[i]; /* every unchanged byte must keep this */
    mt_diff_job job = {.live = cur, .shadow = shadow, .size = n, .writeback = wb};
    mt_diff_opts o = {.merge_gap = gap};
    size_t total = 0;
    while (job.cursor < n) {
        long k = mt_diff(&job, &o, runs + total, max);
        MT_FUZZ_CHECK(k >= 0 && (size_t)k <= max);
        total += (size_t)k;
        MT_FUZZ_CHECK(total <= n);
    }
    for (size_t i = 0; i < total; i++) {
        MT_FUZZ_CHECK(runs[i].length > 0 && runs[i].offset + runs[i].length <= n);
        MT_FUZZ_CHECK(i == 0 || runs[i].offset >= runs[i - 1].offset + runs[i - 1].length);
        pk[i] = (mt_diff_packet){runs[i].offset, runs[i].length, shadow + runs[i].offset};
    }
    MT_FUZZ_CHECK(n == 0 || memcmp(shadow, cur, n) == 0);
    for (size_t i = 0; i < n; i++)
        MT_FUZZ_CHECK(wb[i] == (old[i] != cur[i] ? cur[i] : (uint8_t)~old[i]));
    MT_FUZZ_CHECK(mt_diff_apply(img, n, pk, total) == 0);
    MT_FUZZ_CHECK(n == 0 || memcmp(img, cur, n) == 0);
    free(shadow);
    free(wb);
    free(img);
    free(runs);
    free(pk);
    return 0;
}
