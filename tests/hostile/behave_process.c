/* Behaviours: process life — a plain run, fork and exit in the child, exec of
 * another Vulkan program, several instance/device lifetimes in sequence and at
 * once, and the ways a process can end (_exit, exec, SIGTERM, a crash, abort,
 * SIGKILL) after its last submit: the trace must read back up to it. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hv.h"

#define INST_THREADS 3 /* instances-threads: threads, each with its instance */
#define INST_ROUNDS 2

/* `frames` submits, each after writes in a staging memory, checked. */
static int baseline(hv *h, int argc, char **argv)
{
    (void)argc, (void)argv;
    int rc = hv_init(h, NULL);
    if (rc)
        return rc;
    int bad = hv_frames_of_work(h, 1, "GPU copy");
    hv_fini(h);
    return bad;
}

/* ASan's allocator (GCC 12's runtime) is not fork-safe: the child of a
 * multi-threaded process that frees memory in exit() can block for good on
 * the allocator's lock another thread held at the fork (seen in the
 * validation layer's exit handler, with or without memtrack). Under ASan
 * the children end through _exit only; TSan skips fork-child (hostile.sh). */
#ifdef __SANITIZE_ADDRESS__
#define FIRST_EXIT_WAY 1
#else
#define FIRST_EXIT_WAY 0
#endif

static int fork_child(hv *h, int argc, char **argv)
{
    (void)argc, (void)argv;
    int rc = hv_init(h, NULL);
    if (rc)
        return rc;
    hv_mem src, rb;
    hv_alloc(h, &src, 1u << 20, HV_SRC);
    hv_alloc(h, &rb, 1u << 20, HV_DST);
    int bad = 0;
    for (int f = 0; f < h->frames && !bad; f++) {
        hv_write(&src, 1000, 20000, 10 + (uint64_t)f);
        /* Children write their copy of the mapping and end: through exit()
         * (atexit handlers run) and through _exit(). */
        for (int how = FIRST_EXIT_WAY; how < 2; how++) {
            pid_t pid = fork();
            if (pid == 0) {
                memset(src.ptr + 500000, 0xee, 100000);
                if (how == 0)
                    exit(0);
                _exit(0);
            }
            bad |= hv_wait_status(pid, 0, how == 0 ? "fork+exit" : "fork+_exit");
        }
        /* The child's writes were to its private copy, unless the driver's
         * mapping is shared memory: the app sees whichever it is. */
        if (src.ptr[500000] == 0xee)
            memset(src.model + 500000, 0xee, 100000);
        hv_write(&src, 300000, 20000, 20 + (uint64_t)f);
        bad |= hv_gpu_check(h, &src, &rb, "fork-child: GPU copy in the parent");
    }
    hv_free(h, &src);
    hv_free(h, &rb);
    hv_fini(h);
    return bad;
}

/* A child that writes a page its parent then leaves alone. Where the
 * driver's mapping is shared memory and inherited (some of NVIDIA's are),
 * the byte is the parent's too and its next submit reads it: nothing in
 * the parent faulted for it, so the capture must learn it from the child
 * (track: shared memory a descendant writes). Where it is private, the
 * child wrote its copy; where it is not inherited (MADV_DONTFORK), the
 * child dies of SIGSEGV, which is the driver's and accepted here. The app
 * checks the GPU against what it reads back, `memtrack verify` the trace. */
