/* The capture session: configuration, the process's one trace (which file,
 * its lifetime, records through a lifetime lock), statistics, warnings and
 * the status line. See session.h. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../src/common/fdpark.h"
#include "budget.h"
#include "process.h"
#include "session.h"

enum { S_NONE, S_OPEN, S_FAILED, S_PASSIVE, S_FORKED, S_CLOSED };

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static lt_config g_cfg;
static mt_tracker *g_tracker;
static _Atomic int g_state;
static pthread_mutex_t g_open_lock = PTHREAD_MUTEX_INITIALIZER;
/* Read-held around every record; write-held to detach the writer at exit. */
static pthread_rwlock_t g_wlock = PTHREAD_RWLOCK_INITIALIZER;
static mt_trace_writer *g_writer; /* under g_wlock */
static _Atomic(mt_trace_writer *) g_writer_raw; /* for the last-words path only */
static char *g_path;              /* the trace this process writes */
static _Atomic uint64_t g_next_id, g_packets_seen, g_unmap_packets_seen; /* the last two: test hook */
static _Atomic uint64_t g_stats[LT_ST_COUNT], g_capture_max, g_extra_peak;
static _Atomic uint64_t g_last_progress;
/* Capture window: see session.h. */
static _Atomic int g_window_open = 1;
static _Atomic uint64_t g_window_epoch, g_presents;
static _Atomic unsigned g_trigger_requests, g_trigger_seen;
static pthread_mutex_t g_window_lock = PTHREAD_MUTEX_INITIALIZER;

uint64_t lt_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void lt_warn_once(const char *key, const char *fmt, ...)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static char seen[128][48];
    static int nseen;
    pthread_mutex_lock(&lock);
    int fresh = 1;
    for (int i = 0; i < nseen && fresh; i++)
        fresh = strncmp(seen[i], key, sizeof seen[i] - 1) != 0;
    if (fresh && nseen < 128)
        snprintf(seen[nseen++], sizeof seen[0], "%s", key);
    pthread_mutex_unlock(&lock);
    if (!fresh)
        return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "memtrack: %s\n", msg);
}

/* The status file, opened at the first line and kept: an application may
 * sandbox itself once it runs (seccomp, as browsers' GPU processes do) and
 * refuse opens, and the line that says the trace was closed comes at its
 * exit. A fork child shares it (appends, each line with its pid). Checked
 * with fstat before each use: the application may have closed the number
 * and got it back for a file of its own (that one is never written or
 * closed; the status file is opened again). Lock-free: two threads that
 * open it at once keep one descriptor, the other is closed. */
static _Atomic int g_status_fd = -1;
static _Atomic uint64_t g_status_dev, g_status_ino;

