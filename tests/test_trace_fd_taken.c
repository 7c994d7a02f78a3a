/* trace: an application that closes the trace's descriptor (one it did not
 * open: closefrom, close_range, a loop over /proc/self/fd) and gets the
 * number back for a file of its own.
 *
 * The writer keeps its descriptor for the trace's life, inside the
 * application when the layer records it. Writing on by number would put
 * trace chunks into the application's file, and closing at the end would
 * close it. Checked: after the swap, the next flush and the close return
 * -EBADF; the application's file is untouched and still open; the trace
 * reads back every submit flushed before the swap. Both for a writer that
 * opened its path and one handed a descriptor (mt_trace_writer_open_fd).
 * Usage: test_trace_fd_taken. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fd_util.h"
#include "memtrack/trace.h"
#include "mt_test.h"
#include "trace_util.h"

static void write_submits(mt_trace_writer *w, int from, int to)
{
    uint8_t data[100];
    memset(data, 0x5c, sizeof data);
    for (int s = from; s < to; s++) {
        mt_trace_write_update(w, 1, 0, (uint64_t)s * 100, data, sizeof data);
        mt_trace_write_submit(w, 0, NULL);
    }
}

static void run(int by_fd)
{
    char path[256], other[256];
    tr_tmp_path(path, sizeof path, by_fd ? "taken-fd" : "taken");
    tr_tmp_path(other, sizeof other, "taken-app");
    mt_trace_writer *w;
    mt_trace_writer_opts o = {.chunk_size = 1024};
    if (by_fd) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        MT_CHECK(fd >= 0);
        MT_CHECK_OK(mt_trace_writer_open_fd(fd, &o, &w));
    } else {
        MT_CHECK_OK(mt_trace_writer_open(path, &o, &w));
    }
    MT_CHECK_OK(mt_trace_write_memory(w, 1, 1 << 20, 0, 0));
    write_submits(w, 0, 20);
    MT_CHECK_OK(mt_trace_writer_flush(w));
    /* The application closes the trace's number and takes it back. */
    char real[512];
    MT_CHECK(realpath(path, real));
    int num;
    MT_CHECK_INT_EQ(fd_numbers_naming(real, &num, 1), 1);
    MT_CHECK(close(num) == 0);
    int mine = open(other, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    MT_CHECK(mine >= 0);
    MT_CHECK(dup2(mine, num) == num);
    close(mine);
    write_submits(w, 20, 40);
    MT_CHECK_INT_EQ(mt_trace_writer_flush(w), -EBADF);
    MT_CHECK_INT_EQ(mt_trace_writer_close(w), -EBADF);
    /* Its file: still open under that number, and empty. */
    struct stat st, st2;
    MT_CHECK(fstat(num, &st) == 0);
    MT_CHECK(stat(other, &st2) == 0);
    MT_CHECK(st.st_ino == st2.st_ino && st.st_dev == st2.st_dev);
    MT_CHECK_INT_EQ((long long)st.st_size, 0);
    close(num);
    /* The trace: what was flushed before. */
    mt_trace_reader *r;
    MT_CHECK_OK(mt_trace_reader_open(path, NULL, &r));
    mt_trace_info info;
    mt_trace_reader_info(r, &info);
    MT_CHECK(info.submits >= 20);
    mt_trace_reader_close(r);
    printf("%s: flush and close -EBADF, the application's file untouched, %llu submits read back\n",
           by_fd ? "open_fd" : "open", (unsigned long long)info.submits);
    unlink(path);
    unlink(other);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    run(0);
    run(1);
    printf("ok\n");
    return 0;
}
