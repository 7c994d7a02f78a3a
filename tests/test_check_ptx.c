/* check: the PTX instrumenter on the PTX nvcc 13 generated for the suite on
 * the H100 host (tests/check/ptx/), and on hand-written edge cases.
 *
 * For every stored file:
 *  - every ld/ldu/st/atom/red/prefetch/prefetchu in the global, generic and
 *    local spaces is a site, and nothing else is (counted independently, one
 *    statement per line as nvcc writes it);
 *  - the output minus the check blocks, the local scratch declaration and the
 *    appended variable table is the input minus the instrumented lines, line
 *    for line: labels, branches, register declarations, debug sections and
 *    everything else come through unchanged;
 *  - each block holds the checks its access needs (walk, bits, local bound,
 *    alignment, record, safe address, V-bit update for writes);
 *  - three files match their golden output exactly (tests/check/golden/;
 *    regenerate with --write-golden DIR after a deliberate change, and read
 *    the diff).
 * Usage: test_check_ptx TESTS_CHECK_DIR [--write-golden DIR] */
#include <dirent.h>
#include <errno.h>

#include "mt_test.h"
#include "memtrack/check.h"

static const mt_ptx_opts opts = {
    .map_root = 0x7f0000000000ull,
    .err_buf = 0x7f0000100000ull,
    .err_cap = 4096,
    .site_base = 100,
    .safe_load = 0x7f0000200000ull,
    .safe_store = 0x7f0000300000ull,
    .local_top = 0xfffdc0,
};

static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    MT_CHECK(f != NULL);
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    rewind(f);
    char *b = malloc(*n + 1);
    MT_CHECK(b && fread(b, 1, *n, f) == *n);
    b[*n] = 0;
    fclose(f);
    return b;
}

typedef struct lines {
    char **v;
    size_t n;
} lines;

static lines split(const char *text)
{
    lines l = {NULL, 0};
    size_t cap = 0;
    for (const char *p = text; *p;) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (l.n == cap) {
            cap = cap ? 2 * cap : 256;
            l.v = realloc(l.v, cap * sizeof *l.v);
            MT_CHECK(l.v != NULL);
        }
        l.v[l.n] = malloc(len + 1);
        memcpy(l.v[l.n], p, len);
        l.v[l.n][len] = 0;
        l.n++;
        p = e ? e + 1 : p + len;
    }
    return l;
}

static void free_lines(lines *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
}

/* Is this input line a memory access the instrumenter must check? */
static int is_checked_access(const char *line)
{
    const char *p = line;
    while (*p == ' ' || *p == '\t')
        p++;
    if (*p == '@') { /* guard */
        while (*p && *p != ' ' && *p != '\t')
            p++;
        while (*p == ' ' || *p == '\t')
            p++;
    }
    char op[128];
    size_t n = 0;
    while (p[n] && p[n] != ' ' && p[n] != '\t' && p[n] != ';' && n + 1 < sizeof op)
        op[n] = p[n], n++;
    op[n] = 0;
    static const char *const bases[] = {"ld.", "ldu.", "st.", "atom.", "red.", "prefetch.", "prefetchu.", NULL};
    int base = 0;
    for (int i = 0; bases[i]; i++)
        if (strncmp(op, bases[i], strlen(bases[i])) == 0)
            base = 1;
    if (!base)
        return 0;
    if (strstr(op, ".param") || strstr(op, ".shared") || strstr(op, ".const"))
        return 0;
    if (strncmp(op, "prefetch", 8) == 0 && strstr(op, ".local"))
        return 0;
    return 1;
}

