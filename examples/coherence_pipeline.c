/* A three-stage pipeline over three devices, with memtrack coherence doing
 * the memory management a runtime would otherwise write by hand.
 *
 *   host memory ──► "cpu" (host device): square the input
 *               ──► "sim" (simulated accelerator): copy into the output
 *               ──► "cpu2" (host device): sum the output
 *
 * No stage says where data lives. Each command names its buffer arguments
 * (range, read/write); memtrack decides at enqueue time what must be copied
 * where, and the copies run on hidden per-device queues before the
 * command. The input is a tracked host buffer: the host writes it directly,
 * and the next run copies only the pages it wrote.
 *
 * Build: part of `make` (build/bin/mt-coherence-pipeline). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "memtrack/coherence.h"
#include "memtrack/stream.h"

#define N (1u << 20) /* uint32 elements: 4 MiB per buffer */

/* Stage 1, on a host device: addresses are host pointers. */
static int square(void *user, const mt_coh_exec *ex)
{
    (void)user;
    const uint32_t *in = (const uint32_t *)(uintptr_t)ex->addr[0];
    uint32_t *out = (uint32_t *)(uintptr_t)ex->addr[1];
    for (size_t i = 0; i < ex->size[0] / 4; i++)
        out[i] = in[i] * in[i];
    return 0;
}

/* Stage 2, on the simulated device: write device commands to its stream. */
static int copy_on_sim(void *user, const mt_coh_exec *ex)
{
    (void)user;
    mt_stream *s = ex->native;
    mt_stream_set_state(s, MT_SIM_REG_SRC, ex->addr[0]);
    mt_stream_set_state(s, MT_SIM_REG_DST, ex->addr[1]);
    mt_stream_set_state(s, MT_SIM_REG_LEN, ex->size[0]);
    mt_cmd copy = {.op = MT_SIM_COPY};
    return mt_stream_emit(s, &copy, NULL);
}

/* Stage 3, on another host device: a reduction into an 8-byte result. */
static int sum(void *user, const mt_coh_exec *ex)
{
    (void)user;
    const uint32_t *v = (const uint32_t *)(uintptr_t)ex->addr[0];
    uint64_t total = 0;
    for (size_t i = 0; i < ex->size[0] / 4; i++)
        total += v[i];
    memcpy((void *)(uintptr_t)ex->addr[1], &total, sizeof total);
    return 0;
}

