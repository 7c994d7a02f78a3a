/* track + interposer: a language runtime that makes its own system calls.
 *
 * Go's runtime reads with its own system call instruction, never through
 * libc, so no wrapper brackets the kernel's write: with the signal backend
 * such a read into a protected page fails with EFAULT in the application.
 * The interposer recognises Go code by the build-id note Go's linker puts
 * into every object (name "Go", type 4) and reports an unbracketed writer
 * (MT_TRACK_UNBRACKETED_RAW) when a tracker attaches; track then protects no
 * signal range and reports every page (exact).
 *
 * This program carries such a note (it is otherwise C) and reads with a raw
 * system call instruction, as Go does. Checked: the tracker says RAW; a
 * signal range is not protected (stats, and the raw read succeeds, where it
 * failed with EFAULT before); each collect reports every page, so a shadow
 * updated from the reports equals the memory. Needs the interposer (77
 * without); x86-64 only (the raw system call is written in its assembly). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "track_child.h"
#include "track_util.h"

#define NP 8

/* The note Go's linker writes (ELF_NOTE_GOBUILDID_TAG); in a PT_NOTE
 * segment, as the linker places every allocated .note section. */
struct go_note {
    uint32_t namesz, descsz, type;
    char name[4];
    char desc[8];
};
__attribute__((section(".note.go.buildid"), aligned(4), used)) static const struct go_note g_note = {
    4, 8, 4, "Go", "rawsys!"};

#if defined(__x86_64__)
/* read(2) as Go's runtime makes it: the instruction itself, no libc. */
static long raw_read(int fd, void *buf, size_t n)
{
    long ret;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "0"((long)SYS_read), "D"((long)fd), "S"(buf), "d"(n)
                     : "rcx", "r11", "memory");
    return ret;
}

int main(void)
{
    if (!tc_need_interposer())
        return 77;
    size_t ps = tu_page();
    mt_tracker_opts to = {.backend = MT_TRACK_SIGNAL};
    mt_tracker *t;
    MT_CHECK_OK(mt_tracker_create(&to, &t));
    MT_CHECK(mt_track_unbracketed_writers() & MT_TRACK_UNBRACKETED_RAW);

    unsigned char *m = tu_map(NP * ps);
    mt_range_opts ro = {.backend = MT_TRACK_SIGNAL};
    mt_range_id id;
    MT_CHECK_OK(mt_tracker_add(t, m, NP * ps, &ro, &id));
    mt_range_stats st;
    MT_CHECK_OK(mt_tracker_stats(t, id, &st));
    MT_CHECK_INT_EQ(st.not_protected, 1);

    /* A raw read across pages 2 and 3: the kernel writes them itself. */
    int p[2];
    MT_CHECK(pipe(p) == 0);
    unsigned char msg[256], *at = m + 3 * ps - sizeof msg / 2;
    for (size_t i = 0; i < sizeof msg; i++)
        msg[i] = (unsigned char)(i * 7 + 1);
    MT_CHECK(write(p[1], msg, sizeof msg) == (ssize_t)sizeof msg);
    long got = raw_read(p[0], at, sizeof msg);
    if (got < 0)
        fprintf(stderr, "raw read into the range: %s\n", strerror((int)-got));
    MT_CHECK(got == (long)sizeof msg && memcmp(at, msg, sizeof msg) == 0);
    m[6 * ps] = 9; /* and the application's own write */

    /* Every page on each collect: a shadow kept from the reports is exact. */
    unsigned char *shadow = calloc(NP, ps);
    for (int pass = 0; pass < 2; pass++) {
        mt_dirty_run runs[NP];
        long n = mt_tracker_collect(t, id, runs, NP);
        MT_CHECK(n >= 1);
        size_t pages = 0;
        for (long i = 0; i < n; i++) {
            memcpy(shadow + runs[i].offset, m + runs[i].offset, runs[i].length);
            pages += runs[i].length / ps;
        }
        MT_CHECK_INT_EQ(pages, NP);
        MT_CHECK(memcmp(shadow, m, NP * ps) == 0);
    }
    free(shadow);
    close(p[0]);
    close(p[1]);
    MT_CHECK_OK(mt_tracker_remove(t, id));
    mt_tracker_destroy(t);
    munmap(m, NP * ps);
    (void)g_note;
    puts("track Go-style raw system calls into tracked memory (interposer): ok");
    return 0;
}
#else
int main(void)
{
    (void)g_note;
    puts("SKIP: the raw system call is written for x86-64");
    return 77;
}
#endif