static int status_fd(void)
{
    int fd = atomic_load(&g_status_fd);
    if (mti_fd_names(fd, atomic_load(&g_status_dev), atomic_load(&g_status_ino)))
        return fd;
    int nfd = open(g_cfg.status_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (nfd < 0)
        return -1;
    nfd = mti_fd_park(nfd); /* out of the application's numbers */
    uint64_t dev, ino;
    if (mti_fd_identity(nfd, &dev, &ino) != 0) {
        close(nfd);
        return -1;
    }
    atomic_store(&g_status_dev, dev);
    atomic_store(&g_status_ino, ino);
    if (!atomic_compare_exchange_strong(&g_status_fd, &fd, nfd)) {
        close(nfd); /* another thread's is kept: appends through either are the same */
        return fd;
    }
    return nfd;
}

/* One line for `memtrack record` (MEMTRACK_STATUS): appended, so that every
 * process of a session leaves its own. */
static void status_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void status_line(const char *fmt, ...)
{
    if (!g_cfg.status_path)
        return;
    char line[1200];
    int n = snprintf(line, sizeof line, "%d ", (int)getpid());
    va_list ap;
    va_start(ap, fmt);
    n += vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    if (n >= (int)sizeof line - 1)
        n = (int)sizeof line - 2;
    line[n++] = '\n';
    int fd = status_fd();
    if (fd < 0)
        return;
    ssize_t w = write(fd, line, (size_t)n); /* one append: lines of processes never interleave */
    (void)w;
}

static const char *env_get(const char *name, void *arg)
{
    (void)arg;
    return getenv(name);
}

static void env_warn(const char *name, const char *value, const char *expected, void *arg)
{
    (void)arg;
    lt_warn_once(name, "%s=%s is not valid (expected %s): using the default", name, value, expected);
}

static void init_once(void)
{
    if (lt_config_parse(&g_cfg, env_get, env_warn, NULL, (int)getpid()) != 0) {
        lt_warn_once("oom-config", "out of memory reading the configuration: not capturing");
        atomic_store(&g_state, S_PASSIVE);
        return;
    }
    mt_tracker_opts to = {.backend = (mt_track_backend)g_cfg.backend, .max_ranges = 1u << 16};
    int rc = mt_tracker_create(&to, &g_tracker);
    if (rc == MT_EUNSUPPORTED && to.backend == MT_TRACK_UFFD) {
        lt_warn_once("no-uffd", "the uffd tracking backend is not available on this kernel "
                                "(needs Linux >= 6.7): using the signal backend");
        g_cfg.backend = MT_TRACK_SIGNAL;
        to.backend = MT_TRACK_SIGNAL;
        rc = mt_tracker_create(&to, &g_tracker);
    }
    if (rc != 0) {
        g_tracker = NULL;
        lt_warn_once("tracker", "cannot create a tracker (%s): every memory is scanned instead",
                     mt_strerror(rc));
    }
    /* Frames count from 1; a trigger alone starts paused (gfxreconstruct's
     * behaviour), a frame range decides by itself. */
    if (g_cfg.frames_first)
        atomic_store(&g_window_open, g_cfg.frames_first == 1);
    else if (g_cfg.trigger)
        atomic_store(&g_window_open, 0);
    lt_process_init();
}

void lt_session_init(void) { pthread_once(&g_once, init_once); }
const lt_config *lt_cfg(void) { return &g_cfg; }
mt_tracker *lt_tracker(void) { return g_tracker; }
int lt_tracing(void) { return atomic_load_explicit(&g_state, memory_order_acquire) == S_OPEN; }

int lt_session_capturing(void)
{
    int s = atomic_load_explicit(&g_state, memory_order_acquire);
    return s == S_NONE || s == S_OPEN;
}

uint64_t lt_next_id(void) { return atomic_fetch_add_explicit(&g_next_id, 1, memory_order_relaxed) + 1; }

/* ---- which file --------------------------------------------------------------- */

/* NAME.mtrace -> NAME.PID.mtrace (or OUTPUT.PID). */
static char *child_path(const char *out)
{
    size_t n = strlen(out);
    const char *ext = n > 7 && strcmp(out + n - 7, ".mtrace") == 0 ? ".mtrace" : "";
    size_t stem = n - strlen(ext);
    char *p = malloc(n + 32);
    if (p)
        snprintf(p, n + 32, "%.*s.%d%s", (int)stem, out, (int)getpid(), ext);
    return p;
}

/* Opens `path` for this process alone. Returns the fd, -EBUSY when another
 * process of the session has it, or -errno. */
static int claim(const char *path, int exclusive)
{
    int flags = O_WRONLY | O_CREAT | O_CLOEXEC | O_NONBLOCK | (exclusive ? O_EXCL : 0);
    int fd = open(path, flags, 0644);
    if (fd < 0)
        return errno == EEXIST ? -EBUSY : -errno;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return -EINVAL; /* a FIFO, a device, a directory: not a trace file */
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        close(fd);
        return e == EWOULDBLOCK ? -EBUSY : -e;
    }
    /* Locked: only now may the old content go (by hand, the file may be a
     * previous run's trace). */
    if (ftruncate(fd, 0) != 0 || fcntl(fd, F_SETFL, 0) != 0) {
        int e = -errno;
        close(fd);
        return e;
    }
    return fd;
}

static void go_passive(const char *why)
{
    atomic_store(&g_state, S_PASSIVE);
    char comm[64] = "?";
    FILE *f = fopen("/proc/self/comm", "r");
    if (f) {
        if (fgets(comm, sizeof comm, f))
            comm[strcspn(comm, "\n")] = 0;
        fclose(f);
    }
    lt_warn_once("passive", "process %d (%s) uses Vulkan but is not captured: %s", (int)getpid(), comm,
                 why);
    status_line("passive %s", why);
}