#define CHECK(x)                                                                    \
    do {                                                                            \
        int rc_ = (x);                                                              \
        if (rc_) {                                                                  \
            fprintf(stderr, "%s: %s\n", #x, mt_strerror(rc_));                      \
            return 1;                                                               \
        }                                                                           \
    } while (0)

static int run_pipeline(mt_coh_queue *const q[3], const mt_coh_buf b[4], uint64_t *result)
{
    /* Each command waits for the previous one (they use each other's
     * output); memtrack adds the copies in between. */
    mt_coh_arg a1[2] = {{.buf = b[0], .size = 4 * N, .access = MT_COH_READ},
                        {.buf = b[1], .size = 4 * N, .access = MT_COH_WRITE}};
    mt_coh_arg a2[2] = {{.buf = b[1], .size = 4 * N, .access = MT_COH_READ},
                        {.buf = b[2], .size = 4 * N, .access = MT_COH_WRITE}};
    mt_coh_arg a3[2] = {{.buf = b[2], .size = 4 * N, .access = MT_COH_READ},
                        {.buf = b[3], .size = 8, .access = MT_COH_WRITE}};
    mt_coh_event *e1, *e2, *e3, *m;
    mt_coh_command c1 = {.fn = square, .args = a1, .nargs = 2};
    CHECK(mt_coh_enqueue(q[0], &c1, &e1));
    mt_coh_command c2 = {.fn = copy_on_sim, .args = a2, .nargs = 2, .wait = &e1, .nwait = 1};
    CHECK(mt_coh_enqueue(q[1], &c2, &e2));
    mt_coh_command c3 = {.fn = sum, .args = a3, .nargs = 2, .wait = &e2, .nwait = 1};
    CHECK(mt_coh_enqueue(q[2], &c3, &e3));
    /* Read the result on the host: a map after the last stage. */
    mt_coh_arg r = {.buf = b[3], .size = 8, .access = MT_COH_READ};
    void *p;
    CHECK(mt_coh_map(q[2], &r, &e3, 1, &p, &m));
    CHECK(mt_coh_event_wait(m, -1));
    memcpy(result, p, sizeof *result);
    CHECK(mt_coh_unmap(q[2], p, NULL));
    mt_coh_event_info info;
    const char *names[3] = {"square on cpu", "copy on sim", "sum on cpu2"};
    mt_coh_event *evs[3] = {e1, e2, e3};
    for (int i = 0; i < 3; i++) {
        mt_coh_event_info_get(evs[i], &info);
        printf("  %-14s copied in %8" PRIu64 " bytes (%u migrations, %" PRIu64 " via host)\n",
               names[i], info.bytes_in, info.migrations, info.bytes_relay);
        mt_coh_event_release(evs[i]);
    }
    mt_coh_event_release(m);
    return 0;
}

int main(void)
{
    mt_coh *c;
    uint32_t cpu, sim, cpu2;
    CHECK(mt_coh_create(NULL, &c));
    CHECK(mt_coh_add_host_device(c, 64u << 20, &cpu));
    CHECK(mt_coh_add_sim_device(c, &(mt_sim_opts){.mem_size = 64u << 20}, &sim));
    CHECK(mt_coh_add_host_device(c, 64u << 20, &cpu2));

    mt_coh_client *cl;
    mt_coh_queue *q[3];
    CHECK(mt_coh_client_create(c, &cl));
    CHECK(mt_coh_queue_create(cl, cpu, &q[0]));
    CHECK(mt_coh_queue_create(cl, sim, &q[1]));
    CHECK(mt_coh_queue_create(cl, cpu2, &q[2]));

    /* in: written by the host directly (tracked); sq, out, res: devices only. */
    mt_coh_buf b[4];
    mt_coh_buffer_opts tracked = {.flags = MT_COH_BUF_TRACK_HOST};
    CHECK(mt_coh_buffer_create(cl, 4 * N, &tracked, &b[0]));
    CHECK(mt_coh_buffer_create(cl, 4 * N, NULL, &b[1]));
    CHECK(mt_coh_buffer_create(cl, 4 * N, NULL, &b[2]));
    CHECK(mt_coh_buffer_create(cl, 8, NULL, &b[3]));
    mt_coh_buffer_info bi;
    CHECK(mt_coh_buffer_info_get(cl, b[0], &bi));
    uint32_t *in = bi.host;
    for (uint32_t i = 0; i < N; i++)
        in[i] = i % 1000;

    uint64_t result, want = 0;
    for (uint32_t i = 0; i < N; i++)
        want += (uint64_t)(i % 1000) * (i % 1000);
    puts("first run:");
    if (run_pipeline(q, b, &result))
        return 1;
    printf("  sum = %" PRIu64 " (expected %" PRIu64 ")\n", result, want);

    /* The host changes 10 elements, 4 KiB apart: one page each. */
    for (uint32_t i = 0; i < 10; i++) {
        want -= (uint64_t)in[i * 1024] * in[i * 1024];
        in[i * 1024] = 7;
        want += 49;
    }
    puts("after the host wrote 10 pages:");
    if (run_pipeline(q, b, &result))
        return 1;
    printf("  sum = %" PRIu64 " (expected %" PRIu64 ")\n", result, want);

    mt_coh_client_destroy(cl); /* buffers, queues: released once idle */
    mt_coh_destroy(c);
    return result == want ? 0 : 1;
}