static void check_structure(const char *name, const char *in, const mt_ptx_result *r)
{
    lines a = split(in), b = split(r->text);
    /* Input minus the instrumented lines. */
    char *drop = calloc(a.n + 1, 1);
    for (size_t i = 0; i < r->nsites; i++) {
        MT_CHECK(r->sites[i].ptx_line >= 1 && r->sites[i].ptx_line <= a.n);
        drop[r->sites[i].ptx_line - 1] = 1;
    }
    size_t ia = 0, ib = 0, blocks = 0;
    for (;;) {
        while (ia < a.n && drop[ia])
            ia++;
        /* skip what the instrumenter added */
        for (;;) {
            if (ib < b.n && strstr(b.v[ib], "{ // memtrack check ")) {
                /* a block ends at the first line that is only its closing brace */
                for (; ib < b.n; ib++) {
                    const char *t = b.v[ib];
                    while (*t == '\t')
                        t++;
                    if (strcmp(t, "}") == 0) {
                        ib++;
                        break;
                    }
                }
                blocks++;
            } else if (ib < b.n && (strstr(b.v[ib], "__mt_local_safe[32]; // memtrack check") ||
                                    strstr(b.v[ib], "// memtrack check: the generic address") ||
                                    strstr(b.v[ib], MT_PTX_GLOBALS_TABLE))) {
                ib++;
            } else {
                break;
            }
        }
        if (ia >= a.n || ib >= b.n)
            break;
        if (strcmp(a.v[ia], b.v[ib]) != 0) {
            fprintf(stderr, "%s: input line %zu differs from output line %zu:\n  <%s>\n  <%s>\n", name, ia + 1,
                    ib + 1, a.v[ia], b.v[ib]);
            MT_CHECK(0);
        }
        ia++, ib++;
    }
    /* The appended variable table and blank lines aside, both are used up. */
    while (ib < b.n && (b.v[ib][0] == 0 || strstr(b.v[ib], "// memtrack check: the generic address") ||
                        strstr(b.v[ib], MT_PTX_GLOBALS_TABLE)))
        ib++;
    while (ia < a.n && (drop[ia] || a.v[ia][0] == 0))
        ia++;
    if (ia != a.n || ib != b.n) {
        fprintf(stderr, "%s: left over: input from line %zu of %zu, output from line %zu of %zu: <%s>\n", name,
                ia + 1, a.n, ib + 1, b.n, ib < b.n ? b.v[ib] : "");
        MT_CHECK(0);
    }
    MT_CHECK_UINT_EQ(blocks, r->nsites);
    free(drop);
    free_lines(&a);
    free_lines(&b);
}

/* The block of site i, from its opening line to its closing brace. */
static char *block_of(const mt_ptx_result *r, size_t i)
{
    char tag[64];
    snprintf(tag, sizeof tag, "{ // memtrack check %u:", r->sites[i].id);
    const char *s = strstr(r->text, tag);
    MT_CHECK(s != NULL);
    const char *e = strstr(s, "\n\t}\n");
    MT_CHECK(e != NULL);
    char *blk = malloc((size_t)(e - s) + 4);
    memcpy(blk, s, (size_t)(e - s) + 3);
    blk[e - s + 3] = 0;
    return blk;
}

static void check_blocks(const char *name, const mt_ptx_result *r)
{
    for (size_t i = 0; i < r->nsites; i++) {
        const mt_check_site *s = &r->sites[i];
        char *b = block_of(r, i);
        int local = s->space == MT_CHECK_LOCAL, generic = s->space == MT_CHECK_GENERIC;
        int pf = s->access == MT_CHECK_PREFETCH;
        int writes = s->access == MT_CHECK_STORE || s->access == MT_CHECK_ATOMIC || s->access == MT_CHECK_REDUCE;
        if (!(strstr(b, "atom.global.add.u32 %_mt_x, [%_mt_t], 1;") && strstr(b, "mov.u64 %_mt_t, 0x7f0000100000;"))) {
            fprintf(stderr, "%s: site %u records nothing:\n%s\n", name, s->id, b);
            MT_CHECK(0);
        }
        char idline[64];
        snprintf(idline, sizeof idline, "mov.u32 %%_mt_r0, %u;", s->id);
        MT_CHECK(strstr(b, idline) != NULL);
        MT_CHECK(strstr(b, "[%_mt_a]") != NULL); /* the instruction uses the checked address */
        if (local) {
            MT_CHECK(strstr(b, "setp.gt.u64 %_mt_l, %_mt_t, 16776640;") != NULL);
            MT_CHECK(strstr(b, "mov.u64 %_mt_a, __mt_local_safe;") != NULL);
            MT_CHECK(strstr(b, "ld.global.cg.u64") == NULL);
        } else {
            MT_CHECK(strstr(b, "mov.u64 %_mt_n, 0x7f0000000000;") && strstr(b, "ld.global.cg.u64 %_mt_t, [%_mt_w];"));
            MT_CHECK((strstr(b, "isspacep.local") != NULL) == generic);
            MT_CHECK((strstr(b, "isspacep.global %_mt_g") != NULL) == generic);
            MT_CHECK((strstr(b, "and.b64 %_mt_c, %_mt_a, -1024;") != NULL) == pf);
            MT_CHECK((strstr(b, "red.global.or.b32 [%_mt_w+4], %_mt_x;") != NULL) == writes);
            MT_CHECK((strstr(b, "shr.b32 %_mt_y, %_mt_v, %_mt_o;") != NULL) == (!pf && s->access != MT_CHECK_STORE));
            const char *safe = (s->access == MT_CHECK_LOAD || pf) ? "0x7f0000200000" : "0x7f0000300000";
            MT_CHECK(strstr(b, safe) != NULL);
        }
        if (s->size > 1 && !pf) {
            char al[64];
            snprintf(al, sizeof al, "and.b64 %%_mt_t, %%_mt_a, %u;", s->size - 1);
            MT_CHECK(strstr(b, al) != NULL);
        }
        free(b);
    }
}

