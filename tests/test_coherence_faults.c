/* coherence: validation and faults.
 *  - Bad enqueues (handles freed, invalid or another client's, ranges,
 *    access, maps, wait lists, SVM) return their error and reach no device:
 *    the kernel never runs, nothing is copied or allocated.
 *  - A stalled simulated device: its commands wait, the rest goes on, a
 *    buffer freed meanwhile keeps its memory until the device moves again.
 *  - Device loss: pending commands and their dependents fail with
 *    MT_EDEVLOST, later enqueues on it too, content valid elsewhere
 *    survives, content only it held is lost (MT_ELOSTDATA) until
 *    overwritten, its memory is released.
 *  - A failing command: its event and its dependents fail, what it was to
 *    write is lost.
 *  - Closing a client with work in flight; destroying a context with a
 *    stalled device (pending events fail with MT_ECANCELED).
 *  - A forked child (fork, and _Fork, which runs no atfork handler): every
 *    call on the parent's context returns MT_EFORKED, a wait on a command
 *    pending at the fork too, instead of hanging, and the destroy calls do
 *    nothing (they crashed joining threads that exist only in the parent);
 *    the parent goes on unaffected. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>

#include "coh_util.h"
#include "memtrack/coherence.h"
#include "mt_test.h"

static int run(mt_coh_queue *q, tk_cmd *k, const mt_coh_arg *a, uint32_t n, mt_coh_event **ev)
{
    k->nargs = n;
    for (uint32_t i = 0; i < n; i++)
        k->access[i] = a[i].access;
    mt_coh_command cmd = {.fn = tk_run, .user = k, .args = a, .nargs = n};
    return mt_coh_enqueue(q, &cmd, ev);
}

static void test_validation(void)
{
    mt_coh *c;
    MT_CHECK_OK(mt_coh_create(NULL, &c));
    uint32_t h, s;
    MT_CHECK_OK(mt_coh_add_host_device(c, 1u << 20, &h));
    MT_CHECK_OK(mt_coh_add_sim_device(c, NULL, &s));
    mt_coh_client *cl, *other;
    MT_CHECK_OK(mt_coh_client_create(c, &cl));
    MT_CHECK_OK(mt_coh_client_create(c, &other));
    mt_coh_queue *q, *qs;
    MT_CHECK_OK(mt_coh_queue_create(cl, h, &q));
    MT_CHECK_OK(mt_coh_queue_create(cl, s, &qs));
    mt_coh_queue *bad;
    MT_CHECK_ERR(mt_coh_queue_create(cl, 7, &bad), -ENOENT);
    mt_coh_buf b, ro, wo, theirs, freed;
    MT_CHECK_OK(mt_coh_buffer_create(cl, 8192, NULL, &b));
    mt_coh_buffer_opts o = {.flags = MT_COH_BUF_READ_ONLY};
    MT_CHECK_OK(mt_coh_buffer_create(cl, 8192, &o, &ro));
    o.flags = MT_COH_BUF_WRITE_ONLY;
    MT_CHECK_OK(mt_coh_buffer_create(cl, 8192, &o, &wo));
    MT_CHECK_OK(mt_coh_buffer_create(other, 8192, NULL, &theirs));
    MT_CHECK_OK(mt_coh_buffer_create(cl, 8192, NULL, &freed));
    MT_CHECK_OK(mt_coh_buffer_free(cl, freed));
    /* Creation refuses nonsense too. */
    mt_coh_buf x;
    MT_CHECK_ERR(mt_coh_buffer_create(cl, 0, NULL, &x), -EINVAL);
    o = (mt_coh_buffer_opts){.flags = MT_COH_BUF_READ_ONLY | MT_COH_BUF_WRITE_ONLY};
    MT_CHECK_ERR(mt_coh_buffer_create(cl, 16, &o, &x), -EINVAL);
    o = (mt_coh_buffer_opts){.flags = MT_COH_BUF_USE_HOST_PTR};
    MT_CHECK_ERR(mt_coh_buffer_create(cl, 16, &o, &x), -EINVAL);
    char unaligned[64];
    o = (mt_coh_buffer_opts){.flags = MT_COH_BUF_USE_HOST_PTR | MT_COH_BUF_TRACK_HOST,
                             .host_ptr = unaligned + 1};
    MT_CHECK_ERR(mt_coh_buffer_create(cl, 16, &o, &x), -EINVAL);

    struct {
        mt_coh_arg a;
        int want;
    } cases[] = {
        {{.buf = 0, .size = 16, .access = MT_COH_READ}, MT_ENOBUF},
        {{.buf = 0x123456789ull, .size = 16, .access = MT_COH_READ}, MT_ENOBUF},
        {{.buf = freed, .size = 16, .access = MT_COH_READ}, MT_ENOBUF},
        {{.buf = theirs, .size = 16, .access = MT_COH_READ}, MT_ENOBUF},
        {{.buf = b, .offset = 8192, .size = 1, .access = MT_COH_READ}, -ERANGE},
        {{.buf = b, .offset = 1, .size = UINT64_MAX, .access = MT_COH_READ}, -ERANGE},
        {{.buf = b, .offset = UINT64_MAX, .size = 2, .access = MT_COH_READ}, -ERANGE},
        {{.buf = b, .size = 0, .access = MT_COH_READ}, -EINVAL},
        {{.buf = b, .size = 16, .access = 0}, -EINVAL},
        {{.buf = b, .size = 16, .access = 8}, -EINVAL},
        {{.buf = ro, .size = 16, .access = MT_COH_WRITE}, -EACCES},
        {{.buf = wo, .size = 16, .access = MT_COH_READ}, -EACCES},
        {{.svm = (void *)0x1000, .size = 16, .access = MT_COH_READ}, MT_ENOBUF},
    };
    mt_coh_stats st0, st1;
    MT_CHECK_OK(mt_coh_stats_get(c, &st0));
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tk_cmd k = {0};
        /* A good argument first: the bad one must undo it. */
        mt_coh_arg two[2] = {{.buf = b, .size = 8192, .access = MT_COH_RW}, cases[i].a};
        mt_coh_event *ev = NULL;
        MT_CHECK_ERR(run(qs, &k, two, 2, &ev), cases[i].want);
        MT_CHECK(ev == NULL);
        MT_CHECK(!atomic_load(&k.ran));
    }
    /* Too many arguments; a NULL wait event. */
    tk_cmd k = {0};
    mt_coh_arg many[MT_COH_MAX_ARGS + 1];
    for (uint32_t i = 0; i <= MT_COH_MAX_ARGS; i++)
        many[i] = (mt_coh_arg){.buf = b, .size = 16, .access = MT_COH_READ};
    mt_coh_command cmd = {.fn = tk_run, .user = &k, .args = many, .nargs = MT_COH_MAX_ARGS + 1};
    MT_CHECK_ERR(mt_coh_enqueue(q, &cmd, NULL), -EINVAL);
    mt_coh_event *nul = NULL;
    cmd = (mt_coh_command){.fn = tk_run, .user = &k, .args = many, .nargs = 1, .wait = &nul, .nwait = 1};
    MT_CHECK_ERR(mt_coh_enqueue(q, &cmd, NULL), -EINVAL);
    /* An event of another context: nothing here would hand its command
     * over, so the dependent would wait forever. Refused. */
    mt_coh *c2;
    mt_coh_client *cl2;
    mt_coh_queue *q2;
    uint32_t s2;
    MT_CHECK_OK(mt_coh_create(NULL, &c2));
    MT_CHECK_OK(mt_coh_add_sim_device(c2, NULL, &s2));
    MT_CHECK_OK(mt_coh_client_create(c2, &cl2));
    MT_CHECK_OK(mt_coh_queue_create(cl2, s2, &q2));
    mt_coh_buf b2;
    MT_CHECK_OK(mt_coh_buffer_create(cl2, 4096, NULL, &b2));
    mt_coh_arg a2 = {.buf = b2, .size = 16, .access = MT_COH_WRITE};
    tk_cmd k2 = {0};
    mt_coh_event *foreign;
    MT_CHECK_OK(run(q2, &k2, &a2, 1, &foreign));
    cmd = (mt_coh_command){.fn = tk_run, .user = &k, .args = many, .nargs = 1, .wait = &foreign, .nwait = 1};
    MT_CHECK_ERR(mt_coh_enqueue(q, &cmd, NULL), -EINVAL);
    void *fp;
    mt_coh_event *fev = NULL;
    MT_CHECK_ERR(mt_coh_map(q, many, &foreign, 1, &fp, &fev), -EINVAL);
    MT_CHECK(fev == NULL);
    MT_CHECK_OK(mt_coh_event_wait(foreign, -1));
    mt_coh_event_release(foreign);
    mt_coh_client_destroy(cl2);
    mt_coh_destroy(c2);
    /* Fine-grained SVM on a device that cannot use host memory in place. */
    void *fine;
    MT_CHECK_OK(mt_coh_svm_alloc(cl, 4096, MT_COH_SVM_FINE, &fine));
    mt_coh_arg fa = {.svm = fine, .size = 4096, .access = MT_COH_READ};
    MT_CHECK_ERR(run(qs, &k, &fa, 1, NULL), -EOPNOTSUPP);
    MT_CHECK_ERR(mt_coh_svm_free(cl, (char *)fine + 1), MT_ENOBUF);
    MT_CHECK_OK(mt_coh_svm_free(cl, fine));
    /* Mapped for writing: no command may touch the range; others may. */
    mt_coh_arg ma = {.buf = b, .offset = 0, .size = 4096, .access = MT_COH_WRITE};
    void *p;
    mt_coh_event *mev;
    MT_CHECK_OK(mt_coh_map(q, &ma, NULL, 0, &p, &mev));
    MT_CHECK_OK(mt_coh_event_wait(mev, -1));
    mt_coh_event_release(mev);
    mt_coh_arg in_map = {.buf = b, .offset = 100, .size = 10, .access = MT_COH_READ};
    MT_CHECK_ERR(run(qs, &k, &in_map, 1, NULL), MT_EMAPPED);
    mt_coh_arg beside = {.buf = b, .offset = 4096, .size = 4096, .access = MT_COH_RW};
    mt_coh_event *ev;
    MT_CHECK_OK(run(qs, &k, &beside, 1, &ev));
    MT_CHECK_OK(mt_coh_event_wait(ev, -1));
    mt_coh_event_release(ev);
    MT_CHECK_ERR(mt_coh_unmap(q, (char *)p + 1, NULL), -ENOENT);
    MT_CHECK_OK(mt_coh_unmap(q, p, NULL));
    MT_CHECK_OK(run(qs, &k, &in_map, 1, &ev));
    MT_CHECK_OK(mt_coh_event_wait(ev, -1));
    mt_coh_event_release(ev);

    MT_CHECK_OK(mt_coh_stats_get(c, &st1));
    MT_CHECK_UINT_EQ(st1.rejected - st0.rejected, sizeof cases / sizeof cases[0] + 6);
    /* The rejected enqueues allocated nothing that stayed: only b is on sim. */
    mt_coh_device_info di;
    MT_CHECK_OK(mt_coh_device_info_get(c, s, &di));
    MT_CHECK_UINT_EQ(di.instances, 1);
    MT_CHECK_OK(mt_coh_device_info_get(c, h, &di));
    MT_CHECK_UINT_EQ(di.instances, 0);
    mt_coh_client_destroy(other);
    mt_coh_client_destroy(cl);
    mt_coh_destroy(c);
    puts("validation: ok");
}