void lt_session_open(const mt_trace_kv *meta, size_t nmeta)
{
    lt_session_init();
    pthread_mutex_lock(&g_open_lock);
    if (atomic_load(&g_state) != S_NONE) {
        pthread_mutex_unlock(&g_open_lock);
        return;
    }
    /* Under `memtrack record` the file did not exist before the session:
     * whoever finds it existing came second. By hand, a stale file is the
     * previous run's and is replaced, unless a live process holds it. */
    int exclusive = g_cfg.session != NULL;
    char *path = strdup(g_cfg.output);
    int fd = path ? claim(path, exclusive) : -ENOMEM;
    if (fd == -EBUSY && g_cfg.follow_children) {
        free(path);
        path = child_path(g_cfg.output);
        fd = path ? claim(path, 1) : -ENOMEM;
    }
    if (fd == -EBUSY) {
        free(path);
        go_passive("the trace belongs to another process of this capture (a child gets its own "
                   "trace with memtrack record --follow-children)");
        pthread_mutex_unlock(&g_open_lock);
        return;
    }
    mt_trace_writer *w = NULL;
    int rc = fd;
    if (fd >= 0) {
        /* A submit seals its chunk when 100 ms passed since the last seal,
         * and an idle chunk is sealed after 100 ms: a kill -9 loses at most
         * about that much (a seal costs ~50 us of a compressor's time). */
        mt_trace_writer_opts o = {.meta = meta, .nmeta = nmeta, .seal_interval_ms = 100,
                                  .compression = (mt_trace_compression)g_cfg.compression};
        rc = mt_trace_writer_open_fd(fd, &o, &w);
    }
    if (rc < 0) {
        lt_warn_once("trace-open", "cannot create the trace %s (%s): not capturing",
                     path ? path : g_cfg.output, mt_strerror(rc));
        status_line("error cannot create the trace %s: %s", path ? path : g_cfg.output, mt_strerror(rc));
        free(path);
        atomic_store(&g_state, S_FAILED);
        pthread_mutex_unlock(&g_open_lock);
        return;
    }
    pthread_rwlock_wrlock(&g_wlock);
    g_writer = w;
    pthread_rwlock_unlock(&g_wlock);
    atomic_store(&g_writer_raw, w);
    g_path = path;
    /* Its descriptors are opened now, with the trace's: before any sandbox
     * the application may put on later. */
    lt_budget_init(g_cfg.memory_budget);
    atomic_store_explicit(&g_state, S_OPEN, memory_order_release);
    status_line("trace %s", path);
    if (g_cfg.progress) {
        atomic_store(&g_last_progress, lt_now_ns()); /* first report after 2 s */
        fprintf(stderr, "memtrack: capturing to %s (mode %s%s)\n", path, lt_mode_name(g_cfg.mode),
                g_cfg.verify ? ", verify" : "");
    }
    pthread_mutex_unlock(&g_open_lock);
}

/* ---- the capture window ------------------------------------------------------------ */

int lt_window_open(void) { return atomic_load_explicit(&g_window_open, memory_order_acquire); }
uint64_t lt_window_epoch(void) { return atomic_load_explicit(&g_window_epoch, memory_order_acquire); }

void lt_window_trigger(void) { atomic_fetch_add_explicit(&g_trigger_requests, 1, memory_order_relaxed); }

/* Opens or closes the window (g_window_lock held). */
static void window_set(int open, const char *why)
{
    if (atomic_load(&g_window_open) == open)
        return;
    uint64_t frame = atomic_load(&g_presents) + 1;
    atomic_store_explicit(&g_window_open, open, memory_order_release);
    atomic_fetch_add_explicit(&g_window_epoch, 1, memory_order_acq_rel);
    lt_rec_note(0, open ? "window-open" : "window-close", "capture %s at frame %llu (%s)",
                open ? "starts" : "pauses", (unsigned long long)frame, why);
}

