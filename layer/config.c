/* Process-wide capture context: configuration from the environment, the trace
 * file's lifetime, stable ids, one-time warnings, progress and statistics.
 *
 * Environment (set by `memtrack record`, or by hand):
 *   MEMTRACK_OUTPUT    trace path (default memtrack-<pid>.mtrace)
 *   MEMTRACK_MODE      auto | guard | shadow | scan | copy (default auto)
 *   MEMTRACK_VERIFY    1: a content hash of every exposed memory at each submit
 *   MEMTRACK_PROGRESS  1: submits and MB captured on stderr every 2 s
 *   MEMTRACK_STATS     path: capture statistics as JSON when the trace closes
 *   MEMTRACK_MERGE_GAP diff merge gap in bytes (default: diff's default)
 *   MEMTRACK_TEST_DROP_UPDATE  k: drop the k-th update packet (tests that
 *                      `memtrack verify` detects a lost write) */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "layer.h"

lt_context lt_ctx = {.lock = PTHREAD_MUTEX_INITIALIZER};
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static const char *const g_mode_names[LT_NMODES] = {"auto", "guard", "shadow", "scan", "copy"};

const char *lt_mode_name(lt_mode m) { return m < LT_NMODES ? g_mode_names[m] : "unknown"; }

int lt_mode_parse(const char *s)
{
    for (int i = 0; i < LT_NMODES; i++)
        if (s && strcmp(s, g_mode_names[i]) == 0)
            return i;
    return -1;
}

uint64_t lt_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void lt_warn_once(const char *key, const char *fmt, ...)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static const char *seen[64];
    static int nseen;
    pthread_mutex_lock(&lock);
    int fresh = 1;
    for (int i = 0; i < nseen; i++)
        if (strcmp(seen[i], key) == 0)
            fresh = 0;
    if (fresh && nseen < 64)
        seen[nseen++] = key;
    pthread_mutex_unlock(&lock);
    if (!fresh)
        return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "memtrack: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
}

static void load_once(void)
{
    const char *v = getenv("MEMTRACK_MODE");
    lt_ctx.mode = LT_AUTO;
    if (v && *v) {
        int m = lt_mode_parse(v);
        if (m < 0)
            lt_warn_once("bad-mode", "unknown MEMTRACK_MODE '%s': using auto", v);
        else
            lt_ctx.mode = (lt_mode)m;
    }
    v = getenv("MEMTRACK_VERIFY");
    lt_ctx.verify = v && *v && strcmp(v, "0") != 0;
    v = getenv("MEMTRACK_PROGRESS");
    lt_ctx.progress = v && *v && strcmp(v, "0") != 0;
    v = getenv("MEMTRACK_MERGE_GAP");
    lt_ctx.merge_gap = v ? strtoull(v, NULL, 0) : 0;
    v = getenv("MEMTRACK_TEST_DROP_UPDATE");
    lt_ctx.drop_update = v ? strtoull(v, NULL, 0) : 0;
    v = getenv("MEMTRACK_OUTPUT");
    if (v && *v)
        snprintf(lt_ctx.output, sizeof lt_ctx.output, "%s", v);
    else
        snprintf(lt_ctx.output, sizeof lt_ctx.output, "memtrack-%d.mtrace", (int)getpid());
    v = getenv("MEMTRACK_STATS");
    if (v && *v)
        snprintf(lt_ctx.stats_path, sizeof lt_ctx.stats_path, "%s", v);
    mt_tracker_opts to = {.max_ranges = 1u << 16};
    if (mt_tracker_create(&to, &lt_ctx.tracker) != 0) {
        lt_ctx.tracker = NULL;
        lt_warn_once("tracker", "cannot create a tracker: every memory is scanned instead");
    }
    /* An application that never destroys its instance still gets a complete
     * trace (index and trailer) when it exits normally. */
    atexit(lt_trace_close);
}

void lt_config_load(void) { pthread_once(&g_once, load_once); }

uint64_t lt_next_id(void) { return __atomic_add_fetch(&lt_ctx.next_id, 1, __ATOMIC_RELAXED); }

void lt_trace_check(int rc)
{
    if (rc == 0 || lt_ctx.trace_failed)
        return;
    lt_ctx.trace_failed = 1;
    lt_warn_once("trace-error", "writing the trace failed (%s): capture stopped, the trace "
                                "holds what was written before", mt_strerror(rc));
}