static _Atomic int released;
static void on_released(void *u)
{
    (void)u;
    atomic_fetch_add(&released, 1);
}

static void test_stall(void)
{
    mt_coh *c;
    MT_CHECK_OK(mt_coh_create(NULL, &c));
    uint32_t h, s;
    MT_CHECK_OK(mt_coh_add_host_device(c, 1u << 20, &h));
    /* The device stops before its first command. */
    mt_sim_opts so = {.faults = {.stall_at = 1}};
    MT_CHECK_OK(mt_coh_add_sim_device(c, &so, &s));
    mt_coh_client *cl;
    MT_CHECK_OK(mt_coh_client_create(c, &cl));
    mt_coh_queue *qh, *qs;
    MT_CHECK_OK(mt_coh_queue_create(cl, h, &qh));
    MT_CHECK_OK(mt_coh_queue_create(cl, s, &qs));
    mt_coh_buf a, b;
    mt_coh_buffer_opts o = {.released = on_released};
    MT_CHECK_OK(mt_coh_buffer_create(cl, 4096, &o, &a));
    MT_CHECK_OK(mt_coh_buffer_create(cl, 4096, NULL, &b));
    tk_cmd k1 = {.pattern = {0x11}}, k2 = {.pattern = {0x22}}, k3 = {0};
    mt_coh_arg wa = {.buf = a, .size = 4096, .access = MT_COH_WRITE};
    mt_coh_event *e1, *e2, *e3;
    MT_CHECK_OK(run(qs, &k1, &wa, 1, &e1));
    MT_CHECK_ERR(mt_coh_event_wait(e1, 20 * 1000 * 1000), MT_ETIMEDOUT);
    MT_CHECK_INT_EQ(mt_coh_event_status(e1), 1);
    /* Another device goes on. */
    mt_coh_arg wb = {.buf = b, .size = 4096, .access = MT_COH_WRITE};
    MT_CHECK_OK(run(qh, &k2, &wb, 1, &e2));
    MT_CHECK_OK(mt_coh_event_wait(e2, -1));
    /* A reader of a on the host device waits for the stalled writer. */
    mt_coh_arg ra = {.buf = a, .size = 4096, .access = MT_COH_READ};
    mt_coh_command cmd = {.fn = tk_run, .user = &k3, .args = &ra, .nargs = 1, .wait = &e1, .nwait = 1};
    k3.nargs = 1;
    k3.access[0] = MT_COH_READ;
    MT_CHECK_OK(mt_coh_enqueue(qh, &cmd, &e3));
    MT_CHECK_ERR(mt_coh_event_wait(e3, 10 * 1000 * 1000), MT_ETIMEDOUT);
    /* Freed while in use: nothing is released yet. */
    MT_CHECK_OK(mt_coh_buffer_free(cl, a));
    usleep(20000);
    MT_CHECK_INT_EQ(atomic_load(&released), 0);
    mt_coh_device_info di;
    MT_CHECK_OK(mt_coh_device_info_get(c, s, &di));
    MT_CHECK(di.mem_used >= 4096);
    mt_sim_unstall(mt_coh_device_sim(c, s));
    MT_CHECK_OK(mt_coh_event_wait(e1, -1));
    MT_CHECK_OK(mt_coh_event_wait(e3, -1));
    uint8_t want[4096];
    tk_fill(want, 4096, 0x11);
    MT_CHECK_UINT_EQ(k3.seen[0], tk_hash(want, 4096));
    for (int i = 0; i < 2000 && !atomic_load(&released); i++)
        usleep(1000);
    MT_CHECK_INT_EQ(atomic_load(&released), 1);
    MT_CHECK_OK(mt_coh_device_info_get(c, s, &di));
    MT_CHECK_UINT_EQ(di.mem_used, 0);
    mt_coh_event_release(e1);
    mt_coh_event_release(e2);
    mt_coh_event_release(e3);
    mt_coh_client_destroy(cl);
    mt_coh_destroy(c);
    puts("stall: ok");
}