static void run_file(const char *dir, const char *file, const char *golden_out, int *golden_seen)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/ptx/%s", dir, file);
    size_t n;
    char *in = slurp(path, &n);
    mt_ptx_result *r = NULL;
    MT_CHECK_OK(mt_ptx_instrument(in, n, &opts, &r));
    lines l = split(in);
    size_t expect = 0;
    for (size_t i = 0; i < l.n; i++)
        expect += is_checked_access(l.v[i]);
    free_lines(&l);
    if (expect != r->nsites) {
        fprintf(stderr, "%s: %zu accesses in the file, %zu sites\n", file, expect, r->nsites);
        MT_CHECK(0);
    }
    MT_CHECK(r->nsites > 0);
    MT_CHECK_UINT_EQ(r->unknown, 0);
    MT_CHECK_UINT_EQ(r->skipped, 0);
    for (size_t i = 0; i < r->nsites; i++) {
        MT_CHECK_UINT_EQ(r->sites[i].id, opts.site_base + i);
        MT_CHECK(r->sites[i].file && r->sites[i].src_line > 0); /* nvcc -lineinfo: every access has a .loc */
        MT_CHECK(r->sites[i].function && r->sites[i].text);
    }
    check_structure(file, in, r);
    check_blocks(file, r);

    static const char *const goldens[] = {"bug_write_after_1b.ptx", "bug_prefetch_slack.ptx",
                                          "bug_local_overflow.ptx", NULL};
    for (int g = 0; goldens[g]; g++) {
        if (strcmp(file, goldens[g]) != 0)
            continue;
        (*golden_seen)++;
        if (golden_out) {
            snprintf(path, sizeof path, "%s/%s.golden", golden_out, file);
            FILE *f = fopen(path, "wb");
            MT_CHECK(f && fwrite(r->text, 1, r->len, f) == r->len);
            fclose(f);
        } else {
            snprintf(path, sizeof path, "%s/golden/%s.golden", dir, file);
            size_t gn;
            char *want = slurp(path, &gn);
            MT_CHECK_UINT_EQ(r->len, gn);
            MT_CHECK_MEM_EQ(r->text, want, gn);
            free(want);
        }
    }
    printf("%-26s %3zu sites, %zu variables\n", file, r->nsites, r->nvars);
    mt_ptx_result_free(r);
    free(in);
}

/* ---- hand-written edge cases ---- */

#define HEAD ".version 8.0\n.target sm_90\n.address_size 64\n"

static mt_ptx_result *inst(const char *text, uint32_t flags)
{
    mt_ptx_opts o = opts;
    o.flags = flags;
    mt_ptx_result *r = NULL;
    MT_CHECK_OK(mt_ptx_instrument(text, strlen(text), &o, &r));
    return r;
}

