/* The layer's pure parts, without a Vulkan device: the MEMTRACK_* parser,
 * the autopilot's policy, the cutting of big diffs into slices and which
 * objects the device may write. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../layer/autopilot.h"
#include "../layer/budget.h"
#include "../layer/config.h"
#include "../layer/slices.h"
#include "../layer/usage.h"
#include "../src/common/cgroup.h"
#include <signal.h>

#include "memtrack/trace.h"
#include "memtrack/track.h"
#include "mt_test.h"

/* ---- configuration --------------------------------------------------------- */

typedef struct env {
    const char *const *kv; /* name, value, name, value, ..., NULL */
    int warnings;
    char last_warned[64];
} env;

static const char *env_get(const char *name, void *arg)
{
    env *e = arg;
    for (const char *const *p = e->kv; *p; p += 2)
        if (strcmp(p[0], name) == 0)
            return p[1];
    return NULL;
}

static void env_warn(const char *name, const char *value, const char *expected, void *arg)
{
    env *e = arg;
    (void)value, (void)expected;
    e->warnings++;
    snprintf(e->last_warned, sizeof e->last_warned, "%s", name);
}

static int parse(lt_config *c, env *e) { return lt_config_parse(c, env_get, env_warn, e, 1234); }

static void test_defaults(void)
{
    static const char *const kv[] = {NULL};
    env e = {kv, 0, ""};
    lt_config c;
    MT_CHECK_INT_EQ(parse(&c, &e), 0);
    MT_CHECK_INT_EQ(c.mode, LT_AUTO);
    MT_CHECK_INT_EQ(c.verify, 0);
    MT_CHECK_INT_EQ(c.backend, MT_TRACK_AUTO);
    MT_CHECK_INT_EQ(c.hot_pages, 1);
    MT_CHECK_INT_EQ(c.fault_budget, 1);
    MT_CHECK_INT_EQ(c.memory_budget, 1);
    MT_CHECK(strcmp(c.output, "memtrack-1234.mtrace") == 0);
    MT_CHECK(c.stats_path == NULL && c.session == NULL && c.status_path == NULL);
    MT_CHECK_INT_EQ(e.warnings, 0);
    lt_config_free(&c);
}

static void test_values(void)
{
    static const char *const kv[] = {"MEMTRACK_MODE", "shadow", "MEMTRACK_VERIFY", "yes",
                                     "MEMTRACK_PROGRESS", "off", "MEMTRACK_TRACK_BACKEND", "signal",
                                     "MEMTRACK_MERGE_GAP", "0x40", "MEMTRACK_OUTPUT", "/tmp/a.mtrace",
                                     "MEMTRACK_FOLLOW_CHILDREN", "TRUE", "MEMTRACK_SESSION", "s1",
                                     "MEMTRACK_TEST_DROP_UPDATE", "7", "MEMTRACK_COMPRESSION", "fast",
                                     "MEMTRACK_FRAMES", "10-20", "MEMTRACK_TRIGGER", "SIGUSR2",
                                     "MEMTRACK_HOT_PAGES", "off", "MEMTRACK_FAULT_BUDGET", "no",
                                     "MEMTRACK_MEMORY_BUDGET", "off", NULL};
    env e = {kv, 0, ""};
    lt_config c;
    MT_CHECK_INT_EQ(parse(&c, &e), 0);
    MT_CHECK_INT_EQ(c.mode, LT_SHADOW);
    MT_CHECK_INT_EQ(c.verify, 1);
    MT_CHECK_INT_EQ(c.progress, 0);
    MT_CHECK_INT_EQ(c.backend, MT_TRACK_SIGNAL);
    MT_CHECK_INT_EQ(c.merge_gap, 64);
    MT_CHECK_INT_EQ(c.follow_children, 1);
    MT_CHECK_INT_EQ(c.drop_update, 7);
    MT_CHECK_INT_EQ(c.drop_at_unmap, 0);
    {
        static const char *const kv2[] = {"MEMTRACK_TEST_DROP_UPDATE", "unmap:3", NULL};
        env e2 = {kv2, 0, ""};
        lt_config c2;
        MT_CHECK_INT_EQ(parse(&c2, &e2), 0);
        MT_CHECK(c2.drop_update == 3 && c2.drop_at_unmap == 1 && e2.warnings == 0);
        lt_config_free(&c2);
    }
    MT_CHECK_INT_EQ(c.compression, MT_TRACE_COMPRESSION_FAST);
    MT_CHECK_INT_EQ(c.frames_first, 10);
    MT_CHECK_INT_EQ(c.frames_last, 20);
    MT_CHECK_INT_EQ(c.trigger, SIGUSR2);
    MT_CHECK_INT_EQ(c.hot_pages, 0);
    MT_CHECK_INT_EQ(c.fault_budget, 0);
    MT_CHECK_INT_EQ(c.memory_budget, 0);
    MT_CHECK(strcmp(c.output, "/tmp/a.mtrace") == 0 && strcmp(c.session, "s1") == 0);
    MT_CHECK_INT_EQ(e.warnings, 0);
    lt_config_free(&c);
}