static void test_loss(void)
{
    mt_coh *c;
    MT_CHECK_OK(mt_coh_create(NULL, &c));
    uint32_t h, s;
    MT_CHECK_OK(mt_coh_add_host_device(c, 1u << 20, &h));
    mt_sim_opts so = {.faults = {.stall_at = 1}};
    MT_CHECK_OK(mt_coh_add_sim_device(c, &so, &s));
    mt_coh_client *cl;
    MT_CHECK_OK(mt_coh_client_create(c, &cl));
    mt_coh_queue *qh, *qs;
    MT_CHECK_OK(mt_coh_queue_create(cl, h, &qh));
    MT_CHECK_OK(mt_coh_queue_create(cl, s, &qs));
    /* only: written on the sim only. both: read there, valid at the host too. */
    mt_coh_buf only, both;
    uint8_t init[8192];
    for (int i = 0; i < 8192; i++)
        init[i] = (uint8_t)(i * 13);
    mt_coh_buffer_opts o = {.flags = MT_COH_BUF_COPY_HOST_PTR, .host_ptr = init};
    MT_CHECK_OK(mt_coh_buffer_create(cl, 8192, NULL, &only));
    MT_CHECK_OK(mt_coh_buffer_create(cl, 8192, &o, &both));
    tk_cmd k1 = {.pattern = {0x33}}, k2 = {0}, k3 = {0};
    mt_coh_arg w = {.buf = only, .size = 8192, .access = MT_COH_WRITE};
    mt_coh_arg r = {.buf = both, .size = 8192, .access = MT_COH_READ};
    mt_coh_event *e1, *e2, *e3;
    MT_CHECK_OK(run(qs, &k1, &w, 1, &e1)); /* stalls */
    MT_CHECK_OK(run(qs, &k2, &r, 1, &e2)); /* after it in the queue */
    /* A dependent on the host device. */
    mt_coh_arg ro = {.buf = only, .size = 8192, .access = MT_COH_READ};
    k3.nargs = 1;
    k3.access[0] = MT_COH_READ;
    mt_coh_command cmd = {.fn = tk_run, .user = &k3, .args = &ro, .nargs = 1, .wait = &e1, .nwait = 1};
    MT_CHECK_OK(mt_coh_enqueue(qh, &cmd, &e3));
    mt_coh_flush(qs);
    usleep(10000);
    mt_sim_lose(mt_coh_device_sim(c, s));
    MT_CHECK_ERR(mt_coh_event_wait(e1, -1), MT_EDEVLOST);
    MT_CHECK_ERR(mt_coh_event_wait(e2, -1), MT_EDEVLOST);
    MT_CHECK_ERR(mt_coh_event_wait(e3, -1), MT_EDEVLOST);
    MT_CHECK(!atomic_load(&k3.ran)); /* k1 wrote its device commands; they never ran */
    /* The device is gone for new work. */
    tk_cmd k4 = {0};
    MT_CHECK_ERR(run(qs, &k4, &r, 1, NULL), MT_EDEVLOST);
    mt_coh_device_info di;
    MT_CHECK_OK(mt_coh_device_info_get(c, s, &di));
    MT_CHECK_INT_EQ(di.lost, MT_EDEVLOST);
    MT_CHECK_UINT_EQ(di.instances, 0);
    MT_CHECK_UINT_EQ(di.mem_used, 0);
    mt_coh_queue *q2;
    MT_CHECK_ERR(mt_coh_queue_create(cl, s, &q2), MT_EDEVLOST);
    /* 'both' is intact at the host; 'only' is lost until overwritten. */
    tk_cmd k5 = {0};
    mt_coh_event_release(e1);
    MT_CHECK_OK(run(qh, &k5, &r, 1, &e1));
    MT_CHECK_OK(mt_coh_event_wait(e1, -1));
    MT_CHECK_UINT_EQ(k5.seen[0], tk_hash(init, 8192));
    mt_coh_event_release(e1);
    mt_coh_buffer_info bi;
    MT_CHECK_OK(mt_coh_buffer_info_get(cl, only, &bi));
    MT_CHECK_UINT_EQ(bi.lost_bytes, 8192);
    tk_cmd k6 = {0};
    MT_CHECK_ERR(run(qh, &k6, &ro, 1, NULL), MT_ELOSTDATA);
    mt_coh_arg part = {.buf = only, .offset = 0, .size = 4096, .access = MT_COH_WRITE};
    tk_cmd k7 = {.pattern = {0x44}};
    MT_CHECK_OK(run(qh, &k7, &part, 1, &e1));
    MT_CHECK_OK(mt_coh_event_wait(e1, -1));
    mt_coh_event_release(e1);
    mt_coh_arg first = {.buf = only, .size = 4096, .access = MT_COH_READ};
    tk_cmd k8 = {0};
    MT_CHECK_OK(run(qh, &k8, &first, 1, &e1));
    MT_CHECK_OK(mt_coh_event_wait(e1, -1));
    mt_coh_event_release(e1);
    MT_CHECK_ERR(run(qh, &k6, &ro, 1, NULL), MT_ELOSTDATA); /* the second half is still lost */
    mt_coh_event_release(e2);
    mt_coh_event_release(e3);
    mt_coh_client_destroy(cl);
    mt_coh_destroy(c);
    puts("loss: ok");
}

