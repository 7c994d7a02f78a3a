/* coherence: shared virtual memory.
 *  - Fine-grained: host and host-memory devices use the memory in place
 *    (no copy, no map), a buffer made on the pointer is a view of it, and a
 *    device that cannot use host memory refuses it at enqueue.
 *  - Coarse-grained: one pointer, content kept coherent like a buffer; the
 *    host reaches it by map/unmap; commands name it by pointer.
 *  - A buffer created with USE_HOST_PTR on a coarse-grained SVM pointer (the
 *    case PoCL gets wrong): it shares the allocation's content and
 *    validity. A device write through the SVM pointer is seen through the
 *    buffer without any map, and the stale host memory behind the pointer is
 *    never used as the source. */
#include <errno.h>
#include <stdatomic.h>

#include "coh_util.h"
#include "memtrack/coherence.h"
#include "mt_test.h"

static mt_coh *c;
static mt_coh_client *cl;
static uint32_t host, sim;
static mt_coh_queue *qh, *qs;

static mt_coh_event *cmd1(mt_coh_queue *q, tk_cmd *k, mt_coh_arg a)
{
    k->nargs = 1;
    k->access[0] = a.access;
    mt_coh_command cmd = {.fn = tk_run, .user = k, .args = &a, .nargs = 1};
    mt_coh_event *ev;
    MT_CHECK_OK(mt_coh_enqueue(q, &cmd, &ev));
    MT_CHECK_OK(mt_coh_event_wait(ev, -1));
    return ev;
}

static uint64_t bytes_in(mt_coh_event *ev)
{
    mt_coh_event_info info;
    MT_CHECK_OK(mt_coh_event_info_get(ev, &info));
    mt_coh_event_release(ev);
    return info.bytes_in;
}

static void test_fine(void)
{
    enum { N = 16384 };
    uint8_t *p;
    MT_CHECK_OK(mt_coh_svm_alloc(cl, N, MT_COH_SVM_FINE, (void **)&p));
    for (int i = 0; i < N; i++)
        p[i] = (uint8_t)i;
    uint8_t ref[N];
    memcpy(ref, p, N);
    /* Read in place: nothing copied. */
    tk_cmd k = {0};
    MT_CHECK_UINT_EQ(bytes_in(cmd1(qh, &k, (mt_coh_arg){.svm = p + 100, .size = 1000,
                                                        .access = MT_COH_READ})), 0);
    MT_CHECK_UINT_EQ(k.seen[0], tk_hash(ref + 100, 1000));
    /* A device write is visible to the host at once after the event. */
    tk_cmd w = {.pattern = {0x7766554433221100ull}};
    MT_CHECK_UINT_EQ(bytes_in(cmd1(qh, &w, (mt_coh_arg){.svm = p, .offset = 4096, .size = 4096,
                                                        .access = MT_COH_WRITE})), 0);
    tk_fill(ref + 4096, 4096, 0x7766554433221100ull);
    MT_CHECK_MEM_EQ(p, ref, N);
    /* A buffer on the pointer: a view of the same memory. */
    mt_coh_buf b;
    mt_coh_buffer_opts o = {.flags = MT_COH_BUF_USE_HOST_PTR, .host_ptr = p + 4096};
    MT_CHECK_OK(mt_coh_buffer_create(cl, 8192, &o, &b));
    tk_cmd r = {0};
    MT_CHECK_UINT_EQ(bytes_in(cmd1(qh, &r, (mt_coh_arg){.buf = b, .size = 8192, .access = MT_COH_READ})), 0);
    MT_CHECK_UINT_EQ(r.seen[0], tk_hash(ref + 4096, 8192));
    /* Maps are the pointer itself. */
    void *m;
    mt_coh_event *ev;
    MT_CHECK_OK(mt_coh_map(qh, &(mt_coh_arg){.svm = p + 10, .size = 10, .access = MT_COH_RW}, NULL, 0,
                           &m, &ev));
    MT_CHECK_OK(mt_coh_event_wait(ev, -1));
    MT_CHECK(m == p + 10);
    mt_coh_event_release(ev);
    MT_CHECK_OK(mt_coh_unmap(qh, m, NULL));
    /* The simulated device has its own memory: it cannot use this. */
    tk_cmd x = {0};
    mt_coh_arg xa = {.buf = b, .size = 16, .access = MT_COH_READ};
    mt_coh_command cmd = {.fn = tk_run, .user = &x, .args = &xa, .nargs = 1};
    x.nargs = 1;
    x.access[0] = MT_COH_READ;
    MT_CHECK_ERR(mt_coh_enqueue(qs, &cmd, NULL), -EOPNOTSUPP);
    /* Freed while the view lives: the memory stays until the view goes. */
    MT_CHECK_OK(mt_coh_svm_free(cl, p));
    tk_cmd r2 = {0};
    MT_CHECK_UINT_EQ(bytes_in(cmd1(qh, &r2, (mt_coh_arg){.buf = b, .size = 8192, .access = MT_COH_READ})), 0);
    MT_CHECK_UINT_EQ(r2.seen[0], tk_hash(ref + 4096, 8192));
    MT_CHECK_ERR(mt_coh_svm_free(cl, p), MT_ENOBUF);
    MT_CHECK_OK(mt_coh_buffer_free(cl, b));
    puts("fine-grained: ok");
}

