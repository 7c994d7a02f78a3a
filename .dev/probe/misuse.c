#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <sys/mman.h>
#include "memtrack/coherence.h"
#include "memtrack/base.h"

static mt_coh *c, *c2; static mt_coh_client *cl, *cl2; static mt_coh_queue *q, *qs, *q2;
static uint32_t h, s, s2;
static int nop(void *u, const struct mt_coh_exec *ex) { (void)u; (void)ex; return 0; }
static void setup(void) {
    mt_coh_create(NULL, &c); mt_coh_add_host_device(c, 1u << 24, &h); mt_coh_add_sim_device(c, NULL, &s);
    mt_coh_client_create(c, &cl); mt_coh_queue_create(cl, h, &q); mt_coh_queue_create(cl, s, &qs);
    mt_coh_create(NULL, &c2); mt_coh_add_sim_device(c2, NULL, &s2); mt_coh_client_create(c2, &cl2); mt_coh_queue_create(cl2, s2, &q2);
}
static int enq(mt_coh_queue *qq, mt_coh_arg *a, uint32_t n) {
    mt_coh_command cmd = {.fn = nop, .args = a, .nargs = n}; mt_coh_event *ev = NULL;
    int rc = mt_coh_enqueue(qq, &cmd, &ev); if (ev) { int w = mt_coh_event_wait(ev, 2000000000); if (w) rc = 1000 + w; mt_coh_event_release(ev);} return rc;
}
#define CASE(name, body) do { fflush(stdout); pid_t p = fork(); if (!p) { alarm(10); setup(); int r = ({ body; }); printf("%-40s rc=%d (%s)\n", name, r, r < 0 ? mt_strerror(r) : ""); fflush(stdout); _exit(0);} int st; waitpid(p, &st, 0); if (!WIFEXITED(st) || WEXITSTATUS(st)) printf("%-40s CRASH status=%x\n", name, st);} while (0)
int main(void) {
    CASE("enqueue cmd NULL", mt_coh_enqueue(q, NULL, NULL));
    CASE("enqueue args NULL nargs 1", ({mt_coh_command cmd = {.fn = nop, .nargs = 1}; mt_coh_enqueue(q, &cmd, NULL);}));
    CASE("enqueue wait NULL nwait 1", ({mt_coh_command cmd = {.fn = nop, .nwait = 1}; mt_coh_enqueue(q, &cmd, NULL);}));
    CASE("enqueue q NULL", ({mt_coh_command cmd = {.fn = nop}; mt_coh_enqueue(NULL, &cmd, NULL);}));
    CASE("buffer of other context", ({mt_coh_buf b; mt_coh_buffer_create(cl2, 4096, NULL, &b); mt_coh_arg a = {.buf = b, .size = 16, .access = MT_COH_READ}; enq(qs, &a, 1);}));
    CASE("buffer create huge", ({mt_coh_buf b; mt_coh_buffer_create(cl, UINT64_MAX, NULL, &b);}));
    CASE("buffer create 2^62 + use", ({mt_coh_buf b; int r = mt_coh_buffer_create(cl, 1ull<<62, NULL, &b); if (!r) { mt_coh_arg a = {.buf = b, .size = 1ull<<62, .access = MT_COH_READ}; r = enq(qs, &a, 1);} r;}));
    CASE("buffer 1TB use 4k", ({mt_coh_buf b; int r = mt_coh_buffer_create(cl, 1ull<<40, NULL, &b); if (!r) { mt_coh_arg a = {.buf = b, .size = 4096, .access = MT_COH_READ}; r = enq(qs, &a, 1);} r;}));
    CASE("buffer opts reserved nonzero", ({mt_coh_buf b; mt_coh_buffer_opts o = {.reserved = {1}}; mt_coh_buffer_create(cl, 4096, &o, &b);}));
    CASE("buffer flags unknown", ({mt_coh_buf b; mt_coh_buffer_opts o = {.flags = 1u<<20}; mt_coh_buffer_create(cl, 4096, &o, &b);}));
    CASE("buffer out NULL", ({mt_coh_buffer_create(cl, 4096, NULL, NULL);}));
    CASE("track host size 100", ({mt_coh_buf b; mt_coh_buffer_opts o = {.flags = MT_COH_BUF_TRACK_HOST}; int r = mt_coh_buffer_create(cl, 100, &o, &b); if (!r) { mt_coh_arg a = {.buf = b, .size = 100, .access = MT_COH_READ}; r = enq(qs, &a, 1);} r;}));
    CASE("track host + copy host ptr", ({char x[100] = {1}; mt_coh_buf b; mt_coh_buffer_opts o = {.flags = MT_COH_BUF_TRACK_HOST | MT_COH_BUF_COPY_HOST_PTR, .host_ptr = x}; int r = mt_coh_buffer_create(cl, 100, &o, &b); if (!r) { mt_coh_arg a = {.buf = b, .size = 100, .access = MT_COH_READ}; r = enq(qs, &a, 1);} r;}));
    CASE("use+copy host ptr", ({char x[100] = {1}; mt_coh_buf b; mt_coh_buffer_opts o = {.flags = MT_COH_BUF_USE_HOST_PTR | MT_COH_BUF_COPY_HOST_PTR, .host_ptr = x}; mt_coh_buffer_create(cl, 100, &o, &b);}));
    CASE("host_ptr w/o flag", ({char x[100] = {1}; mt_coh_buf b; mt_coh_buffer_opts o = {.host_ptr = x}; mt_coh_buffer_create(cl, 100, &o, &b);}));
    CASE("use host ptr on PROT_NONE memory", ({void *m = mmap(0, 8192, PROT_NONE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0); mt_coh_buf b; mt_coh_buffer_opts o = {.flags = MT_COH_BUF_USE_HOST_PTR|MT_COH_BUF_TRACK_HOST, .host_ptr = m}; int r = mt_coh_buffer_create(cl, 8192, &o, &b); if (!r) { mt_coh_arg a = {.buf = b, .size = 100, .access = MT_COH_READ}; r = enq(qs, &a, 1);} r;}));
    CASE("use host ptr read-only memory track", ({void *m = mmap(0, 8192, PROT_READ, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0); mt_coh_buf b; mt_coh_buffer_opts o = {.flags = MT_COH_BUF_USE_HOST_PTR|MT_COH_BUF_TRACK_HOST, .host_ptr = m}; int r = mt_coh_buffer_create(cl, 8192, &o, &b); if (!r) { mt_coh_arg a = {.buf = b, .size = 100, .access = MT_COH_READ}; r = enq(qs, &a, 1);} r;}));
    CASE("use host ptr read-only, write cmd", ({void *m = mmap(0, 8192, PROT_READ, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0); mt_coh_buf b; mt_coh_buffer_opts o = {.flags = MT_COH_BUF_USE_HOST_PTR, .host_ptr = m}; int r = mt_coh_buffer_create(cl, 8192, &o, &b); if (!r) { mt_coh_arg a = {.buf = b, .size = 100, .access = MT_COH_WRITE}; r = enq(qs, &a, 1); if (!r) { void *p; mt_coh_event *ev; mt_coh_arg ma = {.buf = b, .size = 100, .access = MT_COH_READ}; r = mt_coh_map(q, &ma, NULL, 0, &p, &ev); if (!r) { r = mt_coh_event_wait(ev, 2000000000);} }} r;}));
    CASE("two tracked buffers same host ptr", ({void *m = mmap(0, 8192, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0); mt_coh_buf b, b2; mt_coh_buffer_opts o = {.flags = MT_COH_BUF_USE_HOST_PTR|MT_COH_BUF_TRACK_HOST, .host_ptr = m}; int r = mt_coh_buffer_create(cl, 8192, &o, &b); if (!r) r = mt_coh_buffer_create(cl, 8192, &o, &b2); if (!r) { memset(m, 7, 8192); mt_coh_arg a = {.buf = b2, .size = 100, .access = MT_COH_READ}; r = enq(qs, &a, 1); mt_coh_buffer_free(cl, b); memset(m, 8, 8192); if (!r) r = enq(qs, &a, 1);} r;}));
    CASE("overlapping tracked host ptrs", ({char *m = mmap(0, 16384, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0); mt_coh_buf b, b2; mt_coh_buffer_opts o = {.flags = MT_COH_BUF_USE_HOST_PTR|MT_COH_BUF_TRACK_HOST, .host_ptr = m}; int r = mt_coh_buffer_create(cl, 8192, &o, &b); o.host_ptr = m + 4096; if (!r) r = mt_coh_buffer_create(cl, 8192, &o, &b2); if (!r) { memset(m, 7, 16384); mt_coh_arg a = {.buf = b2, .size = 8192, .access = MT_COH_READ}; r = enq(qs, &a, 1); mt_coh_arg a1 = {.buf = b, .size = 8192, .access = MT_COH_READ}; if (!r) r = enq(qs, &a1, 1);} r;}));
    CASE("subbuffer overflow", ({mt_coh_buf b, sb; mt_coh_buffer_create(cl, 8192, NULL, &b); mt_coh_subbuffer_create(cl, b, UINT64_MAX - 10, 20, 0, &sb);}));
    CASE("subbuffer size 0", ({mt_coh_buf b, sb; mt_coh_buffer_create(cl, 8192, NULL, &b); mt_coh_subbuffer_create(cl, b, 0, 0, 0, &sb);}));
    CASE("subbuffer wider access", ({mt_coh_buf b, sb; mt_coh_buffer_opts o = {.flags = MT_COH_BUF_READ_ONLY}; mt_coh_buffer_create(cl, 8192, &o, &b); mt_coh_subbuffer_create(cl, b, 0, 10, MT_COH_BUF_WRITE_ONLY, &sb);}));
    CASE("subbuffer bad flags", ({mt_coh_buf b, sb; mt_coh_buffer_create(cl, 8192, NULL, &b); mt_coh_subbuffer_create(cl, b, 0, 10, MT_COH_BUF_USE_HOST_PTR, &sb);}));
    CASE("subbuffer of freed", ({mt_coh_buf b, sb; mt_coh_buffer_create(cl, 8192, NULL, &b); mt_coh_buffer_free(cl, b); mt_coh_subbuffer_create(cl, b, 0, 10, 0, &sb);}));
    CASE("subbuffer other client", ({mt_coh_client *o2; mt_coh_client_create(c, &o2); mt_coh_buf b, sb; mt_coh_buffer_create(cl, 8192, NULL, &b); mt_coh_subbuffer_create(o2, b, 0, 10, 0, &sb);}));
    CASE("free parent, use sub", ({mt_coh_buf b, sb; mt_coh_buffer_create(cl, 8192, NULL, &b); mt_coh_subbuffer_create(cl, b, 100, 1000, 0, &sb); mt_coh_buffer_free(cl, b); mt_coh_arg a = {.buf = sb, .size = 1000, .access = MT_COH_RW}; enq(qs, &a, 1);}));
    CASE("free parent use parent", ({mt_coh_buf b, sb; mt_coh_buffer_create(cl, 8192, NULL, &b); mt_coh_subbuffer_create(cl, b, 100, 1000, 0, &sb); mt_coh_buffer_free(cl, b); mt_coh_arg a = {.buf = b, .size = 1000, .access = MT_COH_RW}; enq(qs, &a, 1);}));
    CASE("double free", ({mt_coh_buf b; mt_coh_buffer_create(cl, 8192, NULL, &b); mt_coh_buffer_free(cl, b); mt_coh_buffer_free(cl, b);}));
    CASE("free by other client", ({mt_coh_client *o2; mt_coh_client_create(c, &o2); mt_coh_buf b; mt_coh_buffer_create(cl, 8192, NULL, &b); mt_coh_buffer_free(o2, b);}));
    CASE("free 0", ({mt_coh_buffer_free(cl, 0);}));
    CASE("map twice read", ({mt_coh_buf b; mt_coh_buffer_create(cl, 8192, NULL, &b); mt_coh_arg a = {.buf = b, .size = 100, .access = MT_COH_READ}; void *p1, *p2; mt_coh_event *e1, *e2; int r = mt_coh_map(q, &a, NULL, 0, &p1, &e1); if (!r) r = mt_coh_map(q, &a, NULL, 0, &p2, &e2); if (!r) r = mt_coh_unmap(q, p1, NULL); if (!r) r = mt_coh_unmap(q, p2, NULL); if (!r) r = mt_coh_unmap(q, p2, NULL); r;}));
    CASE("map write twice", ({mt_coh_buf b; mt_coh_buffer_create(cl, 8192, NULL, &b); mt_coh_arg a = {.buf = b, .size = 100, .access = MT_COH_WRITE}; void *p1, *p2; mt_coh_event *e1, *e2; int r = mt_coh_map(q, &a, NULL, 0, &p1, &e1); if (!r) r = mt_coh_map(q, &a, NULL, 0, &p2, &e2); r;}));
    CASE("map read then write overlapping", ({mt_coh_buf b; mt_coh_buffer_create(cl, 8192, NULL, &b); mt_coh_arg a = {.buf = b, .size = 100, .access = MT_COH_READ}; void *p1, *p2; mt_coh_event *e1, *e2; int r = mt_coh_map(q, &a, NULL, 0, &p1, &e1); a.access = MT_COH_WRITE; if (!r) r = mt_coh_map(q, &a, NULL, 0, &p2, &e2); r;}));
    CASE("map, free buffer, unmap", ({mt_coh_buf b; mt_coh_buffer_create(cl, 8192, NULL, &b); mt_coh_arg a = {.buf = b, .size = 100, .access = MT_COH_RW}; void *p1; mt_coh_event *e1; int r = mt_coh_map(q, &a, NULL, 0, &p1, &e1); mt_coh_event_wait(e1, -1); memset(p1, 1, 100); if (!r) r = mt_coh_buffer_free(cl, b); if (!r) r = mt_coh_unmap(q, p1, NULL); r;}));
    CASE("map, client destroy", ({mt_coh_buf b; mt_coh_buffer_create(cl, 8192, NULL, &b); mt_coh_arg a = {.buf = b, .size = 100, .access = MT_COH_RW}; void *p1; mt_coh_event *e1; int r = mt_coh_map(qs, &a, NULL, 0, &p1, &e1); mt_coh_client_destroy(cl); mt_coh_destroy(c); r;}));
    CASE("map size 0", ({mt_coh_buf b; mt_coh_buffer_create(cl, 8192, NULL, &b); mt_coh_arg a = {.buf = b, .size = 0, .access = MT_COH_RW}; void *p1; mt_coh_event *e1; mt_coh_map(q, &a, NULL, 0, &p1, &e1);}));
    CASE("map ptr NULL", ({mt_coh_buf b; mt_coh_buffer_create(cl, 8192, NULL, &b); mt_coh_arg a = {.buf = b, .size = 10, .access = MT_COH_RW}; mt_coh_event *e1; mt_coh_map(q, &a, NULL, 0, NULL, &e1);}));
    CASE("unmap NULL", ({mt_coh_unmap(q, NULL, NULL);}));
    CASE("unmap on other client's q", ({mt_coh_buf b; mt_coh_buffer_create(cl, 8192, NULL, &b); mt_coh_arg a = {.buf = b, .size = 100, .access = MT_COH_RW}; void *p1; mt_coh_event *e1; mt_coh_map(q, &a, NULL, 0, &p1, &e1); mt_coh_client *o2; mt_coh_queue *oq; mt_coh_client_create(c, &o2); mt_coh_queue_create(o2, h, &oq); mt_coh_unmap(oq, p1, NULL);}));
    CASE("svm alloc 0", ({void *p; mt_coh_svm_alloc(cl, 0, MT_COH_SVM_COARSE, &p);}));
    CASE("svm alloc bad kind", ({void *p; mt_coh_svm_alloc(cl, 100, 7, &p);}));
    CASE("svm free NULL", ({mt_coh_svm_free(cl, NULL);}));
    CASE("svm double free", ({void *p; mt_coh_svm_alloc(cl, 100, MT_COH_SVM_COARSE, &p); mt_coh_svm_free(cl, p); mt_coh_svm_free(cl, p);}));
    CASE("svm arg beyond", ({void *p; mt_coh_svm_alloc(cl, 100, MT_COH_SVM_COARSE, &p); mt_coh_arg a = {.svm = (char*)p + 50, .size = 100, .access = MT_COH_RW}; enq(qs, &a, 1);}));
    CASE("svm arg with offset overflow", ({void *p; mt_coh_svm_alloc(cl, 100, MT_COH_SVM_COARSE, &p); mt_coh_arg a = {.svm = (char*)p + 50, .offset = UINT64_MAX - 40, .size = 10, .access = MT_COH_RW}; enq(qs, &a, 1);}));
    CASE("buffer on svm beyond", ({void *p; mt_coh_svm_alloc(cl, 100, MT_COH_SVM_COARSE, &p); mt_coh_buf b; mt_coh_buffer_opts o = {.flags = MT_COH_BUF_USE_HOST_PTR, .host_ptr = (char*)p + 50}; mt_coh_buffer_create(cl, 100, &o, &b);}));
    CASE("buffer on svm, free svm, use buf", ({void *p; mt_coh_svm_alloc(cl, 100, MT_COH_SVM_COARSE, &p); mt_coh_buf b; mt_coh_buffer_opts o = {.flags = MT_COH_BUF_USE_HOST_PTR, .host_ptr = (char*)p + 50}; int r = mt_coh_buffer_create(cl, 50, &o, &b); mt_coh_svm_free(cl, p); mt_coh_arg a = {.buf = b, .size = 50, .access = MT_COH_RW}; if (!r) r = enq(qs, &a, 1); r;}));
    CASE("buffer on svm other client", ({void *p; mt_coh_svm_alloc(cl, 100, MT_COH_SVM_COARSE, &p); mt_coh_client *o2; mt_coh_client_create(c, &o2); mt_coh_buf b; mt_coh_buffer_opts o = {.flags = MT_COH_BUF_USE_HOST_PTR, .host_ptr = p}; mt_coh_buffer_create(o2, 100, &o, &b);}));
    CASE("buffer on svm TRACK_HOST", ({void *p; mt_coh_svm_alloc(cl, 8192, MT_COH_SVM_COARSE, &p); mt_coh_buf b; mt_coh_buffer_opts o = {.flags = MT_COH_BUF_USE_HOST_PTR|MT_COH_BUF_TRACK_HOST, .host_ptr = p}; mt_coh_buffer_create(cl, 4096, &o, &b);}));
    CASE("buffer on svm COPY", ({void *p; mt_coh_svm_alloc(cl, 8192, MT_COH_SVM_COARSE, &p); mt_coh_buf b; mt_coh_buffer_opts o = {.flags = MT_COH_BUF_COPY_HOST_PTR, .host_ptr = p}; mt_coh_buffer_create(cl, 4096, &o, &b);}));
    CASE("queue on device 0", ({mt_coh_queue *x; mt_coh_queue_create(cl, 0, &x);}));
    CASE("queue on device 64", ({mt_coh_queue *x; mt_coh_queue_create(cl, 64, &x);}));
    CASE("queue on dev of other ctx id", ({mt_coh_queue *x; mt_coh_queue_create(cl, 3, &x);}));
    CASE("wait on event of other ctx", ({mt_coh_buf b; mt_coh_buffer_create(cl2, 4096, NULL, &b); mt_coh_arg a = {.buf = b, .size = 16, .access = MT_COH_WRITE}; mt_coh_command cmd = {.fn = nop, .args = &a, .nargs = 1}; mt_coh_event *ev; mt_coh_enqueue(q2, &cmd, &ev); mt_coh_buf b1; mt_coh_buffer_create(cl, 4096, NULL, &b1); mt_coh_arg a1 = {.buf = b1, .size = 16, .access = MT_COH_WRITE}; mt_coh_command cmd1 = {.fn = nop, .args = &a1, .nargs = 1, .wait = &ev, .nwait = 1}; mt_coh_event *e1; int r = mt_coh_enqueue(qs, &cmd1, &e1); if (!r) r = mt_coh_event_wait(e1, 2000000000); r;}));
    CASE("destroy ctx with event held, wait it", ({mt_coh_buf b; mt_coh_buffer_create(cl, 4096, NULL, &b); mt_coh_arg a = {.buf = b, .size = 16, .access = MT_COH_WRITE}; mt_coh_command cmd = {.fn = nop, .args = &a, .nargs = 1}; mt_coh_event *ev; mt_coh_enqueue(qs, &cmd, &ev); mt_coh_destroy(c); int r = mt_coh_event_wait(ev, 1000000000); mt_coh_event_release(ev); r;}));
    CASE("destroy ctx w/o client destroy", ({mt_coh_buf b; mt_coh_buffer_create(cl, 4096, NULL, &b); mt_coh_destroy(c); 0;}));
    CASE("client destroy, queue destroy after", ({mt_coh_client_destroy(cl); mt_coh_queue_destroy(q); 0;}));
    CASE("same arg buffer RW twice", ({mt_coh_buf b; mt_coh_buffer_create(cl, 4096, NULL, &b); mt_coh_arg a[2] = {{.buf = b, .size = 16, .access = MT_COH_WRITE}, {.buf = b, .offset = 8, .size = 16, .access = MT_COH_RW}}; enq(qs, a, 2);}));
    CASE("host dev mem 0", ({uint32_t id; mt_coh_add_host_device(c, 0, &id);}));
    CASE("sim dev too small, big buffer", ({mt_sim_opts so = {0}; so.mem_size = 1<<16; uint32_t id; int r = mt_coh_add_sim_device(c, &so, &id); mt_coh_queue *x; if (!r) r = mt_coh_queue_create(cl, id, &x); mt_coh_buf b; mt_coh_buffer_create(cl, 1<<20, NULL, &b); mt_coh_arg a = {.buf = b, .size = 1<<20, .access = MT_COH_RW}; if (!r) r = enq(x, &a, 1); r;}));
    CASE("event release NULL / status", ({mt_coh_event_release(NULL); mt_coh_event_retain(NULL); 0;}));
    CASE("create opts granularity 3", ({mt_coh *x; mt_coh_opts o = {.granularity = 3}; mt_coh_create(&o, &x);}));
    CASE("create opts track_chunk 100", ({mt_coh *x; mt_coh_opts o = {.track_chunk = 100}; mt_coh_create(&o, &x);}));
    CASE("create opts granularity 2^63", ({mt_coh *x; mt_coh_opts o = {.granularity = 1ull<<63}; int r = mt_coh_create(&o, &x); if (!r) { uint32_t id; mt_coh_add_host_device(x, 1<<20, &id); mt_coh_client *xc; mt_coh_client_create(x, &xc); mt_coh_queue *xq; mt_coh_queue_create(xc, id, &xq); mt_coh_buf b; mt_coh_buffer_create(xc, 100, NULL, &b); mt_coh_arg a = {.buf = b, .offset = 10, .size = 10, .access = MT_COH_RW}; r = enq(xq, &a, 1);} r;}));
    CASE("stats NULL", ({mt_coh_stats_get(c, NULL);}));
    CASE("info NULL ctx", ({mt_coh_device_info i; mt_coh_device_info_get(NULL, 1, &i);}));
    return 0;
}