static void test_failing_command(void)
{
    mt_coh *c;
    MT_CHECK_OK(mt_coh_create(NULL, &c));
    uint32_t h1, h2;
    MT_CHECK_OK(mt_coh_add_host_device(c, 1u << 20, &h1));
    MT_CHECK_OK(mt_coh_add_host_device(c, 1u << 20, &h2));
    mt_coh_client *cl;
    MT_CHECK_OK(mt_coh_client_create(c, &cl));
    mt_coh_queue *q1, *q2;
    MT_CHECK_OK(mt_coh_queue_create(cl, h1, &q1));
    MT_CHECK_OK(mt_coh_queue_create(cl, h2, &q2));
    mt_coh_buf b;
    MT_CHECK_OK(mt_coh_buffer_create(cl, 4096, NULL, &b));
    tk_cmd bad = {.fail = -EIO}, after = {0};
    mt_coh_arg w = {.buf = b, .size = 4096, .access = MT_COH_RW};
    mt_coh_event *e1, *e2;
    MT_CHECK_OK(run(q1, &bad, &w, 1, &e1));
    mt_coh_arg r = {.buf = b, .size = 4096, .access = MT_COH_READ};
    after.nargs = 1;
    after.access[0] = MT_COH_READ;
    mt_coh_command cmd = {.fn = tk_run, .user = &after, .args = &r, .nargs = 1, .wait = &e1, .nwait = 1};
    MT_CHECK_OK(mt_coh_enqueue(q2, &cmd, &e2));
    MT_CHECK_ERR(mt_coh_event_wait(e1, -1), -EIO);
    MT_CHECK_ERR(mt_coh_event_wait(e2, -1), -EIO); /* its dependency failed */
    MT_CHECK(!atomic_load(&after.ran));
    MT_CHECK_ERR(mt_coh_finish(q1), -EIO);
    /* What it was to write is lost; the device itself is fine. */
    tk_cmd k = {0};
    MT_CHECK_ERR(run(q2, &k, &r, 1, NULL), MT_ELOSTDATA);
    mt_coh_device_info di;
    MT_CHECK_OK(mt_coh_device_info_get(c, h1, &di));
    MT_CHECK_INT_EQ(di.lost, 0);
    mt_coh_stats st;
    MT_CHECK_OK(mt_coh_stats_get(c, &st));
    MT_CHECK(st.failed >= 2);
    mt_coh_event_release(e1);
    mt_coh_event_release(e2);
    mt_coh_client_destroy(cl);
    mt_coh_destroy(c);
    puts("failing command: ok");
}