static void test_edges(void)
{
    /* Guards, spaces, address forms, vector sizes, 32-bit registers. */
    const char *k = HEAD
        ".global .align 4 .b8 arr[10][4];\n"
        ".extern .global .align 4 .u32 ext;\n"
        ".const .align 4 .f32 c = 0f3F800000;\n"
        ".global .texref tex;\n"
        ".visible .entry k(.param .u64 p)\n{\n"
        "\t.reg .pred %p<2>;\n\t.reg .b32 %r<4>;\n\t.reg .b64 %rd<4>;\n\t.reg .f32 %f<5>;\n"
        "\t.shared .align 4 .b8 sh[64];\n\t.local .align 4 .b8 loc[16];\n"
        "\tld.param.u64 %rd1, [p];\n"
        "\t@!%p1 ld.global.f32 %f1, [%rd1+-4];\n"
        "\tst.global.v4.f32 [%rd1+16], {%f1, %f2, %f3, %f4};\n"
        "\tld.global.u32 %r1, [arr+8];\n"
        "\tld.shared.u32 %r2, [sh];\n\tst.shared.u32 [sh+4], %r2;\n\tld.const.f32 %f2, [c];\n"
        "\tld.local.u32 %r3, [%r2];\n"
        "\tatom.global.cas.b32 %r1, [%rd1], %r2, %r3;\n"
        "\tred.global.add.f32 [%rd1], %f1;\n"
        "\tprefetchu.L1 [%rd1];\n\tprefetch.local.L1 [loc];\n"
        "\tld.u8 %r1, [4096];\n"
        "\tcp.async.ca.shared.global [sh], [%rd1], 16;\n"
        "\t@%p1 cp.async.cg.shared.global.L2::cache_hint [sh+16], [%rd1+32], 8, %rd2;\n"
        "\tcp.async.ca.shared.global [sh], [%rd1], 16, %r1;\n" /* a source size: not checked */
        "\tcp.async.commit_group;\n\tcp.async.wait_group 0;\n"   /* no memory */
        "\tcp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [sh], [%rd1], 64, [sh+32];\n"
        "\tfrobnicate.b32 %r1, %r2;\n"
        "$L_end:\n\t@%p1 bra $L_end;\n\tret;\n}\n";
    mt_ptx_result *r = inst(k, 0);
    MT_CHECK_UINT_EQ(r->nsites, 10);
    MT_CHECK_UINT_EQ(r->skipped, 2);
    MT_CHECK_UINT_EQ(r->unknown, 1);
    MT_CHECK_UINT_EQ(r->nnotes, 3);
    int saw_size = 0, saw_bulk = 0, saw_frob = 0;
    for (size_t i = 0; i < r->nnotes; i++) {
        saw_size |= strstr(r->notes[i], "source size") != NULL;
        saw_bulk |= strstr(r->notes[i], "bulk") != NULL;
        saw_frob |= strstr(r->notes[i], "frobnicate") != NULL;
    }
    MT_CHECK(saw_size && saw_bulk && saw_frob);
    /* sites in order: cp.async reads its source (the second address) */
    static const struct { int access, space, size; } want[] = {
        {MT_CHECK_LOAD, MT_CHECK_GLOBAL, 4},   {MT_CHECK_STORE, MT_CHECK_GLOBAL, 16},
        {MT_CHECK_LOAD, MT_CHECK_GLOBAL, 4},   {MT_CHECK_LOAD, MT_CHECK_LOCAL, 4},
        {MT_CHECK_ATOMIC, MT_CHECK_GLOBAL, 4}, {MT_CHECK_REDUCE, MT_CHECK_GLOBAL, 4},
        {MT_CHECK_PREFETCH, MT_CHECK_GENERIC, 1}, {MT_CHECK_LOAD, MT_CHECK_GENERIC, 1},
        {MT_CHECK_LOAD, MT_CHECK_GLOBAL, 16},  {MT_CHECK_LOAD, MT_CHECK_GLOBAL, 8},
    };
    MT_CHECK(strstr(r->text, "cp.async.ca.shared.global [sh], [%_mt_a], 16;"));
    MT_CHECK(strstr(r->text, "cp.async.cg.shared.global.L2::cache_hint [sh+16], [%_mt_a], 8, %rd2;"));
    MT_CHECK(strstr(r->text, "add.s64 %_mt_a, %rd1, 32;"));
    MT_CHECK(strstr(r->text, "cp.async.ca.shared.global [sh], [%rd1], 16, %r1;")); /* unchanged */
    for (size_t i = 0; i < 10; i++) {
        MT_CHECK_INT_EQ(r->sites[i].access, want[i].access);
        MT_CHECK_INT_EQ(r->sites[i].space, want[i].space);
        MT_CHECK_INT_EQ(r->sites[i].size, want[i].size);
        MT_CHECK_UINT_EQ(r->sites[i].id, 100 + i);
    }
    MT_CHECK(r->sites[6].uniform);
    MT_CHECK(strstr(r->text, "\t@%p1 bra $__mt_ok_100;\n")); /* @!%p1: skip the check when p1 */
    MT_CHECK(strstr(r->text, "add.s64 %_mt_a, %rd1, -4;"));
    MT_CHECK(strstr(r->text, "and.b32 %_mt_y, %_mt_y, 65535;")); /* 16-byte vector mask */
    MT_CHECK(strstr(r->text, "mov.u64 %_mt_a, arr;\n\tadd.s64 %_mt_a, %_mt_a, 8;"));
    MT_CHECK(strstr(r->text, "cvt.u64.u32 %_mt_a, %r2;")); /* a 32-bit local address */
    MT_CHECK(strstr(r->text, "mov.u64 %_mt_a, 4096;"));
    MT_CHECK(strstr(r->text, "isspacep.global %_mt_h, %_mt_a;\n\tsetp.ne.and.u64 %_mt_q, %_mt_t, 0, !%_mt_h;"));
    MT_CHECK(strstr(r->text, "@!%p1 ld.global.f32 %f1, [%_mt_a];"));      /* guard kept */
    MT_CHECK(strstr(r->text, "$L_end:\n\t@%p1 bra $L_end;\n\tret;"));    /* control flow as it was */
    MT_CHECK(strstr(r->text, "\t.local .align 16 .b8 \t__mt_local_safe[32];"));
    /* the variables: arr (40 bytes) and c (4, const); not ext, not tex */
    MT_CHECK_UINT_EQ(r->nvars, 2);
    MT_CHECK(strcmp(r->vars[0].name, "arr") == 0 && r->vars[0].size == 40 && !r->vars[0].is_const);
    MT_CHECK(strcmp(r->vars[1].name, "c") == 0 && r->vars[1].size == 4 && r->vars[1].is_const);
    MT_CHECK(strstr(r->text, ".visible .global .align 8 .u64 " MT_PTX_GLOBALS_TABLE
                             "[4] = {generic(arr), 40, generic(c), 4};\n"));
    mt_ptx_result_free(r);

    /* Flags: no validity bits, explicit .local left alone. */
    r = inst(k, MT_PTX_NO_INIT_CHECK | MT_PTX_NO_LOCAL);
    MT_CHECK_UINT_EQ(r->nsites, 9);
    MT_CHECK(!strstr(r->text, "%_mt_v, %_mt_o;") && !strstr(r->text, "red.global.or.b32"));
    MT_CHECK(!strstr(r->text, "__mt_local_safe"));
    mt_ptx_result_free(r);

    /* Not PTX this parser takes. */
    mt_ptx_result *bad = (mt_ptx_result *)1;
    const char *no_version = ".target sm_90\n.address_size 64\n";
    const char *addr32 = ".version 8.0\n.target sm_90\n.address_size 32\n";
    const char *unbalanced = HEAD ".visible .entry k()\n{\n\tret;\n";
    const char *extra_close = HEAD "}\n";
    MT_CHECK_ERR(mt_ptx_instrument(no_version, strlen(no_version), &opts, &bad), MT_ECHECK_PTX);
    MT_CHECK(bad == NULL);
    MT_CHECK_ERR(mt_ptx_instrument(addr32, strlen(addr32), &opts, &bad), MT_ECHECK_PTX);
    MT_CHECK_ERR(mt_ptx_instrument(unbalanced, strlen(unbalanced), &opts, &bad), MT_ECHECK_PTX);
    MT_CHECK_ERR(mt_ptx_instrument(extra_close, strlen(extra_close), &opts, &bad), MT_ECHECK_PTX);
    MT_CHECK_ERR(mt_ptx_instrument(NULL, 0, &opts, &bad), -EINVAL);
    MT_CHECK_ERR(mt_ptx_instrument(HEAD, strlen(HEAD), NULL, &bad), -EINVAL);
    MT_CHECK(strcmp(mt_strerror(MT_ECHECK_PTX), "PTX text not understood") == 0);

    /* Comments, strings and debug sections pass through untouched. */
    const char *dbg = HEAD "// st.global.u32 [%rd1], %r1; in a comment\n/* ld.global.u32 %r1, [%rd1]; */\n"
                           ".section .debug_str\n{\n.b8 115,116,46,103 // \"st.g\"\n}\n";
    r = inst(dbg, 0);
    MT_CHECK_UINT_EQ(r->nsites, 0);
    MT_CHECK_UINT_EQ(r->len, strlen(dbg));
    MT_CHECK_MEM_EQ(r->text, dbg, r->len);
    mt_ptx_result_free(r);
}

int main(int argc, char **argv)
{
    MT_CHECK(argc >= 2);
    const char *golden_out = NULL;
    for (int i = 2; i + 1 < argc; i++)
        if (strcmp(argv[i], "--write-golden") == 0)
            golden_out = argv[i + 1];
    test_edges();
    char pdir[4096];
    snprintf(pdir, sizeof pdir, "%s/ptx", argv[1]);
    DIR *d = opendir(pdir);
    MT_CHECK(d != NULL);
    struct dirent *e;
    int files = 0, golden_seen = 0;
    while ((e = readdir(d)))
        if (strstr(e->d_name, ".ptx")) {
            run_file(argv[1], e->d_name, golden_out, &golden_seen);
            files++;
        }
    closedir(d);
    MT_CHECK(files >= 15);
    MT_CHECK_INT_EQ(golden_seen, 3);
    printf("test_check_ptx: ok (%d files)\n", files);
    return 0;
}
