/* mti_procfd: /proc/self/maps and /proc/self/mem opened once per process
 * and kept (internal.h).
 *
 * Why: an application may sandbox itself with seccomp once it runs, as
 * browsers' GPU processes do (Chromium's raises SIGSYS, and crashes, on an
 * open it did not broker). memtrack looks at the list of mappings at every
 * vkMapMemory and reads guarded memory through /proc/self/mem; opened per
 * call, each of those is an open the sandbox refuses. Opened when the first
 * tracker starts (mti_procfd_warm) and kept, they need only pread and ioctl
 * afterwards.
 *
 * A kept descriptor names the address space of the process that opened it
 * (its /proc/self resolved then): a fork child must not use its parent's.
 * So each is stored with the pid that opened it, and a process with another
 * pid opens its own. And the application may close descriptors it did not
 * open (closefrom, close_range) and get the number back for a file of its
 * own: so each use checks with fstat that the number still names the file
 * opened (device and inode), and opens another where it does not, never
 * closing a number that is not ours any more.
 *
 * Async-signal-safe (fault_report.c reads the list of mappings in a
 * handler): system calls and atomics only. One thread at a time replaces a
 * descriptor; one that finds the replacement busy, or the open refused,
 * gets a private descriptor for its call (mti_procfd_put closes it). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../common/fdpark.h"
#include "internal.h"

typedef struct kept {
    /* fd in the low 32 bits, the pid that opened it above; 0: none. */
    _Atomic uint64_t word;
    /* The file it names, written before word. */
    _Atomic uint64_t dev, ino;
    atomic_flag busy; /* a thread is replacing it */
} kept;

static kept g_kept[MTI_PROCFD_KINDS] = {{0, 0, 0, ATOMIC_FLAG_INIT}, {0, 0, 0, ATOMIC_FLAG_INIT}};
static const char *const g_path[MTI_PROCFD_KINDS] = {"/proc/self/maps", "/proc/self/mem"};

static int sys_open(int kind)
{
    int fd = (int)syscall(SYS_openat, AT_FDCWD, g_path[kind], O_RDONLY | O_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

static uint64_t pack(int fd, long pid) { return (uint32_t)fd | (uint64_t)(uint32_t)pid << 32; }

/* Opens the kept descriptor anew for process `pid`; `old` is the word it
 * replaces (a parent's descriptor, closed when it still names the file:
 * the fork child's copy of it, which nothing of the child uses). Returns the
 * new descriptor, or a negative errno. */
static int replace(kept *k, int kind, uint64_t old, long pid)
{
    if (atomic_flag_test_and_set_explicit(&k->busy, memory_order_acquire))
        return -EBUSY;
    /* Out of the application's numbers, as memtrack's other kept ones. */
    int fd = sys_open(kind);
    fd = fd >= 0 ? mti_fd_park(fd) : fd;
    if (fd >= 0) {
        uint64_t dev, ino;
        if (mti_fd_identity(fd, &dev, &ino) != 0) {
            syscall(SYS_close, fd);
            fd = -EIO;
        } else {
            if (old && (long)(old >> 32) != pid &&
                mti_fd_names((int)(uint32_t)old, atomic_load(&k->dev), atomic_load(&k->ino)))
                syscall(SYS_close, (int)(uint32_t)old);
            atomic_store(&k->dev, dev);
            atomic_store(&k->ino, ino);
            atomic_store_explicit(&k->word, pack(fd, pid), memory_order_release);
        }
    }
    atomic_flag_clear_explicit(&k->busy, memory_order_release);
    return fd;
}

int mti_procfd_get(int kind, int *priv)
{
    kept *k = &g_kept[kind];
    long pid = syscall(SYS_getpid);
    *priv = 0;
    uint64_t w = atomic_load_explicit(&k->word, memory_order_acquire);
    if (w && (long)(w >> 32) == pid) {
        int fd = (int)(uint32_t)w;
        if (mti_fd_names(fd, atomic_load(&k->dev), atomic_load(&k->ino)) &&
            atomic_load_explicit(&k->word, memory_order_acquire) == w)
            return fd;
    }
    int fd = replace(k, kind, w, pid);
    if (fd >= 0)
        return fd;
    /* Being replaced by another thread, or not kept: this call's own. */
    fd = sys_open(kind);
    if (fd >= 0)
        *priv = 1;
    return fd;
}

void mti_procfd_put(int fd, int priv)
{
    if (priv && fd >= 0)
        syscall(SYS_close, fd);
}

void mti_procfd_warm(void)
{
    for (int kind = 0; kind < MTI_PROCFD_KINDS; kind++) {
        int priv, fd = mti_procfd_get(kind, &priv);
        mti_procfd_put(fd, priv);
    }
}

void mti_procfd_fork_child(void)
{
    for (int kind = 0; kind < MTI_PROCFD_KINDS; kind++)
        atomic_flag_clear(&g_kept[kind].busy);
}