static int fork_shared(hv *h, int argc, char **argv)
{
    (void)argc, (void)argv;
    int rc = hv_init(h, NULL);
    if (rc)
        return rc;
    hv_mem src, rb;
    VkDeviceSize size = 272 * 4096; /* as fork-racing's, whose NVIDIA mapping is inherited */
    hv_alloc(h, &src, size, HV_SRC);
    hv_alloc(h, &rb, size, HV_DST);
    int bad = 0;
    hv_write(&src, 0, size, 1);
    bad |= hv_gpu_check(h, &src, &rb, "fork-shared: GPU copy before");
    for (int f = 0; f < h->frames && !bad; f++) {
        VkDeviceSize at = (VkDeviceSize)(7 + 13 * f) % 256 * 4096 + 123;
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            src.ptr[at] = (unsigned char)(0xa0 + f);
            _exit(0);
        }
        int st = 0;
        if (pid < 0 || waitpid(pid, &st, 0) != pid) {
            bad = 1;
            break;
        }
        if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0) &&
            !(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV)) {
            fprintf(stderr, "%s: fork-shared: child status 0x%x\n", hv_argv0, st);
            bad = 1;
        }
        if (src.ptr[at] == (unsigned char)(0xa0 + f)) /* shared: the parent's byte too */
            src.model[at] = src.ptr[at];
        /* A write of the parent's elsewhere, so each submit has one. */
        hv_write(&src, (VkDeviceSize)(200 + f % 50) * 4096, 64, 50 + (uint64_t)f);
        bad |= hv_gpu_check(h, &src, &rb, "fork-shared: GPU copy after the child");
    }
    hv_free(h, &src);
    hv_free(h, &rb);
    hv_fini(h);
    return bad;
}

static int exec_child(hv *h, int argc, char **argv)
{
    (void)argc, (void)argv;
    int rc = hv_init(h, NULL);
    if (rc)
        return rc;
    hv_mem src, rb;
    hv_alloc(h, &src, 1u << 20, HV_SRC);
    hv_alloc(h, &rb, 1u << 20, HV_DST);
    int bad = 0;
    hv_write(&src, 0, 50000, 1);
    bad |= hv_gpu_check(h, &src, &rb, "exec-child: GPU copy before the child");
    /* Another Vulkan program, with this process's environment. */
    pid_t pid = fork();
    if (pid == 0) {
        char frames[16];
        snprintf(frames, sizeof frames, "%d", h->frames);
        execl("/proc/self/exe", hv_argv0, "baseline", "--frames", frames, (char *)NULL);
        _exit(127);
    }
    bad |= hv_wait_status(pid, 0, "exec of a Vulkan program");
    for (int f = 0; f < h->frames && !bad; f++) {
        hv_write(&src, 60000 + (VkDeviceSize)f * 1000, 30000, 100 + (uint64_t)f);
        bad |= hv_gpu_check(h, &src, &rb, "exec-child: GPU copy after the child");
    }
    hv_free(h, &src);
    hv_free(h, &rb);
    hv_fini(h);
    return bad;
}

/* Two instance/device lifetimes in sequence, then two alive at once. */
static int two_instances(hv *h, int argc, char **argv)
{
    (void)argc, (void)argv;
    int bad = 0;
    for (int life = 0; life < 2 && !bad; life++) {
        int rc = hv_init(h, NULL);
        if (rc)
            return rc;
        bad |= hv_frames_of_work(h, 1000 * (uint64_t)life, "GPU copy");
        hv_fini(h);
    }
    hv g = {.frames = h->frames};
    int rc = hv_init(h, NULL);
    if (rc)
        return rc;
    if ((rc = hv_init(&g, NULL)) != 0)
        return rc;
    bad |= hv_frames_of_work(h, 5000, "GPU copy");
    bad |= hv_frames_of_work(&g, 6000, "GPU copy");
    hv_fini(&g);
    bad |= hv_frames_of_work(h, 7000, "GPU copy");
    hv_fini(h);
    return bad;
}

/* instances-threads: one of the threads, its own instance and device. */
typedef struct inst_thread {
    pthread_barrier_t *start;
    int frames, index, bad;
} inst_thread;

static void *inst_thread_main(void *arg)
{
    inst_thread *t = arg;
    for (int round = 0; round < INST_ROUNDS; round++) {
        hv g = {.frames = t->frames};
        /* Every thread creates its instance and device at the same moment,
         * works, and destroys them at the same moment. */
        pthread_barrier_wait(t->start);
        int rc = hv_init(&g, NULL);
        if (rc) {
            t->bad = rc;
            pthread_barrier_wait(t->start); /* keep the others' rounds going */
            continue;
        }
        t->bad |= hv_frames_of_work(&g, 10000 * (uint64_t)(t->index + 1) + (uint64_t)round, "GPU copy");
        pthread_barrier_wait(t->start);
        hv_fini(&g);
    }
    return NULL;
}