static void test_coarse(void)
{
    enum { N = 65536 };
    uint8_t *p;
    MT_CHECK_OK(mt_coh_svm_alloc(cl, N, MT_COH_SVM_COARSE, (void **)&p));
    uint8_t ref[N];
    /* The host writes through a map. */
    void *m;
    mt_coh_event *ev;
    MT_CHECK_OK(mt_coh_map(qh, &(mt_coh_arg){.svm = p, .size = N, .access = MT_COH_WRITE}, NULL, 0,
                           &m, &ev));
    MT_CHECK_OK(mt_coh_event_wait(ev, -1));
    mt_coh_event_release(ev);
    MT_CHECK(m == p);
    for (int i = 0; i < N; i++)
        p[i] = ref[i] = (uint8_t)(i * 3);
    MT_CHECK_OK(mt_coh_unmap(qh, m, NULL));
    /* The simulated device reads it by pointer: a real copy. */
    tk_cmd k = {0};
    MT_CHECK_UINT_EQ(bytes_in(cmd1(qs, &k, (mt_coh_arg){.svm = p, .size = N, .access = MT_COH_READ})), N);
    MT_CHECK_UINT_EQ(k.seen[0], tk_hash(ref, N));
    /* ... and writes part of it through the pointer. */
    tk_cmd w = {.pattern = {0xfeedfacecafebeefull}};
    mt_coh_event_release(
        cmd1(qs, &w, (mt_coh_arg){.svm = p + 8192, .size = 16384, .access = MT_COH_WRITE}));
    uint8_t stale[16384];
    memcpy(stale, ref + 8192, sizeof stale);
    tk_fill(ref + 8192, 16384, 0xfeedfacecafebeefull);
    /* The host memory behind the pointer still holds the old bytes: it is
     * not where the content is until a map brings it. */
    MT_CHECK_MEM_EQ(p + 8192, stale, sizeof stale);

    /* The seed's case: a buffer made with USE_HOST_PTR on the pointer. */
    mt_coh_buf b;
    mt_coh_buffer_opts o = {.flags = MT_COH_BUF_USE_HOST_PTR, .host_ptr = p + 4096};
    MT_CHECK_OK(mt_coh_buffer_create(cl, 32768, &o, &b));
    /* One reaching past the allocation's end is neither a view of it nor
     * plain host memory (its first bytes would have two contents). */
    mt_coh_buf past;
    o.host_ptr = p + N - 4096;
    MT_CHECK_ERR(mt_coh_buffer_create(cl, 8192, &o, &past), -EINVAL);
    o.host_ptr = p - 4096;
    MT_CHECK_ERR(mt_coh_buffer_create(cl, 8192, &o, &past), -EINVAL);
    mt_coh_buffer_info bi;
    MT_CHECK_OK(mt_coh_buffer_info_get(cl, b, &bi));
    MT_CHECK_UINT_EQ(bi.offset, 4096);
    MT_CHECK(!(bi.valid_mask & 1)); /* host memory is not valid over the written part */
    /* The host device reads through the buffer: it gets the simulated
     * device's write (from the device, not the stale pointer memory). */
    tk_cmd r = {0};
    mt_coh_stats st0, st1;
    MT_CHECK_OK(mt_coh_stats_get(c, &st0));
    mt_coh_event_release(
        cmd1(qh, &r, (mt_coh_arg){.buf = b, .size = 32768, .access = MT_COH_READ}));
    MT_CHECK_UINT_EQ(r.seen[0], tk_hash(ref + 4096, 32768));
    MT_CHECK_OK(mt_coh_stats_get(c, &st1));
    MT_CHECK_UINT_EQ(st1.bytes_d2h - st0.bytes_d2h, 16384); /* the written part, from the device */
    /* A write through the buffer is seen through the SVM pointer. */
    tk_cmd w2 = {.pattern = {0x0102030405060708ull}};
    mt_coh_event_release(
        cmd1(qh, &w2, (mt_coh_arg){.buf = b, .offset = 0, .size = 4096, .access = MT_COH_WRITE}));
    tk_fill(ref + 4096, 4096, 0x0102030405060708ull);
    tk_cmd r2 = {0};
    mt_coh_event_release(
        cmd1(qs, &r2, (mt_coh_arg){.svm = p, .size = N, .access = MT_COH_READ}));
    MT_CHECK_UINT_EQ(r2.seen[0], tk_hash(ref, N));
    /* A map of the pointer brings everything to the host memory. */
    MT_CHECK_OK(mt_coh_map(qh, &(mt_coh_arg){.svm = p, .size = N, .access = MT_COH_READ}, NULL, 0,
                           &m, &ev));
    MT_CHECK_OK(mt_coh_event_wait(ev, -1));
    mt_coh_event_release(ev);
    MT_CHECK_MEM_EQ(p, ref, N);
    MT_CHECK_OK(mt_coh_unmap(qh, m, NULL));
    /* Copying from an SVM pointer is refused (it would read host memory
     * that may be stale); USE_HOST_PTR is the way. */
    mt_coh_buf x;
    o = (mt_coh_buffer_opts){.flags = MT_COH_BUF_COPY_HOST_PTR, .host_ptr = p};
    MT_CHECK_ERR(mt_coh_buffer_create(cl, 16, &o, &x), -EINVAL);
    /* The allocation freed: the buffer keeps the content. */
    MT_CHECK_OK(mt_coh_svm_free(cl, p));
    tk_cmd r3 = {0};
    mt_coh_event_release(
        cmd1(qs, &r3, (mt_coh_arg){.buf = b, .size = 32768, .access = MT_COH_READ}));
    MT_CHECK_UINT_EQ(r3.seen[0], tk_hash(ref + 4096, 32768));
    tk_cmd bad = {0};
    mt_coh_arg ba = {.svm = p, .size = 16, .access = MT_COH_READ};
    mt_coh_command cmd = {.fn = tk_run, .user = &bad, .args = &ba, .nargs = 1};
    MT_CHECK_ERR(mt_coh_enqueue(qs, &cmd, NULL), MT_ENOBUF);
    MT_CHECK_OK(mt_coh_buffer_free(cl, b));
    puts("coarse-grained: ok");
}

int main(void)
{
    MT_CHECK_OK(mt_coh_create(NULL, &c));
    MT_CHECK_OK(mt_coh_add_host_device(c, 4u << 20, &host));
    MT_CHECK_OK(mt_coh_add_sim_device(c, NULL, &sim));
    MT_CHECK_OK(mt_coh_client_create(c, &cl));
    MT_CHECK_OK(mt_coh_queue_create(cl, host, &qh));
    MT_CHECK_OK(mt_coh_queue_create(cl, sim, &qs));
    test_fine();
    test_coarse();
    mt_coh_client_destroy(cl);
    mt_coh_destroy(c);
    return 0;
}