/* Off means off in every spelling; anything else is reported, not guessed. */
static void test_booleans_and_bad_values(void)
{
    static const char *const offs[] = {"0", "no", "false", "off", "No", "FALSE"};
    for (size_t i = 0; i < sizeof offs / sizeof offs[0]; i++) {
        const char *kv[] = {"MEMTRACK_VERIFY", offs[i], NULL};
        env e = {kv, 0, ""};
        lt_config c;
        MT_CHECK_INT_EQ(parse(&c, &e), 0);
        MT_CHECK_INT_EQ(c.verify, 0);
        MT_CHECK_INT_EQ(e.warnings, 0);
        lt_config_free(&c);
    }
    static const char *const bad[][2] = {{"MEMTRACK_VERIFY", "maybe"},    {"MEMTRACK_MODE", "warp"},
                                         {"MEMTRACK_TRACK_BACKEND", "io"}, {"MEMTRACK_MERGE_GAP", "-1"},
                                         {"MEMTRACK_MERGE_GAP", "12k"},   {"MEMTRACK_TEST_DROP_UPDATE", "x"},
                                         {"MEMTRACK_FOLLOW_CHILDREN", "2"},   {"MEMTRACK_COMPRESSION", "lz5"},
                                         {"MEMTRACK_FRAMES", "0-5"},          {"MEMTRACK_FRAMES", "9-3"},
                                         {"MEMTRACK_FRAMES", "-4"},           {"MEMTRACK_FRAMES", "3-x"},
                                         {"MEMTRACK_TRIGGER", "KILL"},        {"MEMTRACK_TRIGGER", "SEGV"},
                                         {"MEMTRACK_TRIGGER", "NOPE"},        {"MEMTRACK_HOT_PAGES", "hot"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *kv[] = {bad[i][0], bad[i][1], NULL};
        env e = {kv, 0, ""};
        lt_config c;
        MT_CHECK_INT_EQ(parse(&c, &e), 0);
        MT_CHECK_INT_EQ(e.warnings, 1);
        MT_CHECK(strcmp(e.last_warned, bad[i][0]) == 0);
        MT_CHECK_INT_EQ(c.mode, LT_AUTO); /* defaults kept */
        MT_CHECK_INT_EQ(c.verify, 0);
        MT_CHECK_INT_EQ(c.merge_gap, 0);
        MT_CHECK_INT_EQ(c.frames_first, 0);
        MT_CHECK_INT_EQ(c.trigger, 0);
        MT_CHECK_INT_EQ(c.compression, MT_TRACE_COMPRESSION_DEFAULT);
        lt_config_free(&c);
    }
    /* Empty means unset. */
    const char *kv[] = {"MEMTRACK_MODE", "", "MEMTRACK_OUTPUT", "", NULL};
    env e = {kv, 0, ""};
    lt_config c;
    MT_CHECK_INT_EQ(parse(&c, &e), 0);
    MT_CHECK_INT_EQ(e.warnings, 0);
    MT_CHECK(strcmp(c.output, "memtrack-1234.mtrace") == 0);
    lt_config_free(&c);
}

static void test_frames_and_signals(void)
{
    uint64_t a, b;
    MT_CHECK_INT_EQ(lt_parse_frames("5", &a, &b), 0);
    MT_CHECK(a == 5 && b == 5);
    MT_CHECK_INT_EQ(lt_parse_frames("100-", &a, &b), 0);
    MT_CHECK(a == 100 && b == 0);
    MT_CHECK_INT_EQ(lt_parse_frames("1-1", &a, &b), 0);
    MT_CHECK_INT_EQ(lt_parse_frames("", &a, &b), -1);
    MT_CHECK_INT_EQ(lt_parse_frames("3--4", &a, &b), -1);
    MT_CHECK_INT_EQ(lt_parse_signal("USR1"), SIGUSR1);
    MT_CHECK_INT_EQ(lt_parse_signal("sigusr2"), SIGUSR2);
    MT_CHECK_INT_EQ(lt_parse_signal("10"), 10);
    MT_CHECK_INT_EQ(lt_parse_signal("SIGBUS"), -1);
    MT_CHECK_INT_EQ(lt_parse_signal("0"), -1);
    MT_CHECK_INT_EQ(lt_parse_signal("999"), -1);
}

/* ---- autopilot ---------------------------------------------------------------- */

/* The signal backend's costs: a fault 10 us, a page diff 0.4 us, so guard
 * pays 2 x 10.4 us per written page and scan 0.4 us per mapped page. */
static const lt_ap_cal g_cal = {400.0, {0, 10000.0, 1000.0}, 0};

static lt_ap_decision run(lt_ap_state *s, lt_mode mode, size_t mapped, size_t dirty, uint64_t ns)
{
    return lt_autopilot_decide(s, &g_cal, mode, MT_TRACK_SIGNAL, mapped, dirty, ns);
}

static void test_always_scan(void)
{
    /* 16 pages scan in 6.4 us, less than one 10 us fault. */
    MT_CHECK_INT_EQ(lt_autopilot_always_scan(&g_cal, 16), 1);
    MT_CHECK_INT_EQ(lt_autopilot_always_scan(&g_cal, 100), 0);
    lt_ap_cal uffd = g_cal;
    uffd.uffd_available = 1; /* a 1 us fault: only tiny mappings */
    MT_CHECK_INT_EQ(lt_autopilot_always_scan(&uffd, 2), 1);
    MT_CHECK_INT_EQ(lt_autopilot_always_scan(&uffd, 3), 0);
    lt_ap_state s = {0};
    MT_CHECK_INT_EQ(run(&s, LT_SCAN, 16, 16, 1000), LT_AP_KEEP);
    MT_CHECK_INT_EQ(s.nhist, 0); /* nothing to decide: no history kept */
}

static void test_guard_to_scan_needs_two(void)
{
    lt_ap_state s = {0};
    /* 1024 mapped pages: scan 410 us; guard at 600 dirty pages ~12.5 ms. */
    MT_CHECK_INT_EQ(run(&s, LT_GUARD, 1024, 600, 0), LT_AP_KEEP); /* median of (600, 0, 0) is 0 */
    MT_CHECK_INT_EQ(run(&s, LT_GUARD, 1024, 600, 0), LT_AP_KEEP); /* median 600: first vote */
    MT_CHECK_INT_EQ(s.streak, 1);
    MT_CHECK_INT_EQ(run(&s, LT_GUARD, 1024, 600, 0), LT_AP_TO_SCAN);
    MT_CHECK_INT_EQ(s.streak, 0);
}

static void test_one_burst_does_not_flip(void)
{
    lt_ap_state s = {0};
    for (int i = 0; i < 5; i++)
        MT_CHECK_INT_EQ(run(&s, LT_GUARD, 1024, 2, 0), LT_AP_KEEP);
    /* One frame that clears everything: the median stays low. */
    MT_CHECK_INT_EQ(run(&s, LT_GUARD, 1024, 1024, 0), LT_AP_KEEP);
    MT_CHECK_INT_EQ(run(&s, LT_GUARD, 1024, 2, 0), LT_AP_KEEP);
    MT_CHECK_INT_EQ(s.streak, 0);
}

static void test_scan_to_guard_needs_four(void)
{
    lt_ap_state s = {0};
    /* Dense first: the history holds it, then sparse captures age it out. */
    for (int i = 0; i < 3; i++)
        run(&s, LT_SCAN, 1024, 1000, 400000);
    int switched_at = -1;
    for (int i = 0; i < 10 && switched_at < 0; i++)
        if (run(&s, LT_SCAN, 1024, 1, 400000) == LT_AP_TO_GUARD)
            switched_at = i;
    /* The second sparse capture brings the median of three down; it and
     * the next three are the four votes. */
    MT_CHECK_INT_EQ(switched_at, 4);
    /* The measured scan cost of this memory was learned on the way. */
    MT_CHECK(s.scan_page_ns > 350 && s.scan_page_ns < 450);
}

/* Guard's fixed costs count: a memory mapped every cycle pays arm + disarm. */
static void test_remap_cost_counts(void)
{
    lt_ap_state a = {0}, b = {0};
    b.remapped = 1;
    b.guard_setup_ns = 1e6; /* 1 ms per cycle, more than scanning 1024 pages */
    for (int i = 0; i < 3; i++) {
        MT_CHECK_INT_EQ(run(&a, LT_GUARD, 1024, 1, 0), LT_AP_KEEP);
        lt_ap_decision d = run(&b, LT_GUARD, 1024, 1, 0);
        if (i == 1)
            MT_CHECK_INT_EQ(d, LT_AP_TO_SCAN);
    }
}

/* Bulk: two diffs in a row >= 85% changed enter it; a period of captures
 * written whole, the last through the reference, then the probe's diff
 * decides whether to stay. */
static void test_bulk(void)
{
    lt_ap_state s = {0};
    MT_CHECK_INT_EQ(lt_autopilot_bulk_vote(&s, 1000, 900), 0);
    MT_CHECK_INT_EQ(lt_autopilot_bulk_vote(&s, 1000, 800), 0); /* 80%: the votes restart */
    MT_CHECK_INT_EQ(lt_autopilot_bulk_vote(&s, 1000, 850), 0);
    MT_CHECK_INT_EQ(lt_autopilot_bulk_vote(&s, 1000, 1000), 1);
    for (int round = 0; round < 2; round++) {
        for (unsigned i = 1; i < LT_AP_BULK_PERIOD - 1; i++)
            MT_CHECK_INT_EQ(lt_autopilot_bulk_step(&s), LT_BULK_COPY);
        MT_CHECK_INT_EQ(lt_autopilot_bulk_step(&s), LT_BULK_REFRESH);
        MT_CHECK_INT_EQ(lt_autopilot_bulk_step(&s), LT_BULK_PROBE);
        if (round == 0)
            MT_CHECK_INT_EQ(lt_autopilot_bulk_vote(&s, 1000, 990), 1); /* still dense */
    }
    MT_CHECK_INT_EQ(lt_autopilot_bulk_vote(&s, 1000, 100), 0); /* one sparse probe leaves */
    MT_CHECK_INT_EQ(s.bulk, 0);
    MT_CHECK_INT_EQ(lt_autopilot_bulk_vote(&s, 0, 0), 0);
}

static void test_ignores_other_modes(void)
{
    lt_ap_state s = {0};
    MT_CHECK_INT_EQ(run(&s, LT_SHADOW, 1024, 1000, 0), LT_AP_KEEP);
    MT_CHECK_INT_EQ(run(&s, LT_COPY, 1024, 1000, 0), LT_AP_KEEP);
    MT_CHECK_INT_EQ(run(&s, LT_GUARD, 0, 0, 0), LT_AP_KEEP);
    MT_CHECK_INT_EQ(s.nhist, 0);
}

/* ---- slices ------------------------------------------------------------------ */

static uint64_t g_rng = 0x5eed;
static size_t rnd_below(size_t n)
{
    g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
    return n ? (size_t)(g_rng % n) : 0;
}

/* Checks one cut of a window of `size` bytes over c[0..nc) against the
 * contract: page-aligned slices sharing no page, each but the last holding
 * at least slice_bytes, candidates exactly the input's. */
static void check_cut(size_t size, const mt_diff_region *c, size_t nc, size_t sb)
{
    const size_t ps = 4096;
    size_t total = 0;
    for (size_t i = 0; i < nc; i++)
        total += c[i].length;
    if (!nc)
        total = size;
    size_t max = lt_slices_max(total, sb), maxc = lt_slices_max_cands(total, nc, sb);
    lt_slice *out = malloc(max * sizeof *out);
    mt_diff_region *oc = malloc((maxc ? maxc : 1) * sizeof *oc);
    unsigned char *want = calloc(size, 1), *got = calloc(size, 1);
    MT_CHECK(out && oc && want && got);
    for (size_t i = 0; i < nc; i++)
        memset(want + c[i].offset, 1, c[i].length);
    if (!nc)
        memset(want, 1, size);
    size_t ns = lt_slices_cut(size, c, nc, ps, sb, out, oc), used = 0;
    MT_CHECK(ns >= 1 && ns <= max);
    for (size_t k = 0; k < ns; k++) {
        const lt_slice *sl = &out[k];
        MT_CHECK(sl->base % ps == 0 && sl->size > 0 && sl->base + sl->size <= size);
        if (k)
            MT_CHECK((out[k - 1].base + out[k - 1].size - 1) / ps < sl->base / ps);
        size_t bytes = 0;
        if (!nc) {
            MT_CHECK_UINT_EQ(sl->n, 0);
            memset(got + sl->base, 1, sl->size);
            bytes = sl->size;
        } else {
            MT_CHECK(sl->n > 0 && sl->first == used);
            used += sl->n;
            for (size_t j = 0; j < sl->n; j++) {
                const mt_diff_region *r = &oc[sl->first + j];
                MT_CHECK(r->length > 0 && r->offset + r->length <= sl->size);
                if (j)
                    MT_CHECK(r->offset >= oc[sl->first + j - 1].offset + oc[sl->first + j - 1].length);
                for (size_t b = 0; b < r->length; b++) {
                    MT_CHECK(!got[sl->base + r->offset + b]);
                    got[sl->base + r->offset + b] = 1;
                }
                bytes += r->length;
            }
            /* The slice ends where its last candidate does. */
            const mt_diff_region *last = &oc[sl->first + sl->n - 1];
            MT_CHECK_UINT_EQ(last->offset + last->length, sl->size);
        }
        if (k + 1 < ns)
            MT_CHECK(bytes >= sb);
    }
    MT_CHECK(used <= maxc);
    MT_CHECK_MEM_EQ(got, want, size);
    free(out), free(oc), free(want), free(got);
}

static void test_slices(void)
{
    /* The whole window, and a single candidate, in pieces of a few pages. */
    check_cut(10 * 4096 + 100, NULL, 0, 3 * 4096);
    check_cut(1, NULL, 0, 4096);
    mt_diff_region one = {5000, 50000};
    check_cut(70000, &one, 1, 8192);
    check_cut(70000, &one, 1, 1 << 20);
    /* Random candidates: tiny ones sharing pages, long ones crossing the
     * mark, small slices so that every case comes up. */
    for (int iter = 0; iter < 2000; iter++) {
        size_t size = 1 + rnd_below(300000), nc = 0;
        mt_diff_region c[64];
        for (size_t at = rnd_below(3000); at < size && nc < 64;) {
            size_t len = 1 + (rnd_below(4) ? rnd_below(600) : rnd_below(40000));
            if (len > size - at)
                len = size - at;
            c[nc++] = (mt_diff_region){at, len};
            at += len + 1 + (rnd_below(3) ? rnd_below(500) : rnd_below(20000));
        }
        size_t sb = 1 + (rnd_below(2) ? rnd_below(9000) : rnd_below(100000));
        check_cut(size, c, nc, sb);
        if (iter % 8 == 0)
            check_cut(size, NULL, 0, sb);
    }
}

/* ---- device-writable usages ----------------------------------------------- */

/* VkBufferUsageFlags2CreateInfo as VK_KHR_maintenance5 defines it (newer
 * than the headers this may build with). */
typedef struct usage2 {
    VkStructureType sType;
    const void *pNext;
    uint64_t usage;
} usage2;

static void test_usage(void)
{
    VkBufferCreateInfo b = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = 4096};
    b.usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_UNIFORM_BUFFER_BIT |
              VK_BUFFER_USAGE_VERTEX_BUFFER_BIT | VK_BUFFER_USAGE_INDEX_BUFFER_BIT |
              VK_BUFFER_USAGE_INDIRECT_BUFFER_BIT | VK_BUFFER_USAGE_UNIFORM_TEXEL_BUFFER_BIT;
    MT_CHECK(!lt_buffer_gpu_writable(&b));
    const VkBufferUsageFlags writers[] = {VK_BUFFER_USAGE_TRANSFER_DST_BIT, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT,
                                          VK_BUFFER_USAGE_STORAGE_TEXEL_BUFFER_BIT,
                                          VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT};
    for (size_t i = 0; i < sizeof writers / sizeof *writers; i++) {
        b.usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | writers[i];
        MT_CHECK(lt_buffer_gpu_writable(&b));
    }
    /* maintenance5: the chained 64-bit usage replaces ci->usage, both ways,
     * also behind another structure and for bits above 32. */
    VkExternalMemoryBufferCreateInfo ext = {.sType = VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO};
    usage2 u2 = {.sType = (VkStructureType)1000470006, .usage = VK_BUFFER_USAGE_TRANSFER_DST_BIT};
    ext.pNext = &u2;
    b.pNext = &ext;
    b.usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT;
    MT_CHECK(lt_buffer_gpu_writable(&b));
    b.usage = 0;
    MT_CHECK(lt_buffer_gpu_writable(&b));
    u2.usage = VK_BUFFER_USAGE_VERTEX_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT;
    b.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;
    MT_CHECK(!lt_buffer_gpu_writable(&b));
    u2.usage = 1ull << 33; /* a usage newer than this build: writable */
    MT_CHECK(lt_buffer_gpu_writable(&b));

    VkImageCreateInfo im = {.sType = VK_STRUCTURE_TYPE_IMAGE_CREATE_INFO,
                            .usage = VK_IMAGE_USAGE_SAMPLED_BIT | VK_IMAGE_USAGE_TRANSFER_SRC_BIT |
                                     VK_IMAGE_USAGE_INPUT_ATTACHMENT_BIT};
    MT_CHECK(!lt_image_gpu_writable(&im));
    im.usage |= VK_IMAGE_USAGE_STORAGE_BIT;
    MT_CHECK(lt_image_gpu_writable(&im));
    /* A separate stencil usage: the stencil aspect's writes count. */
    VkImageStencilUsageCreateInfo st = {.sType = VK_STRUCTURE_TYPE_IMAGE_STENCIL_USAGE_CREATE_INFO,
                                        .stencilUsage = VK_IMAGE_USAGE_SAMPLED_BIT};
    im.usage = VK_IMAGE_USAGE_SAMPLED_BIT;
    im.pNext = &st;
    MT_CHECK(!lt_image_gpu_writable(&im));
    st.stencilUsage = VK_IMAGE_USAGE_DEPTH_STENCIL_ATTACHMENT_BIT;
    MT_CHECK(lt_image_gpu_writable(&im));
}

