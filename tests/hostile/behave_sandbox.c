/* Behaviours: the application sandboxes itself with seccomp after its
 * Vulkan start, as browsers' GPU processes do (Chromium's, Firefox's): from
 * then on only the system calls a GPU process needs are allowed, to every
 * thread (SECCOMP_FILTER_FLAG_TSYNC, memtrack's threads included), and the
 * application goes on allocating, mapping, writing and submitting, makes a
 * second device, then exits normally (the trace is finished
 * inside the sandbox too).
 *
 *   seccomp-eperm  every other call fails with EPERM (a sandbox that
 *                  refuses quietly, or a broker that refuses the path):
 *                  memtrack must fall back, never lose a write
 *                  (skipped where the driver itself cannot allocate so:
 *                  NVIDIA's opens its device nodes)
 *   seccomp-trap   every other call raises SIGSYS, as in Chromium, whose
 *                  handler crashes the process; here the handler notes the
 *                  call and the object that made it, and makes it return
 *                  EPERM; one made by memtrack's objects fails the run. Opens
 *                  of paths under /dev/ are brokered, as Chromium's broker
 *                  opens the GPU's device nodes: the handler opens them. A
 *                  thread that blocks SIGSYS (most of memtrack's do) is
 *                  killed by it, as in Chromium. So a capture must make no
 *                  call a GPU sandbox refuses once the application runs:
 *                  every descriptor, thread and helper it needs is set up
 *                  before. (Others make some: the validation layer writes
 *                  its shader cache at vkDestroyDevice, the loader and
 *                  lavapipe open files for a second device, glibc's malloc
 *                  counts CPUs in /sys; refused alike, not counted;
 *                  HV_SANDBOX_FRAMES=1 prints every refused call's
 *                  backtrace.)
 *
 * The allow list is what such a sandbox gives a GPU process: memory, threads
 * (clone with CLONE_THREAD; a fork gets EPERM, a spawn, CLONE_VM without
 * CLONE_THREAD, is refused as the variant refuses, clone3 gets ENOSYS so
 * that glibc falls back to clone), futexes, signals, time, I/O on descriptors it
 * already has, every ioctl (the GPU's), memfd_create and ftruncate (shared
 * memory). Refused: opening files (Chromium's broker opens only the paths
 * its policy lists), fork/exec, userfaultfd, pidfd_open, sockets,
 * process_vm_*, ptrace, io_uring. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "hv.h"

/* System calls a GPU process's sandbox allows (x86-64 numbers, from the C
 * library's headers). */
static const int g_allowed[] = {
    SYS_read, SYS_write, SYS_readv, SYS_writev, SYS_pread64, SYS_pwrite64, SYS_preadv, SYS_pwritev,
    SYS_lseek, SYS_close, SYS_fstat, SYS_newfstatat, SYS_statx, SYS_fcntl, SYS_dup, SYS_dup2, SYS_dup3,
    SYS_mmap, SYS_munmap, SYS_mprotect, SYS_madvise, SYS_mremap, SYS_brk, SYS_msync, SYS_mincore,
    SYS_futex, SYS_set_robust_list, SYS_get_robust_list, SYS_rseq, SYS_set_tid_address, SYS_exit,
    SYS_exit_group, SYS_rt_sigaction, SYS_rt_sigprocmask, SYS_rt_sigreturn, SYS_sigaltstack,
    SYS_rt_sigtimedwait, SYS_tgkill, SYS_tkill, SYS_getpid, SYS_gettid, SYS_getppid, SYS_getuid,
    SYS_geteuid, SYS_getgid, SYS_getegid, SYS_getresuid, SYS_getresgid, SYS_clock_gettime,
    SYS_clock_getres, SYS_gettimeofday, SYS_time, SYS_nanosleep, SYS_clock_nanosleep, SYS_sched_yield,
    SYS_sched_getaffinity, SYS_getcpu, SYS_poll, SYS_ppoll, SYS_select, SYS_pselect6, SYS_epoll_wait,
    SYS_epoll_pwait, SYS_epoll_ctl, SYS_eventfd2, SYS_pipe2, SYS_ioctl, SYS_memfd_create, SYS_ftruncate,
    SYS_fallocate, SYS_fsync, SYS_fdatasync, SYS_getrandom, SYS_prctl, SYS_uname, SYS_sysinfo,
    SYS_getrlimit, SYS_prlimit64, SYS_recvmsg, SYS_sendmsg, SYS_recvfrom, SYS_sendto, SYS_shutdown,
    SYS_membarrier, SYS_restart_syscall, SYS_sched_getparam, SYS_sched_getscheduler, SYS_getpriority};

/* SIGSYS (seccomp-trap): the handler stores the call and the object that
 * made it, found there: the layers and the driver are unloaded by the time
 * the run reports (dladdr in a handler is the test's licence, not a
 * library's). */
#define MAX_TRAPPED 64
typedef struct trapped {
    int nr;
    char maker[64];
} trapped;
static _Atomic int g_ntrapped;
static int g_print_frames;
static trapped g_trapped[MAX_TRAPPED];

