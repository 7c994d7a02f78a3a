/* MEMTRACK_* parsing: see config.h. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <strings.h>

#include "config.h"
#include "memtrack/trace.h"
#include "memtrack/track.h"

static const char *const g_mode_names[LT_NMODES + 1] = {"auto", "guard", "shadow", "scan", "copy", "off"};

const char *lt_mode_name(lt_mode m) { return m <= LT_OFF ? g_mode_names[m] : "unknown"; }

int lt_mode_parse(const char *s)
{
    for (int i = 0; i < LT_NMODES; i++)
        if (s && strcmp(s, g_mode_names[i]) == 0)
            return i;
    return -1;
}

int lt_parse_bool(const char *s)
{
    static const char *const on[] = {"1", "yes", "true", "on"}, *const off[] = {"0", "no", "false", "off"};
    for (size_t i = 0; s && i < 4; i++) {
        if (strcasecmp(s, on[i]) == 0)
            return 1;
        if (strcasecmp(s, off[i]) == 0)
            return 0;
    }
    return -1;
}

/* A non-negative decimal (or 0x hex) number that fits; -1 otherwise. */
static int parse_u64(const char *s, uint64_t *out)
{
    if (!s || !*s || *s == '-')
        return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || *end)
        return -1;
    *out = v;
    return 0;
}

int lt_parse_frames(const char *s, uint64_t *first, uint64_t *last)
{
    if (!s || !*s)
        return -1;
    char *end;
    errno = 0;
    unsigned long long a = strtoull(s, &end, 10), b = 0;
    if (errno || end == s || a == 0 || *s == '-')
        return -1;
    if (*end == '-') {
        const char *q = end + 1;
        if (*q) {
            if (*q == '-' || *q == '+')
                return -1;
            b = strtoull(q, &end, 10);
            if (errno || end == q || *end || b < a)
                return -1;
        }
    } else if (*end) {
        return -1;
    } else {
        b = a;
    }
    *first = a;
    *last = b;
    return 0;
}

int lt_parse_signal(const char *s)
{
    static const struct { const char *name; int sig; } names[] = {
        {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"HUP", SIGHUP},   {"QUIT", SIGQUIT}, {"ALRM", SIGALRM},
        {"TERM", SIGTERM}, {"CONT", SIGCONT}, {"TSTP", SIGTSTP}, {"WINCH", SIGWINCH}, {"PROF", SIGPROF},
    };
    if (!s || !*s)
        return -1;
    if (strncasecmp(s, "SIG", 3) == 0)
        s += 3;
    int sig = -1;
    char *end;
    long n = strtol(s, &end, 10);
    if (end != s && !*end)
        sig = (int)n;
    for (size_t i = 0; sig < 0 && i < sizeof names / sizeof names[0]; i++)
        if (strcasecmp(s, names[i].name) == 0)
            sig = names[i].sig;
    if (sig <= 0 || sig >= NSIG || sig == SIGKILL || sig == SIGSTOP || sig == SIGSEGV || sig == SIGBUS)
        return -1;
    return sig;
}

typedef struct parser {
    lt_getenv_fn get;
    lt_config_warn_fn warn;
    void *arg;
} parser;

/* The variable's value, or NULL when unset or empty. */
static const char *value_of(const parser *p, const char *name)
{
    const char *v = p->get(name, p->arg);
    return v && *v ? v : NULL;
}

static void parse_bool_var(const parser *p, const char *name, int *out)
{
    const char *v = value_of(p, name);
    if (!v)
        return;
    int b = lt_parse_bool(v);
    if (b < 0)
        p->warn(name, v, "1/0, yes/no, true/false or on/off", p->arg);
    else
        *out = b;
}

static int dup_var(const parser *p, const char *name, char **out)
{
    const char *v = value_of(p, name);
    if (!v)
        return 0;
    *out = strdup(v);
    return *out ? 0 : -ENOMEM;
}

