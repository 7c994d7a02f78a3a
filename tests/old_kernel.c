/* mt-old-kernel CMD [ARGS]: runs CMD as on the kernels users have (Debian
 * 12's 6.1, anything before 6.7): userfaultfd without asynchronous write
 * protection (UFFDIO_API refuses the features memtrack asks for with
 * EINVAL, as 6.1 refuses feature bits it does not know), no PAGEMAP_SCAN
 * and no PROCMAP_QUERY (6.7 and 6.11: the ioctls do not exist there,
 * ENOTTY; without the latter, track reads /proc/self/maps' text). A
 * seccomp filter does it, and every child and exec inherits it, so a whole
 * `memtrack record` session, its helper processes included, sees the old
 * kernel. Exits 77 where seccomp filters cannot be installed. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/fs.h>
#include <linux/seccomp.h>
#include <linux/userfaultfd.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
/* Debian 12's headers predate it: struct pm_scan_arg is 12 u64s. */
#ifndef PAGEMAP_SCAN
#define PAGEMAP_SCAN _IOWR('f', 16, char[96])
#endif
/* struct procmap_query is 13 u64s. */
#ifndef PROCMAP_QUERY
#define PROCMAP_QUERY _IOWR('f', 17, char[104])
#endif
int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s CMD [ARGS]\n", argv[0]);
        return 2;
    }
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_ioctl, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[1])),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)UFFDIO_API, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EINVAL),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)PAGEMAP_SCAN, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOTTY),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)PROCMAP_QUERY, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOTTY),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {.len = sizeof f / sizeof f[0], .filter = f};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog)) {
        perror("mt-old-kernel: seccomp");
        return 77;
    }
    execvp(argv[1], argv + 1);
    perror(argv[1]);
    return 127;
}