/* ---- the memory budget (budget_rules.c, src/common/cgroup.c) ---------------- */

#define MIB (1ull << 20)

static void test_budget_cgroup_found(void)
{
    mti_cgroup cg;
    /* Version 2 alone (Debian 12's default), a systemd service. */
    const char *v2 = "0::/system.slice/app.service\n";
    const char *mi2 = "24 30 0:22 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"
                      "25 30 0:23 / /proc rw - proc proc rw\n";
    MT_CHECK(mti_cgroup_parse(v2, mi2, &cg) == 0 && !cg.v1);
    MT_CHECK(strcmp(cg.dir, "/sys/fs/cgroup/system.slice/app.service") == 0);
    MT_CHECK(strcmp(cg.name, "/system.slice/app.service") == 0);
    /* A container: its own cgroup is the root of its mount. */
    const char *mi_ct = "40 30 0:22 /docker/abc /sys/fs/cgroup ro - cgroup2 cgroup2 rw\n";
    MT_CHECK(mti_cgroup_parse("0::/docker/abc\n", mi_ct, &cg) == 0 && strcmp(cg.dir, "/sys/fs/cgroup") == 0);
    MT_CHECK(mti_cgroup_parse("0::/docker/abc/x\n", mi_ct, &cg) == 0 &&
             strcmp(cg.dir, "/sys/fs/cgroup/x") == 0);
    /* Not under the mount's root ("/docker/abcd" is not "/docker/abc"). */
    MT_CHECK(mti_cgroup_parse("0::/docker/abcd\n", mi_ct, &cg) == -ENOENT);
    /* Hybrid (this machine's kind): version 1's memory hierarchy wins. */
    const char *hy = "9:name=systemd:/\n4:memory:/jobs/j1\n1:cpu,cpuacct:/\n0::/\n";
    const char *mi_hy = "31 25 0:27 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n"
                        "32 25 0:28 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
                        "33 25 0:29 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n";
    MT_CHECK(mti_cgroup_parse(hy, mi_hy, &cg) == 0 && cg.v1);
    MT_CHECK(strcmp(cg.dir, "/sys/fs/cgroup/memory/jobs/j1") == 0);
    /* "memory" as one of several controllers, and not as part of a name. */
    const char *mi_co = "32 25 0:28 / /cg/mem rw - cgroup cgroup rw,memory,hugetlb\n"
                        "33 25 0:29 / /cg/x rw - cgroup cgroup rw,memory_x\n";
    MT_CHECK(mti_cgroup_parse("5:hugetlb,memory:/a\n", mi_co, &cg) == 0 && strcmp(cg.dir, "/cg/mem/a") == 0);
    MT_CHECK(mti_cgroup_parse("5:memory_x:/a\n", mi_co, &cg) == -ENOENT);
    /* Nothing mounted. */
    MT_CHECK(mti_cgroup_parse("0::/a\n", "25 30 0:23 / /proc rw - proc proc rw\n", &cg) == -ENOENT);
}

