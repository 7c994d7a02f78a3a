/* Scripted stream sequences, the test thread acting as the device: exact
 * ring contents and counts for state elision (and its invalidation by
 * reset), lazy barriers, the sync shortcut, fence values and their wrap
 * through a narrow counter, deferred work, progress reports, and option and
 * argument validation. */
#include <errno.h>

#include "stream/internal.h" /* white box: the ring's indices */
#include "stream_util.h"

#define CHECK_OPS(s, taken, expect)                                                 \
    do {                                                                            \
        char ops_[256];                                                             \
        take_all((s), (taken), ops_, NULL, 256);                                    \
        if (strcmp(ops_, (expect)) != 0) {                                          \
            fprintf(stderr, "ring held \"%s\", expected \"%s\"\n", ops_, (expect)); \
            MT_CHECK(0);                                                            \
        }                                                                           \
    } while (0)

static void elision(void)
{
    mt_stream *s;
    uint64_t taken = 0;
    MT_CHECK_OK(mt_stream_create(NULL, &s));
    MT_CHECK_INT_EQ(mt_stream_set_state(s, 0, 5), 1);
    MT_CHECK_INT_EQ(mt_stream_set_state(s, 0, 5), 0);
    MT_CHECK_INT_EQ(mt_stream_set_state(s, 1, 5), 1); /* other slot */
    MT_CHECK_INT_EQ(mt_stream_set_state(s, 0, 6), 1);
    MT_CHECK_INT_EQ(mt_stream_set_state(s, 0, 5), 1); /* back to an old value */
    MT_CHECK_INT_EQ(mt_stream_set_state(s, 1, 5), 0);
    MT_CHECK_INT_EQ(mt_stream_set_state(s, 15, 0), 1); /* 0 is a value like any */
    MT_CHECK_INT_EQ(mt_stream_set_state(s, 15, 0), 0);
    MT_CHECK_ERR(mt_stream_set_state(s, 16, 0), -EINVAL);
    mt_cmd out[16];
    char ops[16];
    take_all(s, &taken, ops, out, 16);
    MT_CHECK(strcmp(ops, "SSSSS") == 0);
    uint32_t slots[] = {0, 1, 0, 0, 15};
    uint64_t vals[] = {5, 5, 6, 5, 0};
    for (int i = 0; i < 5; i++) {
        MT_CHECK_UINT_EQ(out[i].arg, slots[i]);
        MT_CHECK_UINT_EQ(out[i].a, vals[i]);
    }
    /* Reset: the device forgets its state, so must the cache. */
    MT_CHECK_OK(mt_stream_reset(s));
    MT_CHECK_INT_EQ(mt_stream_set_state(s, 0, 5), 1);
    MT_CHECK_INT_EQ(mt_stream_set_state(s, 0, 5), 0);
    MT_CHECK_INT_EQ(mt_stream_set_state(s, 1, 5), 1);
    CHECK_OPS(s, &taken, "RSS");
    /* Fences, barriers and other commands leave the state cache alone. */
    MT_CHECK_OK(mt_stream_fence(s, NULL));
    MT_CHECK_OK(mt_stream_barrier(s));
    mt_cmd u = user_cmd(MT_CMD_USER);
    MT_CHECK_OK(mt_stream_emit(s, &u, NULL));
    MT_CHECK_INT_EQ(mt_stream_set_state(s, 0, 5), 0);
    CHECK_OPS(s, &taken, "FBU");
    mt_stream_stats st;
    mt_stream_stats_get(s, &st);
    MT_CHECK_UINT_EQ(st.state_written, 7);
    MT_CHECK_UINT_EQ(st.state_elided, 5);
    MT_CHECK_UINT_EQ(st.resets, 1);
    MT_CHECK_UINT_EQ(st.commands, 11);
    mt_stream_destroy(s);

    /* With elision off, every state command is written. */
    mt_stream_opts o = {.flags = MT_STREAM_NO_ELISION};
    MT_CHECK_OK(mt_stream_create(&o, &s));
    taken = 0;
    for (int i = 0; i < 4; i++)
        MT_CHECK_INT_EQ(mt_stream_set_state(s, 2, 9), 1);
    CHECK_OPS(s, &taken, "SSSS");
    mt_stream_destroy(s);
}

static int emit_rw(mt_stream *s, const uint32_t *r, uint32_t nr, const uint32_t *w, uint32_t nw)
{
    mt_cmd c = user_cmd(MT_CMD_USER + 1);
    mt_stream_access acc = {r, nr, w, nw};
    return mt_stream_emit(s, &c, &acc);
}