void lt_window_poll(void)
{
    unsigned req = atomic_load_explicit(&g_trigger_requests, memory_order_relaxed);
    if (req == atomic_load_explicit(&g_trigger_seen, memory_order_relaxed))
        return;
    pthread_mutex_lock(&g_window_lock);
    unsigned seen = atomic_load(&g_trigger_seen);
    req = atomic_load(&g_trigger_requests);
    atomic_store(&g_trigger_seen, req);
    if ((req - seen) % 2) /* an even number of toggles changes nothing */
        window_set(!atomic_load(&g_window_open), "trigger signal");
    pthread_mutex_unlock(&g_window_lock);
}

void lt_window_present(void)
{
    uint64_t frame = atomic_fetch_add(&g_presents, 1) + 2; /* the frame that begins now */
    if (g_cfg.frames_first) {
        int want = frame >= g_cfg.frames_first && (!g_cfg.frames_last || frame <= g_cfg.frames_last);
        pthread_mutex_lock(&g_window_lock);
        char why[64];
        snprintf(why, sizeof why, "frames %llu-%llu", (unsigned long long)g_cfg.frames_first,
                 (unsigned long long)g_cfg.frames_last);
        int was = atomic_load(&g_window_open);
        window_set(want, g_cfg.frames_last ? why : "frames from");
        pthread_mutex_unlock(&g_window_lock);
        /* The range is over: make the trace complete now, the application
         * may run on for a long time. */
        if (was && !want && g_cfg.frames_last && frame == g_cfg.frames_last + 1)
            lt_session_devices_gone();
    }
    lt_window_poll();
}

/* ---- records --------------------------------------------------------------------- */

static void trace_failed(int rc)
{
    int open = S_OPEN;
    if (!atomic_compare_exchange_strong(&g_state, &open, S_FAILED))
        return;
    /* The writer's -EBADF: the number no longer names the trace (the
     * application closed it and opened a file of its own there). */
    const char *why = rc == -EBADF ? "the application closed the trace's descriptor; nothing was written "
                                     "into the file that now has its number"
                                   : mt_strerror(rc);
    lt_warn_once("trace-error", "writing the trace failed (%s): capture stopped, the trace holds "
                                "what was written before; the application is not affected",
                 why);
    status_line("error writing the trace failed: %s", why);
}

/* Takes the writer for one record; NULL when not tracing (no lock held). */
static mt_trace_writer *rec_begin(void)
{
    if (!lt_tracing())
        return NULL;
    pthread_rwlock_rdlock(&g_wlock);
    if (g_writer && lt_tracing())
        return g_writer;
    pthread_rwlock_unlock(&g_wlock);
    return NULL;
}

static void rec_end(int rc)
{
    pthread_rwlock_unlock(&g_wlock);
    if (rc)
        trace_failed(rc);
}

#define REC(call)                                                                                  \
    do {                                                                                           \
        mt_trace_writer *w_ = rec_begin();                                                         \
        if (w_)                                                                                    \
            rec_end(call);                                                                         \
    } while (0)

void lt_rec_memory(uint64_t id, uint64_t size, uint32_t type_index, uint32_t flags)
{
    REC(mt_trace_write_memory(w_, id, size, type_index, flags));
}

void lt_rec_object(uint64_t id, uint32_t kind, uint64_t size, uint64_t used)
{
    REC(mt_trace_write_object(w_, id, kind, size, used));
}

void lt_rec_bind(uint64_t object, uint64_t memory, uint64_t offset)
{
    REC(mt_trace_write_bind(w_, object, memory, offset));
}

void lt_rec_map(uint64_t memory, uint64_t offset, uint64_t size)
{
    REC(mt_trace_write_map(w_, memory, offset, size));
}

void lt_rec_unmap(uint64_t memory) { REC(mt_trace_write_unmap(w_, memory)); }

int lt_rec_update(uint64_t memory, uint64_t object, uint64_t offset, const void *data, size_t len,
                  int at_unmap)
{
    if (!lt_tracing())
        return 0;
    if (g_cfg.drop_update && at_unmap >= g_cfg.drop_at_unmap &&
        lt_test_kth(g_cfg.drop_at_unmap ? &g_unmap_packets_seen : &g_packets_seen, g_cfg.drop_update))
        return 1; /* test hook: a lost write */
    REC(mt_trace_write_update(w_, memory, object, offset, data, len));
    lt_stat_add(LT_ST_PACKETS, 1);
    lt_stat_add(LT_ST_PACKET_BYTES, (int64_t)len);
    return 0;
}