static void test_close(void)
{
    mt_coh *c;
    MT_CHECK_OK(mt_coh_create(NULL, &c));
    uint32_t h, s;
    MT_CHECK_OK(mt_coh_add_host_device(c, 1u << 20, &h));
    mt_sim_opts so = {.faults = {.stall_at = 1}};
    MT_CHECK_OK(mt_coh_add_sim_device(c, &so, &s));
    mt_coh_client *cl, *keep;
    MT_CHECK_OK(mt_coh_client_create(c, &cl));
    MT_CHECK_OK(mt_coh_client_create(c, &keep));
    mt_coh_queue *qs, *qk;
    MT_CHECK_OK(mt_coh_queue_create(cl, s, &qs));
    MT_CHECK_OK(mt_coh_queue_create(keep, h, &qk));
    mt_coh_buf bufs[8], kb;
    atomic_store(&released, 0);
    mt_coh_buffer_opts o = {.released = on_released};
    mt_coh_event *evs[8];
    tk_cmd ks[8];
    for (int i = 0; i < 8; i++) {
        MT_CHECK_OK(mt_coh_buffer_create(cl, 16384, &o, &bufs[i]));
        ks[i] = (tk_cmd){.pattern = {(uint64_t)i}};
        mt_coh_arg a = {.buf = bufs[i], .size = 16384, .access = MT_COH_WRITE};
        MT_CHECK_OK(run(qs, &ks[i], &a, 1, &evs[i]));
    }
    void *svm;
    MT_CHECK_OK(mt_coh_svm_alloc(cl, 8192, MT_COH_SVM_COARSE, &svm));
    MT_CHECK_OK(mt_coh_buffer_create(keep, 4096, NULL, &kb));
    mt_coh_flush(qs);
    /* Closed with everything in flight on a stalled device. */
    mt_coh_client_destroy(cl);
    usleep(10000);
    MT_CHECK_INT_EQ(atomic_load(&released), 0);
    /* The other client is unaffected. */
    tk_cmd k = {.pattern = {9}};
    mt_coh_arg a = {.buf = kb, .size = 4096, .access = MT_COH_RW};
    mt_coh_event *ev;
    MT_CHECK_OK(run(qk, &k, &a, 1, &ev));
    MT_CHECK_OK(mt_coh_event_wait(ev, -1));
    mt_coh_event_release(ev);
    mt_sim_unstall(mt_coh_device_sim(c, s));
    for (int i = 0; i < 8; i++) {
        MT_CHECK_OK(mt_coh_event_wait(evs[i], -1));
        mt_coh_event_release(evs[i]);
    }
    for (int i = 0; i < 2000 && atomic_load(&released) < 8; i++)
        usleep(1000);
    MT_CHECK_INT_EQ(atomic_load(&released), 8);
    mt_coh_device_info di;
    MT_CHECK_OK(mt_coh_device_info_get(c, s, &di));
    MT_CHECK_UINT_EQ(di.mem_used, 0);
    mt_coh_client_destroy(keep);
    mt_coh_destroy(c);
    puts("client close: ok");
}