int lt_config_parse(lt_config *c, lt_getenv_fn get, lt_config_warn_fn warn, void *arg, int pid)
{
    memset(c, 0, sizeof *c);
    parser p = {get, warn, arg};
    c->mode = LT_AUTO;
    c->hot_pages = 1;
    c->fault_budget = 1;
    c->memory_budget = 1;
    c->backend = MT_TRACK_AUTO;
    const char *v = value_of(&p, "MEMTRACK_MODE");
    if (v) {
        int m = lt_mode_parse(v);
        if (m < 0)
            warn("MEMTRACK_MODE", v, "auto, guard, shadow, scan or copy", arg);
        else
            c->mode = (lt_mode)m;
    }
    if ((v = value_of(&p, "MEMTRACK_TRACK_BACKEND"))) {
        int b = mt_track_backend_parse(v);
        if (b < 0)
            warn("MEMTRACK_TRACK_BACKEND", v, "auto, signal or uffd", arg);
        else
            c->backend = b;
    }
    if ((v = value_of(&p, "MEMTRACK_COMPRESSION"))) {
        mt_trace_compression comp;
        if (mt_trace_compression_parse(v, &comp) != 0)
            warn("MEMTRACK_COMPRESSION", v, "default, fast or none", arg);
        else
            c->compression = (int)comp;
    }
    parse_bool_var(&p, "MEMTRACK_VERIFY", &c->verify);
    parse_bool_var(&p, "MEMTRACK_PROGRESS", &c->progress);
    parse_bool_var(&p, "MEMTRACK_FOLLOW_CHILDREN", &c->follow_children);
    parse_bool_var(&p, "MEMTRACK_HOT_PAGES", &c->hot_pages);
    parse_bool_var(&p, "MEMTRACK_FAULT_BUDGET", &c->fault_budget);
    parse_bool_var(&p, "MEMTRACK_MEMORY_BUDGET", &c->memory_budget);
    parse_bool_var(&p, "MEMTRACK_TEST_WC", &c->test_wc);
    uint64_t n;
    if ((v = value_of(&p, "MEMTRACK_MERGE_GAP"))) {
        if (parse_u64(v, &n) != 0 || n > (1u << 30))
            warn("MEMTRACK_MERGE_GAP", v, "a byte count up to 1 GiB", arg);
        else
            c->merge_gap = (size_t)n;
    }
    if ((v = value_of(&p, "MEMTRACK_CAPTURE_THREADS"))) {
        if (parse_u64(v, &n) != 0 || n < 1 || n > 8)
            warn("MEMTRACK_CAPTURE_THREADS", v, "1 to 8", arg);
        else
            c->capture_threads = (int)n;
    }
    if ((v = value_of(&p, "MEMTRACK_TEST_DROP_UPDATE"))) {
        int at_unmap = strncmp(v, "unmap:", 6) == 0;
        if (parse_u64(v + (at_unmap ? 6 : 0), &n) != 0) {
            warn("MEMTRACK_TEST_DROP_UPDATE", v, "a packet number, or unmap:N", arg);
        } else {
            c->drop_update = n;
            c->drop_at_unmap = at_unmap;
        }
    }
    if ((v = value_of(&p, "MEMTRACK_TEST_DROP_RUN"))) {
        if (parse_u64(v, &n) != 0 || n < 1)
            warn("MEMTRACK_TEST_DROP_RUN", v, "a run number from 1", arg);
        else
            c->drop_run = n;
    }
    if ((v = value_of(&p, "MEMTRACK_TEST_LOSE_DEVICE"))) {
        if (parse_u64(v, &n) != 0 || n < 1)
            warn("MEMTRACK_TEST_LOSE_DEVICE", v, "a wait number from 1", arg);
        else
            c->test_lose = n;
    }
    if ((v = value_of(&p, "MEMTRACK_FRAMES")) &&
        lt_parse_frames(v, &c->frames_first, &c->frames_last) != 0)
        warn("MEMTRACK_FRAMES", v, "A-B, A- or A with 1 <= A <= B", arg);
    if ((v = value_of(&p, "MEMTRACK_TRIGGER"))) {
        int sig = lt_parse_signal(v);
        if (sig < 0)
            warn("MEMTRACK_TRIGGER", v, "a signal such as USR1 (not KILL, STOP, SEGV or BUS)", arg);
        else
            c->trigger = sig;
    }
    int rc = dup_var(&p, "MEMTRACK_OUTPUT", &c->output);
    if (rc == 0 && !c->output) {
        char def[64];
        snprintf(def, sizeof def, "memtrack-%d.mtrace", pid);
        c->output = strdup(def);
        rc = c->output ? 0 : -ENOMEM;
    }
    if (rc == 0)
        rc = dup_var(&p, "MEMTRACK_STATS", &c->stats_path);
    if (rc == 0)
        rc = dup_var(&p, "MEMTRACK_STATUS", &c->status_path);
    if (rc == 0)
        rc = dup_var(&p, "MEMTRACK_SESSION", &c->session);
    if (rc)
        lt_config_free(c);
    return rc;
}

void lt_config_free(lt_config *c)
{
    free(c->output);
    free(c->stats_path);
    free(c->status_path);
    free(c->session);
    memset(c, 0, sizeof *c);
}