void lt_rec_hash(uint64_t memory, uint64_t offset, uint64_t size, uint64_t hash)
{
    REC(mt_trace_write_content_hash(w_, memory, offset, size, hash));
    lt_stat_add(LT_ST_HASHES, 1);
}

void lt_rec_submit(uint64_t queue) { REC(mt_trace_write_submit(w_, queue, NULL)); }
void lt_rec_frame(void) { REC(mt_trace_write_frame(w_, NULL)); }
void lt_rec_destroy(uint32_t what, uint64_t id) { REC(mt_trace_write_destroy(w_, what, id)); }
void lt_rec_mode(uint64_t memory, const char *text) { REC(mt_trace_write_mode(w_, memory, text)); }

void lt_rec_mismatch(uint64_t memory, uint64_t object, uint64_t offset, uint64_t length, uint32_t cause,
                     uint64_t running)
{
    REC(mt_trace_write_mismatch(w_, memory, object, offset, length, cause, running));
}

void lt_rec_note(uint64_t id, const char *key, const char *fmt, ...)
{
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    lt_warn_once(key, "%s", text);
    REC(mt_trace_write_annotation(w_, id, text));
}

/* ---- statistics ----------------------------------------------------------------- */

void lt_stat_add(lt_stat s, int64_t v)
{
    uint64_t now = atomic_fetch_add_explicit(&g_stats[s], (uint64_t)v, memory_order_relaxed) + (uint64_t)v;
    if (s == LT_ST_EXTRA_BYTES) {
        uint64_t peak = atomic_load_explicit(&g_extra_peak, memory_order_relaxed);
        while (now > peak && !atomic_compare_exchange_weak(&g_extra_peak, &peak, now))
            ;
    }
}

void lt_stat_max(uint64_t capture_ns)
{
    uint64_t m = atomic_load_explicit(&g_capture_max, memory_order_relaxed);
    while (capture_ns > m && !atomic_compare_exchange_weak(&g_capture_max, &m, capture_ns))
        ;
}

static uint64_t stat_of(lt_stat s) { return atomic_load_explicit(&g_stats[s], memory_order_relaxed); }

uint64_t lt_stat_get(lt_stat s) { return stat_of(s); }

void lt_progress(void)
{
    if (!g_cfg.progress)
        return;
    uint64_t now = lt_now_ns(), last = atomic_load(&g_last_progress);
    if (now - last < 2000000000ull || !atomic_compare_exchange_strong(&g_last_progress, &last, now))
        return;
    fprintf(stderr, "memtrack: %llu submits, %llu frames, %.1f MB captured\n",
            (unsigned long long)stat_of(LT_ST_SUBMITS), (unsigned long long)stat_of(LT_ST_FRAMES),
            (double)stat_of(LT_ST_PACKET_BYTES) / 1e6);
}

static void write_stats(const mt_trace_writer_stats *ws)
{
    if (!g_cfg.stats_path)
        return;
    FILE *f = fopen(g_cfg.stats_path, "w");
    if (!f)
        return;
    fprintf(f,
            "{\"mode\":\"%s\",\"submits\":%llu,\"frames\":%llu,\"capture_ns\":%llu,"
            "\"capture_ns_max\":%llu,\"packets\":%llu,\"packet_bytes\":%llu,\"hashes\":%llu,"
            "\"extra_bytes_peak\":%llu,\"mode_switches\":%llu,\"fallbacks\":%llu,"
            "\"sync_in_ns\":%llu,\"slices\":%llu,\"trace_raw_bytes\":%llu,\"trace_file_bytes\":%llu}\n",
            lt_mode_name(g_cfg.mode), (unsigned long long)stat_of(LT_ST_SUBMITS),
            (unsigned long long)stat_of(LT_ST_FRAMES), (unsigned long long)stat_of(LT_ST_CAPTURE_NS),
            (unsigned long long)atomic_load(&g_capture_max), (unsigned long long)stat_of(LT_ST_PACKETS),
            (unsigned long long)stat_of(LT_ST_PACKET_BYTES), (unsigned long long)stat_of(LT_ST_HASHES),
            (unsigned long long)atomic_load(&g_extra_peak),
            (unsigned long long)stat_of(LT_ST_MODE_SWITCHES), (unsigned long long)stat_of(LT_ST_FALLBACKS),
            (unsigned long long)stat_of(LT_ST_SYNC_IN_NS), (unsigned long long)stat_of(LT_ST_SLICES),
            (unsigned long long)ws->raw_bytes, (unsigned long long)ws->file_bytes);
    fclose(f);
}