static void test_destroy_stalled(void)
{
    mt_coh *c;
    MT_CHECK_OK(mt_coh_create(NULL, &c));
    uint32_t h, s;
    MT_CHECK_OK(mt_coh_add_host_device(c, 1u << 20, &h));
    mt_sim_opts so = {.faults = {.stall_at = 1}};
    MT_CHECK_OK(mt_coh_add_sim_device(c, &so, &s));
    mt_coh_client *cl;
    MT_CHECK_OK(mt_coh_client_create(c, &cl));
    mt_coh_queue *qs, *qh;
    MT_CHECK_OK(mt_coh_queue_create(cl, s, &qs));
    MT_CHECK_OK(mt_coh_queue_create(cl, h, &qh));
    mt_coh_buf b;
    MT_CHECK_OK(mt_coh_buffer_create(cl, 4096, NULL, &b));
    tk_cmd k1 = {0}, k2 = {0};
    mt_coh_arg a = {.buf = b, .size = 4096, .access = MT_COH_RW};
    mt_coh_event *e1, *e2;
    MT_CHECK_OK(run(qs, &k1, &a, 1, &e1));
    mt_coh_command cmd = {.fn = tk_run, .user = &k2, .args = &a, .nargs = 1, .wait = &e1, .nwait = 1};
    k2.nargs = 1;
    k2.access[0] = MT_COH_RW;
    MT_CHECK_OK(mt_coh_enqueue(qh, &cmd, &e2));
    mt_coh_flush(qs);
    usleep(10000);
    mt_coh_destroy(c); /* the client goes with it */
    int s1 = mt_coh_event_status(e1), s2 = mt_coh_event_status(e2);
    MT_CHECK(s1 == MT_ECANCELED || s1 == MT_EDEVLOST);
    MT_CHECK(s2 == s1);
    MT_CHECK(mt_coh_event_wait(e2, -1) == s1);
    mt_coh_event_release(e1);
    mt_coh_event_release(e2);
    puts("destroy with a stalled device: ok");
}