static void barriers(void)
{
    enum { A = 0, B = 1, C = 2 };
    mt_stream *s;
    uint64_t taken = 0;
    MT_CHECK_OK(mt_stream_create(NULL, &s));
    const uint32_t a[] = {A}, b[] = {B}, c[] = {C}, ca[] = {C, A}, big[] = {256};

    MT_CHECK_OK(emit_rw(s, NULL, 0, a, 1)); /* write A */
    MT_CHECK_OK(emit_rw(s, a, 1, b, 1));    /* read A (written): barrier first */
    MT_CHECK_OK(emit_rw(s, a, 1, NULL, 0)); /* read A again: already covered */
    MT_CHECK_OK(emit_rw(s, b, 1, NULL, 0)); /* read B, written after the barrier */
    CHECK_OPS(s, &taken, "UBUUBU");

    MT_CHECK_OK(emit_rw(s, NULL, 0, a, 1));  /* write A */
    MT_CHECK_OK(emit_rw(s, NULL, 0, c, 1));  /* write C */
    MT_CHECK_OK(emit_rw(s, ca, 2, NULL, 0)); /* two hazards, one barrier clears both */
    MT_CHECK_OK(emit_rw(s, a, 1, NULL, 0));
    MT_CHECK_OK(emit_rw(s, c, 1, NULL, 0));
    CHECK_OPS(s, &taken, "UUBUUU");

    MT_CHECK_OK(emit_rw(s, a, 1, a, 1)); /* read-modify-write A: A was not pending */
    MT_CHECK_OK(emit_rw(s, a, 1, a, 1)); /* now it is */
    MT_CHECK_OK(emit_rw(s, NULL, 0, b, 1));
    MT_CHECK_OK(mt_stream_barrier(s)); /* explicit barrier clears B */
    MT_CHECK_OK(emit_rw(s, b, 1, NULL, 0));
    MT_CHECK_OK(emit_rw(s, NULL, 0, c, 1));
    MT_CHECK_OK(mt_stream_reset(s)); /* reset clears C */
    MT_CHECK_OK(emit_rw(s, c, 1, NULL, 0));
    MT_CHECK_OK(emit_rw(s, NULL, 0, a, 1));
    MT_CHECK_OK(mt_stream_fence(s, NULL)); /* a fence is not a barrier */
    MT_CHECK_OK(emit_rw(s, a, 1, NULL, 0));
    CHECK_OPS(s, &taken, "UBUUBUURUUFBU");

    mt_stream_stats st;
    mt_stream_stats_get(s, &st);
    MT_CHECK_UINT_EQ(st.barriers, 6); /* 5 lazy + 1 explicit */
    MT_CHECK_UINT_EQ(st.emitted, 17);
    uint64_t before = st.commands;
    /* Invalid input writes nothing. */
    MT_CHECK_ERR(emit_rw(s, big, 1, NULL, 0), -EINVAL);
    MT_CHECK_ERR(emit_rw(s, a, 1, big, 1), -EINVAL);
    MT_CHECK_ERR(emit_rw(s, NULL, 1, NULL, 0), -EINVAL);
    mt_cmd res = {.op = MT_CMD_FENCE};
    MT_CHECK_ERR(mt_stream_emit(s, &res, NULL), -EINVAL);
    res.op = MT_CMD_USER - 1;
    MT_CHECK_ERR(mt_stream_emit(s, &res, NULL), -EINVAL);
    MT_CHECK_ERR(mt_stream_emit(s, NULL, NULL), -EINVAL);
    res.op = MT_CMD_NOP;
    MT_CHECK_OK(mt_stream_emit(s, &res, NULL));
    mt_stream_stats_get(s, &st);
    MT_CHECK_UINT_EQ(st.commands, before + 1);
    CHECK_OPS(s, &taken, "N");
    mt_stream_destroy(s);
}

static int g_deferred_runs;
static uint64_t g_deferred_value;
static void deferred(void *ctx, uint64_t value, int status)
{
    (void)ctx;
    MT_CHECK_INT_EQ(status, 0);
    g_deferred_runs++;
    g_deferred_value = value;
}

static void expect_cancelled(void *ctx, uint64_t value, int status)
{
    (void)value;
    MT_CHECK_ERR(status, MT_ECANCELED);
    ++*(int *)ctx;
}

/* Sync: skipped when synchronised; waits on an existing fence when nothing
 * followed it; otherwise writes one. The test signals as the device. */
