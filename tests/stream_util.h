/* Helpers for stream tests: the test thread as the ring's consumer, command
 * shorthands, and the ring's op sequence as a string to compare against. */
#ifndef MT_TEST_STREAM_UTIL_H
#define MT_TEST_STREAM_UTIL_H

#include <time.h>

#include "memtrack/device_sim.h"
#include "memtrack/stream.h"
#include "mt_test.h"

/* One letter per command: S(tate) F(ence) B(arrier) R(eset) N(op) U(ser). */
static inline char op_letter(uint32_t op)
{
    switch (op) {
    case MT_CMD_STATE: return 'S';
    case MT_CMD_FENCE: return 'F';
    case MT_CMD_BARRIER: return 'B';
    case MT_CMD_RESET: return 'R';
    case MT_CMD_NOP: return 'N';
    default: return op >= MT_CMD_USER ? 'U' : '?';
    }
}

/* The test thread consumes everything written and not yet taken (after
 * ringing the doorbell, as a device would need); the
 * letters go to `ops` (NUL-terminated), the commands to `out` (may be NULL).
 * *taken counts what was consumed so far, so this never blocks. */
static inline int take_all(mt_stream *s, uint64_t *taken, char *ops, mt_cmd *out, int max)
{
    mt_stream_stats st;
    MT_CHECK_OK(mt_stream_flush(s)); /* the doorbell: publishes what was written */
    mt_stream_stats_get(s, &st);
    int n = (int)(st.commands - *taken);
    MT_CHECK(n >= 0 && n < max);
    for (int got = 0; got < n;) {
        const mt_cmd *c;
        long k = mt_stream_consume(s, &c);
        MT_CHECK(k > 0);
        if (k > n - got)
            k = n - got;
        for (long i = 0; i < k; i++) {
            ops[got + i] = op_letter(c[i].op);
            if (out)
                out[got + i] = c[i];
        }
        mt_stream_consumed(s, (size_t)k);
        got += (int)k;
    }
    ops[n] = 0;
    *taken += (uint64_t)n;
    return n;
}

static inline mt_cmd user_cmd(uint32_t op)
{
    mt_cmd c = {.op = op};
    return c;
}

static inline void sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

#endif