static _Atomic int gate_open;
static int gated(void *user, const struct mt_coh_exec *ex)
{
    (void)user, (void)ex;
    while (!atomic_load(&gate_open))
        usleep(1000);
    return 0;
}

/* In the child: everything refuses, nothing hangs or crashes. */
static void child_calls(mt_coh *c, mt_coh_client *cl, mt_coh_queue *q, mt_coh_buf b, mt_coh_event *pending)
{
    MT_CHECK_ERR(mt_coh_event_wait(pending, -1), MT_EFORKED);
    mt_coh_arg a = {.buf = b, .size = 4096, .access = MT_COH_RW};
    mt_coh_command cmd = {.fn = gated, .args = &a, .nargs = 1};
    MT_CHECK_ERR(mt_coh_enqueue(q, &cmd, NULL), MT_EFORKED);
    void *p;
    MT_CHECK_ERR(mt_coh_map(q, &a, NULL, 0, &p, NULL), MT_EFORKED);
    MT_CHECK_ERR(mt_coh_unmap(q, &a, NULL), MT_EFORKED);
    MT_CHECK_ERR(mt_coh_finish(q), MT_EFORKED);
    MT_CHECK_ERR(mt_coh_flush(q), MT_EFORKED);
    mt_coh_buf nb;
    MT_CHECK_ERR(mt_coh_buffer_create(cl, 4096, NULL, &nb), MT_EFORKED);
    MT_CHECK_ERR(mt_coh_buffer_free(cl, b), MT_EFORKED);
    mt_coh_buffer_info bi;
    MT_CHECK_ERR(mt_coh_buffer_info_get(cl, b, &bi), MT_EFORKED);
    mt_coh_stats st;
    MT_CHECK_ERR(mt_coh_stats_get(c, &st), MT_EFORKED);
    uint32_t id;
    MT_CHECK_ERR(mt_coh_add_host_device(c, 1u << 20, &id), MT_EFORKED);
    MT_CHECK(mt_coh_event_status(pending) == 1); /* still pending here */
    mt_coh_queue_destroy(q);
    mt_coh_client_destroy(cl);
    mt_coh_destroy(c);
}

