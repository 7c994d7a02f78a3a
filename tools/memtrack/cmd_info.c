/* memtrack info FILE [--memories] [--json]: what a trace holds. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "memtrack/memtrack.h"

void mt_cmd_info_usage(void)
{
    printf("usage: memtrack info FILE [--memories] [--json]\n\n"
           "Summary of a trace: application and driver, memories and objects,\n"
           "submits and frames, bytes changed per submit (min/median/max), trace\n"
           "size and compression ratio, capture modes used, annotations.\n"
           "  --memories   also list every memory (id, size, memory type, modes)\n"
           "  --json       one JSON object on stdout instead of the text (with --memories,\n"
           "               a \"memory_list\" array too)\n");
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

typedef struct memrow {
    uint64_t id, size;
    uint32_t type, flags;
    char mode[96];
} memrow;

typedef struct tally {
    char name[48];
    uint64_t n;
} tally;

static void count_mode(tally *t, int *nt, const char *text, size_t len)
{
    char key[48];
    size_t k = 0;
    /* "guard/uffd (auto): ..." -> "guard/uffd" */
    while (k < len && k < sizeof key - 1 && text[k] != ' ' && text[k] != ':')
        key[k] = text[k], k++;
    key[k] = 0;
    for (int i = 0; i < *nt; i++)
        if (strcmp(t[i].name, key) == 0) {
            t[i].n++;
            return;
        }
    if (*nt < 16) {
        snprintf(t[*nt].name, sizeof t[*nt].name, "%s", key);
        t[(*nt)++].n = 1;
    }
}

static void json_str(const char *s, size_t n) { mt_cli_json_string(stdout, s, n, 0); }

static void flags_text(uint32_t f, char *out, size_t n)
{
    snprintf(out, n, "%s%s%s%s", f & 1 ? "DL " : "", f & 2 ? "HV " : "", f & 4 ? "HC " : "",
             f & 8 ? "HCa " : "");
}

/* The text report's figures, for --json. */
typedef struct info_totals {
    mt_trace_info inf;
    uint64_t memories, maps, buffers, images, submits, frames, hashes, annotations, updates, bytes;
    uint64_t min, median, max;
    int error;
} info_totals;

static void info_json(const info_totals *t, const tally *modes, int nmodes, const memrow *mems,
                      size_t nmems)
{
    printf("],\"annotation_count\":%" PRIu64 ",\"memories\":%" PRIu64 ",\"mappings\":%" PRIu64
           ",\"buffers\":%" PRIu64 ",\"images\":%" PRIu64 ",\"submits\":%" PRIu64 ",\"frames\":%" PRIu64
           ",\"content_hashes\":%" PRIu64 ",\"updates\":%" PRIu64 ",\"update_bytes\":%" PRIu64
           ",\"per_submit\":{\"min\":%" PRIu64 ",\"median\":%" PRIu64 ",\"max\":%" PRIu64 "}"
           ",\"file_size\":%" PRIu64 ",\"raw_bytes\":%" PRIu64 ",\"stored_bytes\":%" PRIu64
           ",\"chunks\":%" PRIu64 ",\"compression\":%.4f,\"modes\":{",
           t->annotations, t->memories, t->maps, t->buffers, t->images, t->submits, t->frames, t->hashes,
           t->updates, t->bytes, t->min, t->median, t->max, t->inf.file_size, t->inf.raw_bytes,
           t->inf.stored_bytes, t->inf.chunks,
           t->inf.stored_bytes ? (double)t->inf.raw_bytes / (double)t->inf.stored_bytes : 1.0);
    for (int i = 0; i < nmodes; i++) {
        printf(i ? "," : "");
        json_str(modes[i].name, strlen(modes[i].name));
        printf(":%" PRIu64, modes[i].n);
    }
    printf("}");
    if (mems) {
        printf(",\"memory_list\":[");
        for (size_t i = 0; i < nmems; i++) {
            printf("%s{\"id\":%" PRIu64 ",\"size\":%" PRIu64 ",\"type\":%u,\"flags\":%u,\"modes\":",
                   i ? "," : "", mems[i].id, mems[i].size, mems[i].type, mems[i].flags);
            json_str(mems[i].mode, strlen(mems[i].mode));
            printf("}");
        }
        printf("]");
    }
    printf(",\"error\":");
    if (t->error)
        json_str(mt_strerror(t->error), strlen(mt_strerror(t->error)));
    else
        printf("null");
    printf("}\n");
}

