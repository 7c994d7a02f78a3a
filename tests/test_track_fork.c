/* track: fork(). The child inherits the protections and (signal backend)
 * the handler; its writes to tracked pages must not crash it and must not
 * show up in the parent. The parent keeps tracking exactly, before and after
 * the child ran. */
#include <sys/wait.h>

#include "track_util.h"

static void run(mt_track_backend b)
{
    size_t ps = tu_page(), np = 16;
    unsigned char *m = tu_map(np * ps);
    mt_tracker_opts o = {.backend = b};
    mt_tracker *t;
    MT_CHECK_OK(mt_tracker_create(&o, &t));
    mt_range_id id;
    MT_CHECK_OK(mt_tracker_add(t, m, np * ps, NULL, &id));
    m[1 * ps] = 1; /* before the fork, not yet collected */

    fflush(stdout);
    pid_t pid = fork();
    MT_CHECK(pid >= 0);
    if (pid == 0) {
        /* Child: write tracked pages, including one the parent wrote. */
        for (size_t p = 2; p < np; p += 3)
            m[p * ps + 5] = 0xc1;
        m[1 * ps + 1] = 0xc1;
        for (size_t p = 2; p < np; p += 3)
            if (m[p * ps + 5] != 0xc1)
                _exit(4);
        _exit(m[1 * ps] == 1 ? 0 : 5);
    }
    int st;
    MT_CHECK(waitpid(pid, &st, 0) == pid);
    MT_CHECK(WIFEXITED(st));
    MT_CHECK_INT_EQ(WEXITSTATUS(st), 0);

    m[5 * ps] = 2; /* after the child ran */
    /* The child's writes are not ours: memory is copied on write. */
    MT_CHECK_INT_EQ(m[2 * ps + 5], 0);
    MT_CHECK_INT_EQ(m[1 * ps + 1], 0);
    mt_dirty_run runs[8];
    MT_CHECK_INT_EQ(mt_tracker_collect(t, id, runs, 8), 2);
    MT_CHECK_UINT_EQ(runs[0].offset, 1 * ps);
    MT_CHECK_UINT_EQ(runs[0].length, ps);
    MT_CHECK_UINT_EQ(runs[1].offset, 5 * ps);
    MT_CHECK_UINT_EQ(runs[1].length, ps);
    /* ...and keeps tracking afterwards. */
    m[2 * ps] = 3;
    m[15 * ps] = 3;
    MT_CHECK_INT_EQ(mt_tracker_collect(t, id, runs, 8), 2);
    MT_CHECK_UINT_EQ(runs[0].offset, 2 * ps);
    MT_CHECK_UINT_EQ(runs[1].offset, 15 * ps);
    MT_CHECK_INT_EQ(mt_tracker_collect(t, id, runs, 8), 0);
    mt_tracker_destroy(t);
    munmap(m, np * ps);
    printf("  %s: parent tracking exact across fork, child wrote safely\n", mt_track_backend_name(b));
}

int main(void)
{
    mt_track_backend be[2];
    int nb = tu_backends(be);
    for (int i = 0; i < nb; i++)
        run(be[i]);
    puts("track fork: ok");
    return 0;
}