static void sync_and_defer(void)
{
    mt_stream *s;
    uint64_t taken = 0, v;
    mt_cmd out[8];
    char ops[8];
    MT_CHECK_OK(mt_stream_create(NULL, &s));
    mt_timeline *tl = mt_stream_timeline(s);
    MT_CHECK_OK(mt_stream_sync(s, -1)); /* nothing written yet */

    MT_CHECK_OK(mt_stream_defer(s, deferred, NULL)); /* nothing in flight: value 0 */
    MT_CHECK_OK(mt_stream_sync(s, -1));              /* skipped, but runs it */
    MT_CHECK_INT_EQ(g_deferred_runs, 1);
    MT_CHECK_UINT_EQ(g_deferred_value, 0);

    mt_cmd u = user_cmd(MT_CMD_USER);
    MT_CHECK_OK(mt_stream_emit(s, &u, NULL));
    MT_CHECK_OK(mt_stream_defer(s, deferred, NULL)); /* covers the emit: value 1 */
    MT_CHECK_OK(mt_stream_fence(s, &v));
    MT_CHECK_UINT_EQ(v, 1);
    take_all(s, &taken, ops, out, 8);
    MT_CHECK(strcmp(ops, "UF") == 0);
    MT_CHECK_UINT_EQ(out[1].a, 1);
    MT_CHECK_INT_EQ(mt_timeline_poll(tl), 0); /* not completed */
    MT_CHECK_INT_EQ(g_deferred_runs, 1);
    MT_CHECK_OK(mt_timeline_signal_raw(tl, out[1].a));
    MT_CHECK_OK(mt_stream_sync(s, -1)); /* fence 1 covers everything: no new fence */
    MT_CHECK_INT_EQ(g_deferred_runs, 2);
    MT_CHECK_UINT_EQ(g_deferred_value, 1);
    MT_CHECK_OK(mt_stream_sync(s, -1)); /* skipped */

    MT_CHECK_OK(mt_stream_emit(s, &u, NULL));
    MT_CHECK_ERR(mt_stream_sync(s, 0), MT_ETIMEDOUT); /* writes fence 2, device idle */
    MT_CHECK_OK(mt_stream_defer(s, deferred, NULL));  /* fence 2 covers it: value 2 */
    MT_CHECK_ERR(mt_stream_sync(s, 1000), MT_ETIMEDOUT); /* waits on fence 2 again */
    take_all(s, &taken, ops, out, 8);
    MT_CHECK(strcmp(ops, "UF") == 0);
    MT_CHECK_OK(mt_timeline_signal_raw(tl, out[1].a));
    MT_CHECK_OK(mt_stream_sync(s, -1));
    MT_CHECK_INT_EQ(g_deferred_runs, 3);
    MT_CHECK_UINT_EQ(g_deferred_value, 2);

    mt_stream_stats st;
    mt_stream_stats_get(s, &st);
    MT_CHECK_UINT_EQ(st.fences, 2);
    MT_CHECK_UINT_EQ(st.syncs, 2);
    MT_CHECK_UINT_EQ(st.syncs_skipped, 3);
    MT_CHECK_OK(mt_stream_flush(s));

    /* Deferred work still queued at destroy runs with MT_ECANCELED. */
    int cancelled = 0;
    MT_CHECK_OK(mt_stream_emit(s, &u, NULL));
    MT_CHECK_OK(mt_stream_defer(s, expect_cancelled, &cancelled));
    MT_CHECK_INT_EQ((int)mt_timeline_pending(tl), 1);
    MT_CHECK_ERR(mt_stream_defer(s, NULL, NULL), -EINVAL);
    mt_stream_destroy(s);
    MT_CHECK_INT_EQ(cancelled, 1);
}

/* Fence values through a 4-bit counter and a 4-slot ring: the commands
 * carry v mod 16, the timeline gets v back, across many wraps. */
static void fence_wrap(void)
{
    mt_stream *s;
    mt_stream_opts o = {.slots = 4, .fence_bits = 4};
    uint64_t taken = 0;
    MT_CHECK_OK(mt_stream_create(&o, &s));
    mt_timeline *tl = mt_stream_timeline(s);
    for (uint64_t i = 1; i <= 200; i++) {
        uint64_t v;
        mt_cmd out[4];
        char ops[4];
        MT_CHECK_OK(mt_stream_fence(s, &v));
        MT_CHECK_UINT_EQ(v, i);
        if (i % 3 == 0) { /* sometimes two fences in flight before the device runs */
            MT_CHECK_OK(mt_stream_fence(s, &v));
            MT_CHECK_UINT_EQ(v, ++i);
        }
        int n = take_all(s, &taken, ops, out, 4);
        for (int k = 0; k < n; k++) {
            MT_CHECK_UINT_EQ(out[k].a, (i - (uint64_t)(n - 1 - k)) % 16);
            MT_CHECK_OK(mt_timeline_signal_raw(tl, out[k].a));
        }
        MT_CHECK_UINT_EQ(mt_timeline_completed(tl), i);
    }
    int cancelled = 0;
    mt_cmd u = user_cmd(MT_CMD_USER);
    MT_CHECK_OK(mt_stream_emit(s, &u, NULL));
    MT_CHECK_OK(mt_stream_defer(s, expect_cancelled, &cancelled));
    mt_stream_destroy(s);
    MT_CHECK_INT_EQ(cancelled, 1);
}