/* The object that made the call: the first frame past the handler and the
 * C and C++ runtimes. */
static void find_maker(char *out, size_t size)
{
    void *frames[24];
    /* glibc's unwinder, loaded before the sandbox (warm-up in sandboxed()),
     * steps through the signal frame. */
    int depth = backtrace(frames, 24);
    if (g_print_frames) /* HV_SANDBOX_FRAMES=1: the whole backtrace, to find the caller */
        backtrace_symbols_fd(frames, depth, 2);
    snprintf(out, size, "?");
    for (int i = 1; i < depth; i++) {
        Dl_info di;
        if (!dladdr(frames[i], &di) || !di.dli_fname)
            continue;
        /* glibc's malloc counts the CPUs (a file in /sys) when a thread
         * first needs an arena past the first ones: the C library's own
         * lazy start, whichever thread's allocation comes first. */
        if (di.dli_sname && strcmp(di.dli_sname, "get_nprocs") == 0) {
            snprintf(out, size, "libc.so.6 (get_nprocs)");
            return;
        }
        const char *base = strrchr(di.dli_fname, '/');
        base = base ? base + 1 : di.dli_fname;
        if (strncmp(base, "libc.so", 7) && strncmp(base, "libstdc++", 9) && strncmp(base, "libgcc_s", 8) &&
            strncmp(base, "linux-vdso", 10) && strncmp(base, "ld-linux", 8) && !strstr(base, "hostile")) {
            snprintf(out, size, "%s", base);
            return;
        }
    }
}

/* The broker (seccomp-trap): as Chromium's opens the GPU's device nodes
 * for its sandboxed GPU process, the handler opens paths under /dev/ (the
 * driver's: NVIDIA's opens /dev/nvidia* for each allocation) through this
 * system call, the one the filter allows by its address. */
extern const char hv_broker_after[];
__attribute__((noinline, noclone)) static long broker_openat(const char *path, long flags, long mode)
{
    long ret;
    register long r10 __asm__("r10") = mode;
    __asm__ volatile("syscall\n"
                     ".globl hv_broker_after\n"
                     "hv_broker_after:\n"
                     : "=a"(ret)
                     : "0"((long)SYS_openat), "D"((long)AT_FDCWD), "S"(path), "d"(flags), "r"(r10)
                     : "rcx", "r11", "memory");
    return ret;
}

static void on_sigsys(int sig, siginfo_t *si, void *ctx)
{
    (void)sig;
    greg_t *r = ((ucontext_t *)ctx)->uc_mcontext.gregs;
    if (si->si_syscall == SYS_openat || si->si_syscall == SYS_open) {
        int at = si->si_syscall == SYS_openat;
        const char *path = (const char *)(at ? r[REG_RSI] : r[REG_RDI]);
        if (path && strncmp(path, "/dev/", 5) == 0) { /* absolute: openat's dirfd plays no part */
            r[REG_RAX] = broker_openat(path, at ? r[REG_RDX] : r[REG_RSI], at ? r[REG_R10] : r[REG_RDX]);
            return;
        }
    }
    int n = atomic_fetch_add(&g_ntrapped, 1);
    if (n < MAX_TRAPPED) {
        g_trapped[n].nr = si->si_syscall;
        find_maker(g_trapped[n].maker, sizeof g_trapped[n].maker);
    }
    /* The refused call returns EPERM, as the other variant's. */
    r[REG_RAX] = -EPERM;
}

/* Installs the filter on every thread. `trap`: SIGSYS instead of EPERM. */
static int sandbox(int trap)
{
    enum { NALLOWED = sizeof g_allowed / sizeof g_allowed[0] };
    const unsigned refuse = trap ? SECCOMP_RET_TRAP : SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA);
    struct sock_filter f[2 * NALLOWED + 32];
    unsigned n = 0;
    f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch));
    f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0);
    f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
    /* The broker's own call, known by its address (trap only). */
    if (trap) {
        uint64_t ip = (uint64_t)(uintptr_t)hv_broker_after;
        f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
                                              offsetof(struct seccomp_data, instruction_pointer));
        f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)ip, 0, 3);
        f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
                                              offsetof(struct seccomp_data, instruction_pointer) + 4);
        f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)(ip >> 32), 0, 1);
        f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    }
    f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
    /* clone, as Chromium's policy has it: a thread is allowed, a fork (no
     * CLONE_VM) refused with EPERM in both variants, anything else (a
     * vfork-like spawn: CLONE_VM without CLONE_THREAD) refused as the
     * variant refuses; clone3: ENOSYS, glibc then uses clone. */
    f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone3, 0, 1);
    f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS);
    f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone, 0, 6);
    f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0]));
    f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, CLONE_THREAD, 0, 1);
    f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, CLONE_VM, 1, 0);
    f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM);
    f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, refuse);
    for (unsigned i = 0; i < NALLOWED; i++) {
        f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)g_allowed[i], 0, 1);
        f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    }
    f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, refuse);
    if (n > sizeof f / sizeof f[0])
        abort(); /* written past f: make f larger */
    struct sock_fprog prog = {.len = (unsigned short)n, .filter = f};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &prog) != 0) {
        fprintf(stderr, "%s: seccomp: %s: skipped\n", hv_argv0, strerror(errno));
        return HV_SKIP;
    }
    return 0;
}

