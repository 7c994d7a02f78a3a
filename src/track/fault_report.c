/* One line on a fault that is about to kill the process
 * (mt_track_set_fault_report): which signal and why, the address, whether it
 * lies in memory a tracker covers, and the instruction as module+offset.
 *
 * Why: a process that dies of SIGSEGV while memtrack write-protects its
 * pages raises the question whether memtrack caused it. The kernel's core
 * answers it where cores are kept; this line answers it everywhere, before
 * the default action erases the evidence.
 *
 * Async-signal-safe: stack buffers, system calls (sigpending and
 * sigtimedwait for SIGPIPE, write_quietly), no allocation, no stdio, no
 * dladdr (it takes the loader's lock, which the faulting thread may hold).
 * The module comes from /proc/self/maps (mti_vma_at). */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>

#include "internal.h"

static _Atomic int g_report_fd = -1;

void mt_track_set_fault_report(int fd)
{
    atomic_store_explicit(&g_report_fd, fd < 0 ? -1 : fd, memory_order_relaxed);
}

typedef struct line {
    char s[512];
    size_t n;
} line;

static void put(line *l, const char *t)
{
    while (*t && l->n < sizeof l->s - 1)
        l->s[l->n++] = *t++;
}

static void put_hex(line *l, uintptr_t v)
{
    char d[2 + 2 * sizeof v];
    int k = (int)sizeof d;
    do {
        d[--k] = "0123456789abcdef"[v & 15];
        v >>= 4;
    } while (v && k > 2);
    d[--k] = 'x';
    d[--k] = '0';
    for (; k < (int)sizeof d && l->n < sizeof l->s - 1; k++)
        l->s[l->n++] = d[k];
}

static const char *code_text(int sig, int code)
{
    if (code <= 0)
        return "sent by a process";
    if (sig == SIGSEGV)
        switch (code) {
        case SEGV_MAPERR: return "address not mapped";
        case SEGV_ACCERR: return "access not allowed by the page's protection";
#ifdef SEGV_PKUERR
        case SEGV_PKUERR: return "protection key";
#endif
        default: break;
        }
    if (sig == SIGBUS)
        switch (code) {
        case BUS_ADRALN: return "misaligned address";
        case BUS_ADRERR: return "no such physical address (a file mapped past its end?)";
        case BUS_OBJERR: return "object-specific hardware error";
        default: break;
        }
    return "other cause";
}

static uintptr_t fault_pc(const void *uctx)
{
    if (!uctx)
        return 0;
    const ucontext_t *uc = uctx;
#if defined(__x86_64__)
    return (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
#elif defined(__i386__)
    return (uintptr_t)uc->uc_mcontext.gregs[REG_EIP];
#elif defined(__aarch64__)
    return (uintptr_t)uc->uc_mcontext.pc;
#else
    (void)uc;
    return 0;
#endif
}

/* Appends where pc is, as the base name of the file mapped there and pc's
 * offset in it (mti_vma_at reads /proc/self/maps). */
static void put_module(line *l, uintptr_t pc)
{
    char path[256];
    uint64_t off;
    int rc = mti_vma_at(pc, &off, path, sizeof path);
    if (rc == -ENOENT) {
        put(l, "(in no mapping)");
        return;
    }
    if (rc) {
        put(l, "(/proc/self/maps unreadable)");
        return;
    }
    if (!path[0]) {
        put(l, "an anonymous mapping"); /* generated code: no offset means anything */
        return;
    }
    const char *name = strrchr(path, '/');
    put(l, name ? name + 1 : path);
    put(l, "+");
    put_hex(l, (uintptr_t)off);
}

/* Whether addr lies in a range some tracker covers. */
static int in_tracked(uintptr_t addr)
{
    const mt_sig_entry *e;
    uint32_t n;
    unsigned tok = mti_sigtable_enter(&e, &n);
    uint32_t i = mti_sigtable_first_ending_after(e, n, addr);
    int in = i < n && e[i].start <= addr;
    mti_sigtable_leave(tok);
    return in;
}

/* Writes what it can of s. A write into a pipe nobody reads raises SIGPIPE,
 * held pending while memtrack's handler runs (its sa_mask blocks every
 * asynchronous signal): one raised here is taken back, so that the process
 * still dies of its fault, with the status its parent would have seen. */
static void write_quietly(int fd, const char *s, size_t n)
{
    sigset_t before, after;
    int had_pipe = sigpending(&before) != 0 || sigismember(&before, SIGPIPE);
    for (size_t done = 0; done < n;) {
        ssize_t w = write(fd, s + done, n - done);
        if (w <= 0)
            break;
        done += (size_t)w;
    }
    if (had_pipe || sigpending(&after) != 0 || !sigismember(&after, SIGPIPE))
        return;
    sigset_t pipe_only;
    sigemptyset(&pipe_only);
    sigaddset(&pipe_only, SIGPIPE);
    struct timespec now = {0, 0};
    sigtimedwait(&pipe_only, NULL, &now);
}

void mti_fault_report(int sig, const siginfo_t *si, const void *uctx)
{
    int fd = atomic_load_explicit(&g_report_fd, memory_order_relaxed);
    if (fd < 0 || !si)
        return;
    int saved = errno;
    line l = {.n = 0};
    put(&l, "memtrack: the process dies of ");
    put(&l, sig == SIGSEGV ? "SIGSEGV" : sig == SIGBUS ? "SIGBUS" : "a fault");
    put(&l, " (");
    put(&l, code_text(sig, si->si_code));
    put(&l, ") at address ");
    uintptr_t addr = (uintptr_t)si->si_addr;
    put_hex(&l, addr);
    put(&l, in_tracked(addr) ? ", inside memory memtrack tracks (not a tracked write)"
                             : ", outside any memory memtrack tracks");
    uintptr_t pc = fault_pc(uctx);
    if (pc) {
        put(&l, "; instruction at ");
        put_hex(&l, pc);
        put(&l, " in ");
        put_module(&l, pc);
    }
    l.s[l.n++] = '\n'; /* put keeps a byte for it */
    write_quietly(fd, l.s, l.n);
    errno = saved;
}