/* Free slots as the producer can know them (white box: the ring's indices). */
static int s_head_room(mt_stream *s)
{
    return (int)(s->ring.cap - (s->ring.head - atomic_load(&s->ring.cons)));
}

/* Progress is published when the consumer crosses a ping boundary (and when
 * it runs dry), and consume never hands out commands past the boundary. */
static void progress(void)
{
    mt_stream *s;
    mt_stream_opts o = {.slots = 16, .ping_interval = 4};
    MT_CHECK_OK(mt_stream_create(&o, &s));
    mt_cmd u = user_cmd(MT_CMD_USER);
    for (int i = 0; i < 10; i++)
        MT_CHECK_OK(mt_stream_emit(s, &u, NULL));
    MT_CHECK_OK(mt_stream_flush(s));
    const mt_cmd *c;
    mt_stream_stats st;
    MT_CHECK_INT_EQ(mt_stream_consume(s, &c), 4);
    mt_stream_consumed(s, 3);
    mt_stream_stats_get(s, &st);
    MT_CHECK_UINT_EQ(st.progress_reports, 0);
    MT_CHECK_INT_EQ(mt_stream_consume(s, &c), 1); /* up to the boundary at 4 */
    mt_stream_consumed(s, 1);
    mt_stream_stats_get(s, &st);
    MT_CHECK_UINT_EQ(st.progress_reports, 1);
    MT_CHECK_INT_EQ(mt_stream_consume(s, &c), 4);
    mt_stream_consumed(s, 4);
    MT_CHECK_INT_EQ(mt_stream_consume(s, &c), 2);
    mt_stream_consumed(s, 2);
    mt_stream_stats_get(s, &st);
    MT_CHECK_UINT_EQ(st.progress_reports, 2);
    /* Progress was last published at 8 (10 is inside a ping block and the
     * consumer has not run dry), so the producer sees 14 free slots, not 16. */
    for (int i = 0; i < 14; i++)
        MT_CHECK_OK(mt_stream_emit(s, &u, NULL));
    MT_CHECK_OK(mt_stream_flush(s));
    MT_CHECK_INT_EQ(s_head_room(s), 0);
    MT_CHECK_INT_EQ(mt_stream_consume(s, &c), 2); /* 10 -> 12 (ping boundary) */
    mt_stream_consumed(s, 2);
    MT_CHECK_INT_EQ(s_head_room(s), 4); /* published at 12: 4 more free */
    MT_CHECK_INT_EQ(mt_stream_consume(s, &c), 4); /* 12 -> 16 (ring end) */
    mt_stream_consumed(s, 4);
    MT_CHECK_INT_EQ(mt_stream_consume(s, &c), 4); /* wrapped to slot 0 */
    mt_stream_consumed(s, 4);
    MT_CHECK_INT_EQ(mt_stream_consume(s, &c), 4);
    mt_stream_consumed(s, 4);
    /* Woken without work: consume returns 0 (instead of sleeping). */
    mt_stream_wake_consumer(s);
    MT_CHECK_INT_EQ(mt_stream_consume(s, &c), 0);
    mt_stream_destroy(s);
}

static void options(void)
{
    mt_stream *s;
    mt_stream_opts o;
#define BAD(...)                                                    \
    do {                                                            \
        o = (mt_stream_opts){__VA_ARGS__};                          \
        MT_CHECK_ERR(mt_stream_create(&o, &s), -EINVAL);            \
    } while (0)
#define GOOD(...)                                                   \
    do {                                                            \
        o = (mt_stream_opts){__VA_ARGS__};                          \
        MT_CHECK_OK(mt_stream_create(&o, &s));                      \
        mt_stream_destroy(s);                                       \
    } while (0)
    BAD(.slots = 6);
    BAD(.slots = 2);
    BAD(.slots = 8, .ping_interval = 16);
    BAD(.slots = 8, .ping_interval = 3);
    BAD(.state_slots = 65);
    BAD(.fence_bits = 65);
    BAD(.slots = 4, .fence_bits = 3);   /* 4 fences in flight, 2^(3-1) = 4: too many */
    GOOD(.slots = 4, .fence_bits = 4);  /* 4 < 8 */
    BAD(.slots = 512, .fence_bits = 10);
    GOOD(.slots = 512, .fence_bits = 11);
    GOOD(.slots = 512, .fence_bits = 26);
    GOOD(.slots = 8, .ping_interval = 8, .state_slots = 64);
    MT_CHECK_ERR(mt_stream_create(NULL, NULL), -EINVAL);
    mt_stream_destroy(NULL);
#undef BAD
#undef GOOD
}

int main(void)
{
    elision();
    barriers();
    sync_and_defer();
    fence_wrap();
    progress();
    options();
    puts("stream script: ok");
    return 0;
}