int mt_cmd_info(int argc, char **argv)
{
    const char *path = NULL;
    int list = 0, json = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--memories") == 0)
            list = 1;
        else if (strcmp(argv[i], "--json") == 0)
            json = 1;
        else if (argv[i][0] == '-')
            return mt_cli_usage_error("info: unknown option '%s'", argv[i]);
        else if (path)
            return mt_cli_usage_error("info: one trace at a time");
        else
            path = argv[i];
    }
    if (!path)
        return mt_cli_usage_error("info: no trace given");
    mt_trace_reader *r;
    mt_trace_replay *rp;
    if (mt_cli_open_replay(path, MT_TRACE_REPLAY_NO_IMAGES, &r, &rp) != 0)
        return 1;
    int rc;
    mt_trace_info inf;
    mt_trace_reader_info(r, &inf);
    const char *k, *v;
    if (json) {
        printf("{\"file\":");
        json_str(path, strlen(path));
        printf(",\"format\":\"%u.%u\",\"complete\":%s,\"end\":\"%s\",\"meta\":{", inf.version_major,
               inf.version_minor, inf.complete ? "true" : "false", mt_cli_end_name(inf.end));
        for (size_t i = 0; mt_trace_meta_at(r, i, &k, &v) == 0; i++) {
            printf(i ? "," : "");
            json_str(k, strlen(k));
            putchar(':');
            json_str(v, strlen(v));
        }
        printf("},\"annotations\":[");
    } else {
        printf("trace        %s (format %u.%u)%s\n", path, inf.version_major, inf.version_minor,
               inf.complete ? "" : "  [INCOMPLETE: the writer did not close it]");
        for (size_t i = 0; mt_trace_meta_at(r, i, &k, &v) == 0; i++)
            printf("%-12s %s\n", k, v);
    }

    uint64_t nmem = 0, nbuf = 0, nimg = 0, frames = 0, maps = 0, hashes = 0, annotations = 0;
    uint64_t cur = 0, *per = NULL, nper = 0, capper = 0, updates = 0, total = 0;
    memrow *mems = NULL;
    size_t nmems = 0, capmems = 0;
    tally modes[16];
    int nmodes = 0;
    mt_trace_record rec;
    while ((rc = mt_trace_replay_next(rp, &rec)) == 1) {
        switch (rec.type) {
        case MT_TRACE_MEMORY:
            nmem++;
            if (list && nmems == capmems) {
                capmems = capmems ? capmems * 2 : 64;
                mems = realloc(mems, capmems * sizeof *mems);
            }
            if (list && mems)
                mems[nmems++] = (memrow){rec.u.memory.id, rec.u.memory.size, rec.u.memory.type_index,
                                         rec.u.memory.property_flags, ""};
            break;
        case MT_TRACE_OBJECT:
            rec.u.object.kind == MT_TRACE_OBJECT_IMAGE ? nimg++ : nbuf++;
            break;
        case MT_TRACE_MAP: maps++; break;
        case MT_TRACE_UPDATE:
            updates++;
            cur += rec.u.update.length;
            total += rec.u.update.length;
            break;
        case MT_TRACE_SUBMIT:
            if (nper == capper) {
                capper = capper ? capper * 2 : 1024;
                per = realloc(per, capper * sizeof *per);
            }
            if (per)
                per[nper++] = cur;
            cur = 0;
            break;
        case MT_TRACE_FRAME: frames++; break;
        case MT_TRACE_CONTENT_HASH: hashes++; break;
        case MT_TRACE_ANNOTATION:
            if (annotations++ >= 5)
                break;
            if (json)
                printf(annotations > 1 ? "," : ""), json_str(rec.u.annotation.text, rec.u.annotation.length);
            else
                printf("annotation   %.*s\n", (int)rec.u.annotation.length, rec.u.annotation.text);
            break;
        case MT_TRACE_MODE:
            count_mode(modes, &nmodes, rec.u.mode.mode, rec.u.mode.length);
            for (size_t i = 0; i < nmems; i++)
                if (mems[i].id == rec.u.mode.memory) {
                    /* A memory mapped every frame states its mode at every
                     * map: list changes only. */
                    char text[48];
                    snprintf(text, sizeof text, "%.*s",
                             (int)(rec.u.mode.length < 40 ? rec.u.mode.length : 40), rec.u.mode.mode);
                    size_t l = strlen(mems[i].mode), tl = strlen(text);
                    if (l >= tl && strcmp(mems[i].mode + l - tl, text) == 0)
                        break;
                    snprintf(mems[i].mode + l, sizeof mems[i].mode - l, "%s%s", l ? ", " : "", text);
                }
            break;
        default: break;
        }
    }
    if (nper)
        qsort(per, nper, sizeof *per, cmp_u64);
    if (json) {
        info_json(&(info_totals){inf, nmem, maps, nbuf, nimg, nper, frames, hashes, annotations, updates,
                                 total, nper ? per[0] : 0, nper ? per[nper / 2] : 0,
                                 nper ? per[nper - 1] : 0, rc < 0 ? rc : 0},
                  modes, nmodes, list ? mems : NULL, nmems);
        free(per);
        free(mems);
        mt_trace_replay_destroy(rp);
        mt_trace_reader_close(r);
        return rc < 0 ? 1 : 0;
    }
    if (rc < 0)
        printf("error        reading stopped early: %s\n", mt_strerror(rc));
    if (annotations > 5)
        printf("annotation   ... %" PRIu64 " in all\n", annotations);
    printf("memories     %" PRIu64 " (%" PRIu64 " mappings)\n", nmem, maps);
    printf("objects      %" PRIu64 " buffers, %" PRIu64 " images\n", nbuf, nimg);
    const char *verified = mt_trace_meta_get(r, "verify");
    printf("submits      %" PRIu64 ", frames %" PRIu64 ", content hashes %" PRIu64 "%s\n", nper,
           frames, hashes,
           hashes                                   ? ""
           : verified && strcmp(verified, "1") == 0 ? " (recorded with --verify: nothing was mapped to hash)"
                                                    : " (record with --verify to enable 'memtrack verify')");
    if (nper) {
        printf("changed      %" PRIu64 " bytes in %" PRIu64 " update packets; per submit: min %" PRIu64
               ", median %" PRIu64 ", max %" PRIu64 " bytes\n",
               total, updates, per[0], per[nper / 2], per[nper - 1]);
    }
    printf("size         %" PRIu64 " bytes on disk, %" PRIu64 " bytes of records",
           inf.file_size, inf.raw_bytes);
    if (inf.stored_bytes)
        printf(", compression %.2fx", (double)inf.raw_bytes / (double)inf.stored_bytes);
    printf("\nmodes        ");
    for (int i = 0; i < nmodes; i++)
        printf("%s%s x%" PRIu64, i ? ", " : "", modes[i].name, modes[i].n);
    printf("%s\n", nmodes ? "" : "(none recorded)");
    if (list) {
        printf("\n%-8s %14s %5s %-14s %s\n", "memory", "bytes", "type", "flags", "modes");
        for (size_t i = 0; i < nmems; i++) {
            char f[32];
            flags_text(mems[i].flags, f, sizeof f);
            printf("%-8" PRIu64 " %14" PRIu64 " %5u %-14s %s\n", mems[i].id, mems[i].size, mems[i].type,
                   f, mems[i].mode[0] ? mems[i].mode : "(never mapped)");
        }
    }
    free(per);
    free(mems);
    mt_trace_replay_destroy(rp);
    mt_trace_reader_close(r);
    return rc < 0 ? 1 : 0;
}