static void test_forked_child(void)
{
    mt_coh *c;
    MT_CHECK_OK(mt_coh_create(NULL, &c));
    uint32_t h, s;
    MT_CHECK_OK(mt_coh_add_host_device(c, 1u << 20, &h));
    MT_CHECK_OK(mt_coh_add_sim_device(c, NULL, &s));
    mt_coh_client *cl;
    MT_CHECK_OK(mt_coh_client_create(c, &cl));
    mt_coh_queue *q;
    MT_CHECK_OK(mt_coh_queue_create(cl, h, &q));
    mt_coh_buf b;
    mt_coh_buffer_opts bo = {.flags = MT_COH_BUF_TRACK_HOST};
    MT_CHECK_OK(mt_coh_buffer_create(cl, 1u << 20, &bo, &b));
    atomic_store(&gate_open, 0);
    mt_coh_arg a = {.buf = b, .size = 4096, .access = MT_COH_RW};
    mt_coh_command cmd = {.fn = gated, .args = &a, .nargs = 1};
    mt_coh_event *ev;
    MT_CHECK_OK(mt_coh_enqueue(q, &cmd, &ev));
    MT_CHECK_OK(mt_coh_flush(q));
    for (int how = 0; how < 2; how++) {
        /* exit(), not _exit: a runtime's destructors run in such a child. */
        pid_t pid = how == 0 ? fork() : _Fork();
        MT_CHECK(pid >= 0);
        if (pid == 0) {
            alarm(20);
            child_calls(c, cl, q, b, ev);
#ifdef __SANITIZE_ADDRESS__
            /* LeakSanitizer's check at exit() would report what only the
             * parent's threads (absent here) point to. */
            _exit(0);
#else
            exit(0);
#endif
        }
        int st;
        MT_CHECK_INT_EQ(waitpid(pid, &st, 0), pid);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
            printf("child (%s): status %#x\n", how ? "_Fork" : "fork", st);
        MT_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    atomic_store(&gate_open, 1);
    MT_CHECK_OK(mt_coh_event_wait(ev, -1));
    mt_coh_event_release(ev);
    MT_CHECK_OK(mt_coh_enqueue(q, &(mt_coh_command){.fn = gated, .args = &a, .nargs = 1}, &ev));
    MT_CHECK_OK(mt_coh_event_wait(ev, -1));
    mt_coh_event_release(ev);
    mt_coh_client_destroy(cl);
    mt_coh_destroy(c);
    puts("forked child: ok");
}

int main(void)
{
    for (int code = MT_ENOBUF; code >= MT_EMAPPED; code--)
        MT_CHECK(strcmp(mt_strerror(code), "unknown error") != 0);
    MT_CHECK(strcmp(mt_strerror(MT_EFORKED), "unknown error") != 0);
    test_validation();
    test_stall();
    test_loss();
    test_failing_command();
    test_close();
    test_destroy_stalled();
    test_forked_child();
    return 0;
}