/* Several threads, each with its own instance and device, created, used and
 * destroyed at the same moments (as a test runner or a renderer per window
 * does): the layer's per-process state (the trace, the trackers, the
 * handlers) is set up and torn down under races. */
static int instances_threads(hv *h, int argc, char **argv)
{
    (void)argc, (void)argv;
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, INST_THREADS);
    inst_thread t[INST_THREADS];
    pthread_t tid[INST_THREADS];
    for (int i = 0; i < INST_THREADS; i++) {
        t[i] = (inst_thread){&start, h->frames, i, 0};
        if (pthread_create(&tid[i], NULL, inst_thread_main, &t[i]) != 0)
            hv_die("pthread_create failed");
    }
    int bad = 0;
    for (int i = 0; i < INST_THREADS; i++) {
        pthread_join(tid[i], NULL);
        if (t[i].bad)
            bad = t[i].bad == HV_SKIP || t[i].bad == 3 ? t[i].bad : 1;
    }
    pthread_barrier_destroy(&start);
    return bad;
}

/* Ends the process right after its last submit, the way argv[2] says. */
static int exit_after(hv *h, int argc, char **argv)
{
    const char *how = argc > 1 ? argv[1] : "";
    static const char *const ways[] = {"_exit", "exec", "sigterm", "sigint", "crash", "abort", "kill"};
    int known = 0;
    for (size_t i = 0; i < sizeof ways / sizeof ways[0]; i++)
        known |= strcmp(how, ways[i]) == 0;
    if (!known) {
        fprintf(stderr, "usage: %s exit-after (_exit|exec|sigterm|sigint|crash|abort|kill)\n", hv_argv0);
        return 2;
    }
    int rc = hv_init(h, NULL);
    if (rc)
        return rc;
    if (hv_frames_of_work(h, 42, "GPU copy"))
        return 1;
    /* The app's last words: the GPU check passed; what follows ends it. */
    printf("%s: %d submits done, ending with %s\n", hv_argv0, h->frames, how);
    fflush(stdout);
    if (strcmp(how, "_exit") == 0)
        _exit(0);
    if (strcmp(how, "exec") == 0) {
        execl("/bin/true", "true", (char *)NULL);
        return 1;
    }
    if (strcmp(how, "sigterm") == 0)
        raise(SIGTERM);
    if (strcmp(how, "sigint") == 0)
        raise(SIGINT);
    if (strcmp(how, "crash") == 0) {
        /* A wild write the compiler cannot see through. */
        volatile uintptr_t wild = 8;
        *(volatile int *)wild = 1;
    }
    if (strcmp(how, "abort") == 0)
        abort();
    if (strcmp(how, "kill") == 0) {
        /* SIGKILL cannot be caught: what the writer sealed and wrote before
         * is what a trace can promise (sealed 100 ms after the last submit
         * at the latest; a second leaves room for a loaded machine). */
        struct timespec ts = {1, 0};
        nanosleep(&ts, NULL);
        raise(SIGKILL);
    }
    return 1;
}

const hv_behaviour hv_process_behaviours[] = {
    {"baseline", "plain writes and submits, checked on the GPU", baseline},
    {"fork-child", "fork; the child writes its copy of the mapping and exits (exit and _exit)",
     fork_child},
    {"fork-shared", "a forked child writes a page the parent leaves alone (shared where the driver's mapping is)",
     fork_shared},
    {"exec-child", "runs another Vulkan program (this one) as a child with the same environment",
     exec_child},
    {"two-instances", "two instance/device lifetimes in sequence, then two at once", two_instances},
    {"instances-threads", "3 threads each create, use and destroy an instance and device at once, 2 rounds",
     instances_threads},
    {"exit-after", "ends right after its last submit: _exit|exec|sigterm|sigint|crash|abort|kill",
     exit_after},
    {NULL, NULL, NULL},
};
