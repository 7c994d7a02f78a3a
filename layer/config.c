/* MEMTRACK_* parsing: see config.h. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config.h"
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
    parse_bool_var(&p, "MEMTRACK_VERIFY", &c->verify);
    parse_bool_var(&p, "MEMTRACK_PROGRESS", &c->progress);
    parse_bool_var(&p, "MEMTRACK_FOLLOW_CHILDREN", &c->follow_children);
    uint64_t n;
    if ((v = value_of(&p, "MEMTRACK_MERGE_GAP"))) {
        if (parse_u64(v, &n) != 0 || n > (1u << 30))
            warn("MEMTRACK_MERGE_GAP", v, "a byte count up to 1 GiB", arg);
        else
            c->merge_gap = (size_t)n;
    }
    if ((v = value_of(&p, "MEMTRACK_TEST_DROP_UPDATE"))) {
        if (parse_u64(v, &n) != 0)
            warn("MEMTRACK_TEST_DROP_UPDATE", v, "a packet number", arg);
        else
            c->drop_update = n;
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