static void test_budget_files(void)
{
    MT_CHECK(lt_budget_parse_limit("max\n") == LT_BUDGET_NO_LIMIT);
    MT_CHECK(lt_budget_parse_limit("536870912\n") == 512 * MIB);
    MT_CHECK(lt_budget_parse_limit("9223372036854771712\n") == LT_BUDGET_NO_LIMIT);
    MT_CHECK(lt_budget_parse_limit("") == LT_BUDGET_NO_LIMIT);
    const char *v1 = "cache 100\nrss 200\nshmem 5\nhierarchical_memory_limit 1073741824\n"
                     "hierarchical_memsw_limit 9223372036854771712\ntotal_cache 4194304\ntotal_rss 9\n"
                     "total_shmem 1048576\n";
    MT_CHECK(lt_budget_v1_limit(v1) == 1024 * MIB);
    MT_CHECK(lt_budget_v1_limit("hierarchical_memory_limit 9223372036854771712\n") == LT_BUDGET_NO_LIMIT);
    /* 4 MiB of cache of which 1 MiB tmpfs/shared: 3 MiB can be dropped. */
    MT_CHECK(lt_budget_cgroup_used(10 * MIB, v1, 1) == 7 * MIB);
    const char *v2 = "anon 1000\nfile 6291456\nfile_mapped 77\nfile_dirty 88\nshmem 2097152\n";
    MT_CHECK(lt_budget_field(v2, "file", 1) == 6 * MIB); /* not file_mapped's */
    MT_CHECK(lt_budget_cgroup_used(10 * MIB, v2, 0) == 6 * MIB);
    MT_CHECK(lt_budget_cgroup_used(3 * MIB, v2, 0) == 0);
    MT_CHECK(lt_budget_cgroup_used(3 * MIB, NULL, 0) == 3 * MIB);
    MT_CHECK(lt_budget_field("MemTotal:       24684084 kB\nMemFree: 1 kB\nMemAvailable:   24185316 kB\n",
                             "MemAvailable", 1024) == 24185316ull * 1024);
    MT_CHECK(lt_budget_field("MemTotal: 5 kB\n", "MemAvailable", 1024) == 0);
}