static int sandboxed(hv *h, int trap)
{
    int rc = hv_init(h, NULL);
    if (rc)
        return rc;
    int bad = hv_frames_of_work(h, 1, "GPU copy before the sandbox");
    if (trap) {
        void *warm[4];
        backtrace(warm, 4); /* loads the unwinder now: dlopen opens files */
        g_print_frames = getenv("HV_SANDBOX_FRAMES") != NULL;
        struct sigaction sa = {.sa_sigaction = on_sigsys, .sa_flags = SA_SIGINFO};
        sigaction(SIGSYS, &sa, NULL);
    }
    if ((rc = sandbox(trap)) != 0) {
        hv_fini(h);
        return rc;
    }
    /* A driver that opens files to allocate (NVIDIA's /dev/nvidia*) cannot
     * work in a sandbox that refuses every open without a broker: that is
     * the driver's need, not memtrack's (seccomp-trap brokers /dev/). */
    if (!trap) {
        VkMemoryAllocateInfo mai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                                    .allocationSize = 1u << 16,
                                    .memoryTypeIndex = h->host_type};
        VkDeviceMemory probe;
        if (vkAllocateMemory(h->dev, &mai, NULL, &probe) != VK_SUCCESS) {
            fprintf(stderr, "%s: the driver cannot allocate memory where every open is refused (it opens "
                            "device nodes): skipped; seccomp-trap brokers them\n",
                    hv_argv0);
            hv_fini(h);
            return HV_SKIP;
        }
        vkFreeMemory(h->dev, probe, NULL);
    }
    /* Inside: new memories, mapped, written, submitted; a second device. */
    bad |= hv_frames_of_work(h, 100, "GPU copy in the sandbox");
    hv_mem m, rb;
    hv_alloc(h, &m, 3u << 20, HV_SRC);
    hv_alloc(h, &rb, 3u << 20, HV_DST);
    for (int f = 0; f < h->frames && !bad; f++) {
        hv_write(&m, (VkDeviceSize)f * 4096 * 7, 3 * 4096, 200 + (uint64_t)f);
        hv_unmap(h, &m);
        hv_map(h, &m);
        hv_write(&m, (VkDeviceSize)(2u << 20) + (VkDeviceSize)f * 999, 5000, 300 + (uint64_t)f);
        bad |= hv_gpu_check(h, &m, &rb, "GPU copy of a remapped memory in the sandbox");
    }
    hv_free(h, &m);
    hv_free(h, &rb);
    /* A second device made inside (a renderer that recreates its device
     * after a loss; a new instance cannot be made there: the loader opens
     * its manifests): memtrack's start for it must need nothing the
     * sandbox refuses either. */
    hv g = *h;
    if ((rc = hv_init_device(&g, NULL)) != 0) {
        hv_fini(h);
        return rc;
    }
    bad |= hv_frames_of_work(&g, 400, "GPU copy on a device made in the sandbox");
    bad |= hv_frames_of_work(h, 500, "GPU copy on the first device beside it");
    hv_fini_device(&g);
    hv_fini(h);
    /* Counted: the calls memtrack's objects made. Not counted, the others
     * (said with HV_SANDBOX_FRAMES): the validation layer (under ours in
     * the tests) writes its shader cache at vkDestroyDevice, the driver
     * and the loader open files for a new device, glibc's malloc counts
     * CPUs; all refused alike. */
    int n = atomic_load(&g_ntrapped), counted = 0;
    for (int i = 0; i < n && i < MAX_TRAPPED; i++) {
        const char *who = g_trapped[i].maker;
        if (!strstr(who, "memtrack")) {
            if (g_print_frames)
                fprintf(stderr, "%s: system call %d refused, made by %s (not counted)\n", hv_argv0,
                        g_trapped[i].nr, who);
            continue;
        }
        fprintf(stderr, "%s: system call %d, which the sandbox refuses, made by %s\n", hv_argv0, g_trapped[i].nr,
                who);
        counted++;
    }
    if (counted || n > MAX_TRAPPED) {
        fprintf(stderr, "%s: %d refused system calls in all, %d by memtrack (x86-64 numbers)\n", hv_argv0,
                n, counted);
        bad = 1;
    }
    return bad;
}

static int seccomp_eperm(hv *h, int argc, char **argv)
{
    (void)argc, (void)argv;
    return sandboxed(h, 0);
}

static int seccomp_trap(hv *h, int argc, char **argv)
{
    (void)argc, (void)argv;
    return sandboxed(h, 1);
}

const hv_behaviour hv_sandbox_behaviours[] = {
    {"seccomp-eperm", "sandboxed by seccomp after its start (TSYNC): calls a GPU sandbox refuses fail with EPERM",
     seccomp_eperm},
    {"seccomp-trap", "the same with SIGSYS for them (Chromium's way): a capture must make none", seccomp_trap},
    {NULL, NULL, NULL}};