void lt_trace_open(lt_instance *inst, VkPhysicalDevice phys)
{
    pthread_mutex_lock(&lt_ctx.lock);
    if (lt_ctx.trace || lt_ctx.trace_failed) {
        pthread_mutex_unlock(&lt_ctx.lock);
        return;
    }
    VkPhysicalDeviceProperties p;
    inst->GetPhysicalDeviceProperties(phys, &p);
    char driver[320], api[32], drv_version[32], backend[32];
    snprintf(driver, sizeof driver, "%s (vendor 0x%04x, device 0x%04x)", p.deviceName, p.vendorID,
             p.deviceID);
    snprintf(api, sizeof api, "%u.%u.%u", VK_API_VERSION_MAJOR(p.apiVersion),
             VK_API_VERSION_MINOR(p.apiVersion), VK_API_VERSION_PATCH(p.apiVersion));
    snprintf(drv_version, sizeof drv_version, "0x%x", p.driverVersion);
    snprintf(backend, sizeof backend, "%s", mt_track_backend_available(MT_TRACK_UFFD) ? "uffd+signal" : "signal");
    mt_trace_kv meta[] = {
        {"application", inst->app_name[0] ? inst->app_name : "(unnamed)"},
        {"engine", inst->engine_name[0] ? inst->engine_name : "(none)"},
        {"driver", driver},
        {"driver_version", drv_version},
        {"device_api", api},
        {"memtrack", MT_VERSION_STRING},
        {"mode", lt_mode_name(lt_ctx.mode)},
        {"verify", lt_ctx.verify ? "1" : "0"},
        {"track_backends", backend},
    };
    mt_trace_writer_opts o = {.meta = meta, .nmeta = sizeof meta / sizeof meta[0]};
    int rc = mt_trace_writer_open(lt_ctx.output, &o, &lt_ctx.trace);
    if (rc) {
        lt_ctx.trace = NULL;
        lt_ctx.trace_failed = 1;
        lt_warn_once("trace-open", "cannot create trace %s (%s): not capturing", lt_ctx.output,
                     mt_strerror(rc));
    } else if (lt_ctx.progress) {
        lt_ctx.last_progress_ns = lt_now_ns(); /* first report after 2 s */
        fprintf(stderr, "memtrack: capturing to %s (mode %s%s)\n", lt_ctx.output,
                lt_mode_name(lt_ctx.mode), lt_ctx.verify ? ", verify" : "");
    }
    pthread_mutex_unlock(&lt_ctx.lock);
}

static void write_stats(const mt_trace_writer_stats *ws)
{
    if (!lt_ctx.stats_path[0])
        return;
    FILE *f = fopen(lt_ctx.stats_path, "w");
    if (!f)
        return;
    const lt_stats *s = &lt_ctx.st;
    fprintf(f,
            "{\"mode\":\"%s\",\"submits\":%llu,\"frames\":%llu,\"capture_ns\":%llu,"
            "\"capture_ns_max\":%llu,\"packets\":%llu,\"packet_bytes\":%llu,\"hashes\":%llu,"
            "\"extra_bytes_peak\":%llu,\"mode_switches\":%llu,\"fallbacks\":%llu,"
            "\"trace_raw_bytes\":%llu,\"trace_file_bytes\":%llu}\n",
            lt_mode_name(lt_ctx.mode), (unsigned long long)s->submits,
            (unsigned long long)s->frames, (unsigned long long)s->capture_ns,
            (unsigned long long)s->capture_ns_max, (unsigned long long)s->packets,
            (unsigned long long)s->packet_bytes, (unsigned long long)s->hashes,
            (unsigned long long)s->shadow_bytes_peak, (unsigned long long)s->mode_switches,
            (unsigned long long)s->fallbacks, (unsigned long long)ws->raw_bytes,
            (unsigned long long)ws->file_bytes);
    fclose(f);
}

void lt_trace_close(void)
{
    /* Records are written under a device lock: with all of them held, no
     * capture is using the writer when it is detached (exit may come while
     * other threads still run). */
    lt_devices_lock(1);
    pthread_mutex_lock(&lt_ctx.lock);
    mt_trace_writer *w = lt_ctx.trace;
    lt_ctx.trace = NULL;
    pthread_mutex_unlock(&lt_ctx.lock);
    lt_devices_lock(0);
    if (!w)
        return;
    mt_trace_writer_stats ws;
    mt_trace_writer_stats_get(w, &ws);
    int rc = mt_trace_writer_close(w);
    if (rc)
        lt_warn_once("trace-close", "closing the trace failed: %s", mt_strerror(rc));
    struct stat sb;
    if (stat(lt_ctx.output, &sb) == 0) /* close added the index and trailer */
        ws.file_bytes = (uint64_t)sb.st_size;
    write_stats(&ws);
    if (lt_ctx.progress)
        fprintf(stderr, "memtrack: trace %s: %llu submits, %.1f MB of updates\n", lt_ctx.output,
                (unsigned long long)lt_ctx.st.submits, lt_ctx.st.packet_bytes / 1e6);
}

void lt_progress(void)
{
    if (!lt_ctx.progress)
        return;
    uint64_t now = lt_now_ns();
    if (now - lt_ctx.last_progress_ns < 2000000000ull)
        return;
    lt_ctx.last_progress_ns = now;
    fprintf(stderr, "memtrack: %llu submits, %llu frames, %.1f MB captured\n",
            (unsigned long long)lt_ctx.st.submits, (unsigned long long)lt_ctx.st.frames,
            lt_ctx.st.packet_bytes / 1e6);
}
