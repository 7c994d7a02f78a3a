/* track: mt_track_set_fault_report. A child process tracks memory with the
 * signal backend (memtrack's handler installed), writes it (tracked writes:
 * nothing reported), then dies of a fault that is not a tracked write; the
 * parent reads what the child wrote to a pipe and checks the child died of
 * that signal:
 *  (a) a store through a near-NULL pointer: SIGSEGV, address not mapped,
 *      address 0x8, outside tracked memory, the instruction in this
 *      program's file;
 *  (b) a read of a page inside a tracked range that the application had made
 *      PROT_NONE before it was tracked: SIGSEGV, not allowed by the
 *      protection, inside tracked memory;
 *  (c) a file mapping read past the file's end: SIGBUS;
 *  (d) the report turned off (-1): the same death as (a), nothing written;
 *  (e) the report written into a pipe nobody reads: the child still dies
 *      of SIGSEGV, not of the SIGPIPE the write raised. */
#define _GNU_SOURCE
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "track_util.h"

enum { NULL_STORE, APP_PROT_NONE, PAST_EOF, REPORT_OFF, BROKEN_PIPE };

static void child(int how, int fd)
{
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core); /* dying is the test: no core */
    /* A sanitizer's runtime installs handlers of its own, which would be
     * next in memtrack's chain and take the faults: the default is. */
    signal(SIGSEGV, SIG_DFL);
    signal(SIGBUS, SIG_DFL);
    size_t ps = tu_page();
    unsigned char *m = tu_map(4 * ps);
    if (how == APP_PROT_NONE)
        MT_CHECK_OK(mprotect(m + 2 * ps, ps, PROT_NONE));
    mt_tracker_opts o = {.backend = MT_TRACK_SIGNAL};
    mt_tracker *t;
    MT_CHECK_OK(mt_tracker_create(&o, &t));
    mt_range_id id;
    MT_CHECK_OK(mt_tracker_add(t, m, 4 * ps, NULL, &id));
    if (how == BROKEN_PIPE) {
        int p[2];
        MT_CHECK_OK(pipe(p));
        close(p[0]);
        fd = p[1];
    }
    mt_track_set_fault_report(how == REPORT_OFF ? -1 : fd);
    m[0] = 1; /* tracked writes: handled, not reported */
    m[ps] = 2;
    mt_dirty_run runs[4];
    MT_CHECK(mt_tracker_collect(t, id, runs, 4) == 1);
    switch (how) {
    case NULL_STORE:
    case REPORT_OFF:
    case BROKEN_PIPE: {
        volatile int *volatile p = (volatile int *)8;
        *p = 1;
        break;
    }
    case APP_PROT_NONE: {
        volatile unsigned char *p = m + 2 * ps + 5;
        (void)*p;
        break;
    }
    case PAST_EOF: {
        int f = memfd_create("fault-report", 0);
        MT_CHECK(f >= 0);
        MT_CHECK_OK(ftruncate(f, (off_t)ps));
        volatile unsigned char *p = mmap(NULL, 2 * ps, PROT_READ, MAP_SHARED, f, 0);
        MT_CHECK(p != MAP_FAILED);
        (void)p[ps + 3];
        break;
    }
    }
    _exit(3); /* survived: the parent fails */
}

/* Runs case how in a child; returns what it wrote, checks it died of sig. */
static void run(int how, int sig, char *out, size_t cap)
{
    int pfd[2];
    MT_CHECK_OK(pipe(pfd));
    fflush(NULL);
    pid_t pid = fork();
    MT_CHECK(pid >= 0);
    if (pid == 0) {
        close(pfd[0]);
        child(how, pfd[1]);
    }
    close(pfd[1]);
    size_t n = 0;
    ssize_t r;
    while (n < cap - 1 && (r = read(pfd[0], out + n, cap - 1 - n)) > 0)
        n += (size_t)r;
    out[n] = 0;
    close(pfd[0]);
    int st;
    MT_CHECK(waitpid(pid, &st, 0) == pid);
    if (!WIFSIGNALED(st) || WTERMSIG(st) != sig) {
        fprintf(stderr, "case %d: status 0x%x, wanted death by signal %d; report: %s\n", how, st, sig, out);
        MT_CHECK(0);
    }
    printf("case %d: %s", how, n ? out : "(nothing)\n");
}

static void has(const char *s, const char *want)
{
    if (!strstr(s, want)) {
        fprintf(stderr, "report lacks \"%s\": %s\n", want, s);
        MT_CHECK(0);
    }
}

int main(int argc, char **argv)
{
    (void)argc;
    const char *self = strrchr(argv[0], '/');
    self = self ? self + 1 : argv[0];
    char here[256], s[1024];
    snprintf(here, sizeof here, "in %s+0x", self);

    run(NULL_STORE, SIGSEGV, s, sizeof s);
    has(s, "memtrack: the process dies of SIGSEGV (address not mapped) at address 0x8, "
           "outside any memory memtrack tracks; instruction at 0x");
    has(s, here);
    MT_CHECK(strchr(s, '\n') == s + strlen(s) - 1); /* one line */

    run(APP_PROT_NONE, SIGSEGV, s, sizeof s);
    has(s, "SIGSEGV (access not allowed by the page's protection)");
    has(s, "inside memory memtrack tracks (not a tracked write)");
    has(s, here);

    run(PAST_EOF, SIGBUS, s, sizeof s);
    has(s, "memtrack: the process dies of SIGBUS (no such physical address");
    has(s, "outside any memory memtrack tracks");
    has(s, here);

    run(REPORT_OFF, SIGSEGV, s, sizeof s);
    MT_CHECK(s[0] == 0);

    run(BROKEN_PIPE, SIGSEGV, s, sizeof s);
    MT_CHECK(s[0] == 0);
    printf("test_track_fault_report: ok\n");
    return 0;
}
