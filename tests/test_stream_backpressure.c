/* Back-pressure and wakeup batching. The device stalls until the producer
 * is asleep on the full ring (so back-pressure is certain), then runs
 * slowly. The consumer reports progress only at ping_interval boundaries
 * (and when it runs dry), so the producer's wake-ups are bounded by
 * commands/ping_interval plus one per full drain, whatever the timing:
 *     producer_wakeups <= progress_reports
 *     progress_reports <= commands/ping + commands/(slots - ping) + 2
 * The same run with a ping every command prints the contrast. Polling
 * before sleeping is off (MT_STREAM_NO_SPIN): it would hide sleeps behind a
 * slow device, and this test is about what happens when a side does sleep. */
#include <pthread.h>
#include <stdatomic.h>

#include "stream/internal.h"
#include "stream_util.h"

typedef struct unstaller {
    mt_stream *s;
    mt_sim *sim;
} unstaller;

static void *unstall_when_blocked(void *arg)
{
    unstaller *u = arg;
    int n = 0;
    /* White box: the producer's "I sleep on a full ring" flag. */
    while (!atomic_load(&u->s->ring.prod_waiting)) {
        MT_CHECK(++n < 600000);
        sleep_us(100);
    }
    mt_sim_unstall(u->sim);
    return NULL;
}

static void run(uint32_t slots, uint32_t ping, int n, int check)
{
    mt_sim *sim;
    mt_stream *s;
    mt_sim_opts o = {.faults = {.stall_at = 1, .delay_every = 2, .delay_ns = 1000}};
    mt_stream_opts so = {.slots = slots, .ping_interval = ping, .flags = MT_STREAM_NO_SPIN};
    MT_CHECK_OK(mt_sim_create(&o, &sim));
    MT_CHECK_OK(mt_stream_create(&so, &s));
    MT_CHECK_OK(mt_sim_attach(sim, s));
    unstaller u = {s, sim};
    pthread_t t;
    MT_CHECK_INT_EQ(pthread_create(&t, NULL, unstall_when_blocked, &u), 0);
    mt_cmd nop = {.op = MT_CMD_NOP};
    for (int i = 0; i < n; i++)
        MT_CHECK_OK(mt_stream_emit(s, &nop, NULL));
    MT_CHECK_OK(mt_stream_sync(s, -1));
    pthread_join(t, NULL);
    mt_stream_stats st;
    mt_stream_stats_get(s, &st);
    mt_sim_destroy(sim);
    printf("slots %u, ping %u: %ju commands, producer slept %ju, woken %ju (%.2f per 1000), "
           "%ju progress reports, consumer slept %ju, doorbells %ju\n",
           slots, ping, (uintmax_t)st.commands, (uintmax_t)st.producer_sleeps,
           (uintmax_t)st.producer_wakeups, 1000.0 * (double)st.producer_wakeups / (double)st.commands,
           (uintmax_t)st.progress_reports, (uintmax_t)st.consumer_sleeps,
           (uintmax_t)st.consumer_wakeups);
    MT_CHECK_UINT_EQ(st.commands, (uint64_t)n + 1); /* + the sync's fence */
    MT_CHECK(st.producer_sleeps >= 1);
    MT_CHECK(st.producer_wakeups >= 1);
    if (check) {
        MT_CHECK(st.producer_wakeups <= st.progress_reports);
        MT_CHECK(st.progress_reports <= st.commands / ping + st.commands / (slots - ping) + 2);
    }
    mt_stream_destroy(s);
}

int main(void)
{
    run(512, 128, 6000, 1);
    run(64, 16, 3000, 1);
    run(64, 1, 1500, 0); /* for contrast: a report (and wake-up) per command */
    puts("stream backpressure: ok");
    return 0;
}