/* ---- lifetime --------------------------------------------------------------------- */

void lt_session_devices_gone(void)
{
    /* Make the trace complete as it stands: the process may never come back
     * to Vulkan, and may end in a way that runs no exit handler. */
    mt_trace_writer *w = rec_begin();
    if (w)
        rec_end(mt_trace_writer_checkpoint(w));
}

void lt_session_exit(void)
{
    int s = atomic_load(&g_state);
    if (s != S_OPEN && s != S_FAILED)
        return;
    /* Detach the writer: records in flight on other threads finish first,
     * later ones see no writer. */
    pthread_rwlock_wrlock(&g_wlock);
    mt_trace_writer *w = g_writer;
    g_writer = NULL;
    atomic_store(&g_writer_raw, NULL);
    atomic_store(&g_state, S_CLOSED);
    pthread_rwlock_unlock(&g_wlock);
    if (!w)
        return;
    mt_trace_writer_stats ws;
    mt_trace_writer_stats_get(w, &ws);
    int rc = mt_trace_writer_close(w);
    if (rc) {
        lt_warn_once("trace-close", "closing the trace %s failed: %s", g_path, mt_strerror(rc));
        status_line("error closing the trace failed: %s", mt_strerror(rc));
    } else if (s == S_OPEN) {
        status_line("closed %llu submits", (unsigned long long)ws.submits);
    }
    struct stat sb;
    if (g_path && stat(g_path, &sb) == 0) /* close added the index and trailer */
        ws.file_bytes = (uint64_t)sb.st_size;
    write_stats(&ws);
    if (g_cfg.progress)
        fprintf(stderr, "memtrack: trace %s: %llu submits, %.1f MB of updates\n", g_path,
                (unsigned long long)ws.submits, (double)stat_of(LT_ST_PACKET_BYTES) / 1e6);
}

void lt_session_forked_child(void)
{
    /* Only this thread exists in the child; the parent's other threads may
     * have held these locks at the fork. The writer (its threads and its
     * file offset) belongs to the parent: the child lets go of its copy of
     * the descriptor and touches nothing else. */
    int s = atomic_load(&g_state);
    mt_trace_writer *inherited = atomic_load(&g_writer_raw);
    if (inherited)
        mt_trace_writer_abandon(inherited);
    pthread_rwlock_t fresh = PTHREAD_RWLOCK_INITIALIZER;
    pthread_mutex_t fresh_mutex = PTHREAD_MUTEX_INITIALIZER;
    memcpy(&g_wlock, &fresh, sizeof fresh);
    memcpy(&g_open_lock, &fresh_mutex, sizeof fresh_mutex);
    memcpy(&g_window_lock, &fresh_mutex, sizeof fresh_mutex);
    g_writer = NULL;
    atomic_store(&g_writer_raw, NULL);
    free(g_path);
    g_path = NULL;
    /* A child that follows creates its own trace at its own first device. */
    atomic_store(&g_state, g_cfg.follow_children && (s == S_OPEN || s == S_NONE) ? S_NONE : S_FORKED);
}

void lt_session_last_words(int from_signal)
{
    if (atomic_load(&g_state) != S_OPEN)
        return;
    if (from_signal) {
        /* No locks: the dying thread may hold any of them. The writer's
         * emergency flush takes none and waits at most 1 s for a compressor
         * in the middle of a write. */
        mt_trace_writer *w = atomic_load(&g_writer_raw);
        if (w)
            mt_trace_writer_emergency_flush(w, 1000);
        return;
    }
    mt_trace_writer *w = rec_begin();
    if (w)
        rec_end(mt_trace_writer_checkpoint(w));
}