static void test_budget_rules(void)
{
    /* 512 MiB limit, 112 used: 400 free. */
    lt_budget_limit l[2] = {{512 * MIB, 112 * MIB}, {24000 * MIB, 1000 * MIB}};
    /* A reference of 64 MiB with none yet: 64 <= (400 - 64) / 2. */
    MT_CHECK(lt_budget_refuses(l, 2, 0, 64 * MIB, 2) == -1);
    /* With 100 MiB of copies already: 2 x (100 + 64) = 328 <= 336 fits;
     * with 120, 368 > 336 does not. */
    MT_CHECK(lt_budget_refuses(l, 2, 100 * MIB, 64 * MIB, 2) == -1);
    MT_CHECK(lt_budget_refuses(l, 2, 120 * MIB, 64 * MIB, 2) == 0);
    /* Shadow's quarter: 2 x 64 MiB with none yet: 4 x 128 > 272. */
    MT_CHECK(lt_budget_refuses(l, 2, 0, 128 * MIB, 4) == 0);
    MT_CHECK(lt_budget_refuses(l, 2, 0, 32 * MIB, 4) == -1);
    /* More than is free at all. */
    MT_CHECK(lt_budget_refuses(l, 2, 0, 500 * MIB, 2) == 0);
    /* The second limit refusing. */
    lt_budget_limit m[2] = {{LT_BUDGET_NO_LIMIT, 0}, {1000 * MIB, 900 * MIB}};
    MT_CHECK(lt_budget_refuses(m, 2, 0, 64 * MIB, 2) == 1);
    int which;
    /* Copies at most what is free: nothing to give back. */
    MT_CHECK(lt_budget_need(l, 2, 400 * MIB, &which) == 0 && which == -1);
    /* 128 MiB of copies, 58 free: give back 35 (then 93 <= 93). */
    lt_budget_limit t[1] = {{512 * MIB, 454 * MIB}};
    MT_CHECK(lt_budget_need(t, 1, 128 * MIB, &which) == 35 * MIB && which == 0);
    /* What the application is about to take puts it 58 MiB over: 128 MiB
     * of copies give back 93 (then 35 <= 35). */
    lt_budget_limit a[1] = {{512 * MIB, 570 * MIB}};
    MT_CHECK(lt_budget_need(a, 1, 128 * MIB, &which) == 93 * MIB && which == 0);
    /* Further over than the copies hold: all of them. */
    lt_budget_limit o[2] = {{512 * MIB, 500 * MIB}, {512 * MIB, 600 * MIB}};
    MT_CHECK(lt_budget_need(o, 2, 9 * MIB, &which) == 9 * MIB && which == 1);
    /* No limit asks nothing. */
    lt_budget_limit u[1] = {{LT_BUDGET_NO_LIMIT, 600 * MIB}};
    MT_CHECK(lt_budget_need(u, 1, 9 * MIB, &which) == 0 && which == -1);
}

int main(void)
{
    test_defaults();
    test_values();
    test_booleans_and_bad_values();
    test_frames_and_signals();
    test_always_scan();
    test_guard_to_scan_needs_two();
    test_one_burst_does_not_flip();
    test_scan_to_guard_needs_four();
    test_remap_cost_counts();
    test_bulk();
    test_ignores_other_modes();
    test_slices();
    test_usage();
    test_budget_cgroup_found();
    test_budget_files();
    test_budget_rules();
    printf("layer units: ok\n");
    return 0;
}
