/* mt_ptx_instrument: two passes over the lexed statements.
 *
 * Pass 1 reads the module: .version/.target/.address_size, .file names,
 * module-scope .global/.const variables, and for every function body its
 * register declarations, .loc positions and instructions. Each memory
 * instruction is classified (ptx/isa.c); those to check get a site and a
 * plan. Pass 2 copies the text through, replacing each planned instruction by
 * its check block (ptx/emit.c), adding a local scratch variable to functions
 * that check explicit .local accesses, and appending the table of variable
 * addresses the runtime registers in the validity map. */
#define _GNU_SOURCE /* memmem */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memtrack/check.h"
#include "emit.h"
#include "isa.h"
#include "lex.h"

typedef struct reg_decl {
    const char *name; /* prefix for %r<N>, whole name otherwise */
    size_t len;
    long count;       /* -1: a single register */
    int bits;
} reg_decl;

typedef struct plan {
    size_t stmt;     /* statement index */
    ptx_check check; /* strings owned by the result's pool */
} plan;

typedef struct result_impl {
    mt_ptx_result pub;
    char **pool; /* every string the result owns */
    size_t npool, cappool;
} result_impl;

typedef struct ctx {
    const char *text;
    ptx_lexed lx;
    const mt_ptx_opts *o;
    result_impl *r;
    int oom;
    /* current function */
    reg_decl *regs;
    size_t nregs, capregs;
    const char *fn_name;
    /* plans and per-function scratch needs */
    plan *plans;
    size_t nplans, capplans;
    size_t *scratch_open; /* statement index of each body '{' that needs the local scratch */
    size_t nscratch, capscratch;
    char *files[256];     /* .file index -> name */
    size_t ncap_sites;
} ctx;

static int grow(void **v, size_t *cap, size_t n, size_t elem)
{
    if (n < *cap)
        return 0;
    size_t nc = *cap ? 2 * *cap : 32;
    void *nv = realloc(*v, nc * elem);
    if (!nv)
        return -1;
    *v = nv;
    *cap = nc;
    return 0;
}

static char *pool_strndup(ctx *c, const char *s, size_t n)
{
    result_impl *r = c->r;
    if (grow((void **)&r->pool, &r->cappool, r->npool, sizeof *r->pool)) {
        c->oom = 1;
        return NULL;
    }
    char *d = malloc(n + 1);
    if (!d) {
        c->oom = 1;
        return NULL;
    }
    memcpy(d, s, n);
    d[n] = 0;
    r->pool[r->npool++] = d;
    return d;
}

static void add_note(ctx *c, const char *fn, const char *what, const char *why)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s: %s: %s", fn ? fn : "(module)", what, why);
    mt_ptx_result *p = &c->r->pub;
    for (size_t i = 0; i < p->nnotes; i++)
        if (strcmp(p->notes[i], buf) == 0)
            return; /* one note per function, instruction and reason */
    size_t cap = p->nnotes; /* notes grow one by one: they are rare */
    char **nn = realloc(p->notes, (cap + 1) * sizeof *nn);
    if (!nn) {
        c->oom = 1;
        return;
    }
    p->notes = nn;
    if ((p->notes[p->nnotes] = pool_strndup(c, buf, strlen(buf))) != NULL)
        p->nnotes++;
}

static const char *skip_ws(const char *p, const char *e)
{
    return mti_ptx_skip_space(p, e);
}

static const char *ident_end(const char *p, const char *e)
{
    while (p < e && mti_ptx_is_ident_char((unsigned char)*p) && *p != '.')
        p++;
    return p;
}

/* ---- registers ---------------------------------------------------------------- */

static int type_bits(const char *t, size_t n)
{
    if (n == 4 && memcmp(t, "pred", 4) == 0)
        return 1;
    if (n >= 2 && (t[0] == 'b' || t[0] == 'u' || t[0] == 's' || t[0] == 'f')) {
        const char *d = t + 1 + (n > 2 && t[1] == 'f'); /* bf16 */
        char *x;
        long bits = strtol(d, &x, 10);
        if (x < t + n && *x == 'x') /* f16x2, bf16x2 */
            bits *= strtol(x + 1, NULL, 10);
        return (int)bits;
    }
    return 0;
}

/* ".reg .b64 %rd<7>, %SP;" */
static void parse_reg_decl(ctx *c, const char *p, const char *e)
{
    int bits = 0;
    p = skip_ws(p + 4, e);
    while (p < e && *p == '.') { /* .v2 and the type */
        const char *t = p + 1, *te = t;
        while (te < e && mti_ptx_is_ident_char((unsigned char)*te) && *te != '.')
            te++;
        if (!(te - t == 2 && t[0] == 'v'))
            bits = type_bits(t, (size_t)(te - t));
        p = skip_ws(te, e);
    }
    while (p < e && *p != ';') {
        const char *ne = ident_end(p, e);
        if (ne == p) {
            p++;
            continue;
        }
        reg_decl d = {p, (size_t)(ne - p), -1, bits};
        p = skip_ws(ne, e);
        if (p < e && *p == '<') {
            d.count = strtol(p + 1, NULL, 10);
            while (p < e && *p != '>')
                p++;
            p = skip_ws(p + 1, e);
        }
        if (grow((void **)&c->regs, &c->capregs, c->nregs, sizeof *c->regs)) {
            c->oom = 1;
            return;
        }
        c->regs[c->nregs++] = d;
        while (p < e && (*p == ',' || *p == ' ' || *p == '\t' || *p == '\n'))
            p++;
    }
}

/* Width of a register by its declaration; 64 when unknown (addresses are). */
static int reg_bits(const ctx *c, const char *name, size_t len)
{
    for (size_t i = c->nregs; i-- > 0;) {
        const reg_decl *d = &c->regs[i];
        if (d->count < 0) {
            if (d->len == len && memcmp(d->name, name, len) == 0)
                return d->bits;
        } else if (len > d->len && memcmp(d->name, name, d->len) == 0) {
            const char *n = name + d->len;
            size_t k = len - d->len;
            int digits = 1;
            for (size_t j = 0; j < k; j++)
                digits &= n[j] >= '0' && n[j] <= '9';
            if (digits && strtol(n, NULL, 10) < d->count)
                return d->bits;
        }
    }
    return 64;
}

/* ---- module variables ------------------------------------------------------------ */

/* ".visible .global .align 4 .b8 g_table[1024];" -> name and size. */
static void parse_variable(ctx *c, const char *p, const char *e)
{
    int is_const = 0, is_var = 0, esize = 0;
    const char *name = NULL, *name_end = NULL;
    while (p < e) {
        p = skip_ws(p, e);
        if (p >= e || *p == ';' || *p == '=')
            break;
        const char *w = p, *we = p + 1;
        while (we < e && (mti_ptx_is_ident_char((unsigned char)*we) || *we == ':') && *we != '.')
            we++;
        size_t n = (size_t)(we - w);
        if (*w == '.') {
            if (n == 7 && memcmp(w, ".extern", 7) == 0)
                return; /* declared here, defined elsewhere */
            if (n == 7 && memcmp(w, ".global", 7) == 0)
                is_var = 1;
            else if (n == 6 && memcmp(w, ".const", 6) == 0)
                is_var = 1, is_const = 1;
            else if (n == 6 && memcmp(w, ".align", 6) == 0) {
                p = skip_ws(we, e);
                while (p < e && *p >= '0' && *p <= '9')
                    p++;
                continue;
            } else if ((n == 7 && memcmp(w, ".texref", 7) == 0) || (n == 8 && memcmp(w, ".surfref", 8) == 0) ||
                       (n == 11 && memcmp(w, ".samplerref", 11) == 0)) {
                return;
            } else {
                int bits = type_bits(w + 1, n - 1);
                if (bits >= 8)
                    esize = bits / 8;
            }
            p = we;
            continue;
        }
        if (*w == '[' || *w == '<')
            break;
        name = w;
        name_end = ident_end(w, e);
        p = name_end;
        break;
    }
    if (!is_var || !name || name_end == name || !esize)
        return;
    uint64_t count = 1;
    for (p = skip_ws(name_end, e); p < e && *p == '['; p = skip_ws(p, e)) {
        char *q;
        unsigned long long dim = strtoull(p + 1, &q, 0);
        if (q == p + 1) { /* "[]" sized by its initializer: count the elements */
            const char *init = memchr(p, '{', (size_t)(e - p));
            dim = 0;
            if (init)
                for (const char *t = init; t < e && *t != '}'; t++)
                    dim += *t == ',' || t == init;
        }
        count *= dim;
        while (p < e && *p != ']')
            p++;
        p++;
    }
    if (!count)
        return;
    mt_ptx_result *pub = &c->r->pub;
    mt_check_variable *nv = realloc(pub->vars, (pub->nvars + 1) * sizeof *nv);
    if (!nv) {
        c->oom = 1;
        return;
    }
    pub->vars = nv;
    mt_check_variable *v = &pub->vars[pub->nvars];
    if (!(v->name = pool_strndup(c, name, (size_t)(name_end - name))))
        return;
    v->size = count * (uint64_t)esize;
    v->is_const = (uint8_t)is_const;
    pub->nvars++;
}

/* ---- instructions ------------------------------------------------------------------ */

/* Parses the address inside [a, b) into the check's addr_* fields. */
static int parse_address(ctx *c, const char *a, const char *b, ptx_check *k)
{
    char buf[256];
    size_t n = 0;
    for (const char *p = a; p < b; p++)
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
            if (n + 1 >= sizeof buf)
                return -1;
            buf[n++] = *p;
        }
    buf[n] = 0;
    if (!n)
        return -1;
    const char *plus = NULL;
    for (size_t i = 1; i < n; i++)
        if (buf[i] == '+' || buf[i] == '-') {
            plus = buf + i;
            break;
        }
    size_t base_len = plus ? (size_t)(plus - buf) : n;
    const char *off = "0";
    char offbuf[64];
    if (plus) {
        const char *o = plus[0] == '+' ? plus + 1 : plus; /* "+-4" -> "-4", "-4" stays */
        if (strlen(o) >= sizeof offbuf)
            return -1;
        strcpy(offbuf, o);
        off = offbuf;
    }
    if (buf[0] == '%') {
        k->addr_kind = reg_bits(c, buf, base_len) == 32 ? PTX_ADDR_REG32 : PTX_ADDR_REG64;
    } else if ((buf[0] >= '0' && buf[0] <= '9') || buf[0] == '-') {
        k->addr_kind = PTX_ADDR_IMM;
        off = buf; /* the whole expression is the immediate */
        base_len = 0;
    } else {
        k->addr_kind = PTX_ADDR_VAR;
    }
    k->addr_base = pool_strndup(c, buf, base_len);
    k->addr_off = pool_strndup(c, off, strlen(off));
    return k->addr_base && k->addr_off ? 0 : -1;
}

static char *collapse(ctx *c, const char *s, size_t n)
{
    char *d = pool_strndup(c, s, n);
    if (!d)
        return NULL;
    size_t j = 0;
    int space = 0;
    for (size_t i = 0; d[i]; i++) {
        char ch = d[i];
        if (ch == '\n' || ch == '\t' || ch == '\r')
            ch = ' ';
        if (ch == ' ' && (space || j == 0))
            continue;
        space = ch == ' ';
        d[j++] = ch;
    }
    while (j && d[j - 1] == ' ')
        j--;
    d[j] = 0;
    return d;
}

typedef struct loc {
    int file;
    uint32_t line;
} loc;

/* cp.async [dst], [src], size{, policy}: points lb/rb at the source's
 * brackets and sets mem->size. A source size (fewer bytes read, the rest
 * zero-filled: CUTLASS passes 0 with an out-of-range pointer) or an
 * ignore-src predicate would make the bytes read depend on a register:
 * those forms are left unchecked (returns -1). */
static int async_copy_source(const char *op, const char *op_end, const char *e, const char **lb,
                             const char **rb, ptx_mem *mem)
{
    if (!*rb)
        return -1;
    const char *l2 = memchr(*rb, '[', (size_t)(e - *rb));
    const char *r2 = l2 ? memchr(l2, ']', (size_t)(e - l2)) : NULL;
    if (!r2)
        return -1;
    const char *p = skip_ws(r2 + 1, e);
    if (p >= e || *p != ',')
        return -1;
    char *num_end;
    long size = strtol(skip_ws(p + 1, e), &num_end, 0);
    if (size != 4 && size != 8 && size != 16)
        return -1;
    p = skip_ws(num_end, e);
    int hint = memmem(op, (size_t)(op_end - op), "cache_hint", 10) != NULL;
    if (p < e && *p == ',') { /* one more operand: only the cache policy of .L2::cache_hint */
        if (!hint || memchr(p + 1, ',', (size_t)(e - p - 1)))
            return -1;
    } else if (p < e || hint) {
        return -1;
    }
    *lb = l2;
    *rb = r2;
    mem->size = (uint8_t)size;
    return 0;
}

static void instruction(ctx *c, size_t si, const loc *where, int *needs_scratch)
{
    const ptx_stmt *s = &c->lx.v[si];
    const char *p = c->text + s->start, *e = c->text + s->end - 1; /* e: the ';' */
    const char *guard = NULL;
    size_t guard_len = 0;
    int neg = 0;
    if (*p == '@') {
        p++;
        if (*p == '!')
            neg = 1, p++;
        guard = p;
        p = ident_end(p, e);
        guard_len = (size_t)(p - guard);
        p = skip_ws(p, e);
    }
    const char *op = p;
    while (p < e && *p != ' ' && *p != '\t' && *p != '\n' && *p != '\r')
        p++;
    const char *op_end = p, *dot = memchr(op, '.', (size_t)(op_end - op));
    size_t blen = dot ? (size_t)(dot - op) : (size_t)(op_end - op);
    if (!mti_ptx_known_opcode(op, blen)) {
        char what[64];
        snprintf(what, sizeof what, "%.*s", (int)(blen < 40 ? blen : 40), op);
        add_note(c, c->fn_name, what, "unknown instruction, passed through");
        c->r->pub.unknown++;
        return;
    }
    ptx_mem mem;
    mti_ptx_classify(op, (size_t)(op_end - op), &mem);
    if (mem.decision == PTX_MEM_NONE)
        return;
    if (mem.space == MT_CHECK_LOCAL && (c->o->flags & MT_PTX_NO_LOCAL))
        return;
    char what[96];
    snprintf(what, sizeof what, "%.*s", (int)((op_end - op) < 80 ? (op_end - op) : 80), op);
    if (mem.decision == PTX_MEM_SKIP) {
        add_note(c, c->fn_name, what, mem.reason);
        c->r->pub.skipped++;
        return;
    }
    const char *lb = memchr(op_end, '[', (size_t)(e - op_end));
    const char *rb = lb ? memchr(lb, ']', (size_t)(e - lb)) : NULL;
    if (mem.async_copy && async_copy_source(op, op_end, e, &lb, &rb, &mem)) {
        add_note(c, c->fn_name, what,
                 "cp.async with a source size, ignore-src or an unusual form is not checked");
        c->r->pub.skipped++;
        return;
    }
    plan pl;
    memset(&pl, 0, sizeof pl);
    if (!lb || !rb || parse_address(c, lb + 1, rb, &pl.check)) {
        if (!c->oom) {
            add_note(c, c->fn_name, what, "address operand not understood");
            c->r->pub.skipped++;
        }
        return;
    }
    /* The instruction as written (from its first character, guard included),
     * with "[...]" replaced by the checked address register. */
    const char *ins = c->text + s->start, *ins_end = c->text + s->end;
    size_t pre = (size_t)(lb - ins), post = (size_t)(ins_end - (rb + 1));
    char *insn = malloc(pre + post + sizeof("[" PTX_ADDR_REG "]"));
    if (!insn) {
        c->oom = 1;
        return;
    }
    memcpy(insn, ins, pre);
    memcpy(insn + pre, "[" PTX_ADDR_REG "]", sizeof("[" PTX_ADDR_REG "]") - 1);
    memcpy(insn + pre + sizeof("[" PTX_ADDR_REG "]") - 1, rb + 1, post);
    pl.check.insn = pool_strndup(c, insn, pre + post + sizeof("[" PTX_ADDR_REG "]") - 1);
    free(insn);
    pl.check.guard = guard ? pool_strndup(c, guard, guard_len) : NULL;
    pl.check.guard_neg = neg;
    pl.check.access = mem.access;
    pl.check.space = mem.space;
    pl.check.size = mem.size;
    pl.check.uniform = mem.uniform;
    pl.check.local_safe = PTX_LOCAL_SAFE;
    pl.stmt = si;

    mt_ptx_result *pub = &c->r->pub;
    if (grow((void **)&c->plans, &c->capplans, c->nplans, sizeof *c->plans) ||
        grow((void **)&pub->sites, &c->ncap_sites, pub->nsites, sizeof *pub->sites)) {
        c->oom = 1;
        return;
    }
    mt_check_site *site = &pub->sites[pub->nsites];
    memset(site, 0, sizeof *site);
    site->id = c->o->site_base + (uint32_t)pub->nsites;
    site->access = mem.access;
    site->space = mem.space;
    site->size = mem.size;
    site->uniform = mem.uniform;
    site->function = c->fn_name;
    site->text = collapse(c, c->text + s->start, s->end - s->start - 1);
    site->ptx_line = s->line;
    if (where->file >= 0 && where->file < 256) {
        site->file = c->files[where->file];
        site->src_line = where->line;
    }
    pl.check.id = site->id;
    pub->nsites++;
    c->plans[c->nplans++] = pl;
    if (mem.space == MT_CHECK_LOCAL)
        *needs_scratch = 1;
}

static const char *header_name(ctx *c, const ptx_stmt *s)
{
    const char *p = c->text + s->start, *e = c->text + s->end;
    /* skip to after .entry/.func, then an optional "(.param ...)" return list */
    const char *k = NULL;
    for (const char *q = p; q + 5 <= e; q++)
        if ((memcmp(q, ".entry", 6) == 0 && q + 6 <= e) || memcmp(q, ".func", 5) == 0) {
            k = q + (q[1] == 'e' ? 6 : 5);
            break;
        }
    if (!k)
        return pool_strndup(c, "?", 1);
    k = skip_ws(k, e);
    if (k < e && *k == '(') {
        int depth = 0;
        for (; k < e; k++) {
            if (*k == '(')
                depth++;
            else if (*k == ')' && --depth == 0) {
                k++;
                break;
            }
        }
        k = skip_ws(k, e);
    }
    const char *ne = ident_end(k, e);
    return pool_strndup(c, k, (size_t)(ne - k));
}

static void parse_line_directive(ctx *c, const ptx_stmt *s, loc *where, int *version_ok, int *target_ok,
                                 int *addr64)
{
    const char *p = c->text + s->start, *e = c->text + s->end;
    if (memcmp(p, ".version", 8) == 0) {
        *version_ok = 1;
    } else if (memcmp(p, ".target", 7) == 0) {
        *target_ok = 1;
    } else if (memcmp(p, ".address_size", 13) == 0) {
        *addr64 = atoi(skip_ws(p + 13, e)) == 64;
    } else if (memcmp(p, ".loc", 4) == 0) {
        char *q;
        where->file = (int)strtol(p + 4, &q, 10);
        where->line = (uint32_t)strtoul(q, NULL, 10);
    } else if (memcmp(p, ".file", 5) == 0) {
        char *q;
        long idx = strtol(p + 5, &q, 10);
        const char *qs = memchr(q, '"', (size_t)(e - q));
        const char *qe = qs ? memchr(qs + 1, '"', (size_t)(e - qs - 1)) : NULL;
        if (idx >= 0 && idx < 256 && qs && qe) {
            char *name = pool_strndup(c, qs + 1, (size_t)(qe - qs - 1));
            if (name)
                c->files[idx] = name;
        }
    }
}

/* Pass 1. Returns 0 or MT_ECHECK_PTX. */
static int scan(ctx *c)
{
    int version_ok = 0, target_ok = 0, addr64 = 0, depth = 0, pending_fn = 0, in_fn = 0;
    size_t body_open = 0;
    int needs_scratch = 0;
    loc where = {-1, 0};
    /* .file directives come last in nvcc's output: read them first. */
    for (size_t i = 0; i < c->lx.n; i++)
        if (c->lx.v[i].kind == PTX_LINE && memcmp(c->text + c->lx.v[i].start, ".file", 5) == 0)
            parse_line_directive(c, &c->lx.v[i], &where, &version_ok, &target_ok, &addr64);
    for (size_t i = 0; i < c->lx.n && !c->oom; i++) {
        const ptx_stmt *s = &c->lx.v[i];
        const char *p = c->text + s->start;
        switch (s->kind) {
        case PTX_LINE:
            parse_line_directive(c, s, &where, &version_ok, &target_ok, &addr64);
            break;
        case PTX_HEADER:
            if (depth != 0)
                return MT_ECHECK_PTX;
            c->fn_name = header_name(c, s);
            c->nregs = 0;
            pending_fn = 1;
            break;
        case PTX_OPEN:
            if (depth == 0 && pending_fn) {
                in_fn = 1;
                pending_fn = 0;
                body_open = i;
                needs_scratch = 0;
                c->r->pub.functions++;
            }
            depth++;
            break;
        case PTX_CLOSE:
            if (--depth < 0)
                return MT_ECHECK_PTX;
            if (depth == 0 && in_fn) {
                in_fn = 0;
                if (needs_scratch) {
                    if (grow((void **)&c->scratch_open, &c->capscratch, c->nscratch, sizeof *c->scratch_open))
                        c->oom = 1;
                    else
                        c->scratch_open[c->nscratch++] = body_open;
                }
            }
            break;
        case PTX_STMT:
            if (!in_fn) {
                if (depth == 0 && *p == '.')
                    parse_variable(c, p, c->text + s->end);
            } else if (*p == '.') {
                if (memcmp(p, ".reg", 4) == 0 && !mti_ptx_is_ident_char((unsigned char)p[4]))
                    parse_reg_decl(c, p, c->text + s->end);
            } else {
                instruction(c, i, &where, &needs_scratch);
            }
            break;
        case PTX_LABEL:
        case PTX_SECTION:
            break;
        }
    }
    if (c->oom)
        return -ENOMEM;
    if (depth != 0 || pending_fn || !version_ok || !target_ok || !addr64)
        return MT_ECHECK_PTX;
    return 0;
}

/* Pass 2. */
static void emit(ctx *c, ptx_sb *b)
{
    size_t pos = 0, pi = 0, oi = 0;
    for (size_t i = 0; i < c->lx.n; i++) {
        const ptx_stmt *s = &c->lx.v[i];
        mti_ptx_sb_put(b, c->text + pos, s->start - pos); /* the gap: blanks and comments */
        if (pi < c->nplans && c->plans[pi].stmt == i) {
            mti_ptx_emit_check(b, &c->plans[pi].check, c->o);
            pi++;
        } else {
            mti_ptx_sb_put(b, c->text + s->start, s->end - s->start);
            if (oi < c->nscratch && c->scratch_open[oi] == i) {
                mti_ptx_sb_puts(b, "\n\t.local .align 16 .b8 \t" PTX_LOCAL_SAFE "[32]; // memtrack check: "
                                   "where failing .local accesses go");
                oi++;
            }
        }
        pos = s->end;
    }
    mti_ptx_sb_put(b, c->text + pos, strlen(c->text) - pos);
    const mt_ptx_result *pub = &c->r->pub;
    if (pub->nvars) {
        mti_ptx_sb_printf(b, "\n// memtrack check: the generic address and size of each module variable\n"
                             ".visible .global .align 8 .u64 %s[%zu] = {",
                          MT_PTX_GLOBALS_TABLE, 2 * pub->nvars);
        for (size_t v = 0; v < pub->nvars; v++)
            mti_ptx_sb_printf(b, "%sgeneric(%s), %llu", v ? ", " : "", pub->vars[v].name,
                              (unsigned long long)pub->vars[v].size);
        mti_ptx_sb_puts(b, "};\n");
    }
}

void mt_ptx_result_free(mt_ptx_result *pub)
{
    if (!pub)
        return;
    result_impl *r = (result_impl *)pub;
    for (size_t i = 0; i < r->npool; i++)
        free(r->pool[i]);
    free(r->pool);
    free(pub->text);
    free(pub->sites);
    free(pub->vars);
    free(pub->notes);
    free(r);
}

int mt_ptx_instrument(const char *ptx, size_t len, const mt_ptx_opts *opts, mt_ptx_result **out)
{
    if (!ptx || !opts || !out)
        return -EINVAL;
    *out = NULL;
    ctx c;
    memset(&c, 0, sizeof c);
    c.o = opts;
    /* Work on a NUL-terminated copy: the lexer's spans and strtol need it. */
    char *text = malloc(len + 1);
    if (!text)
        return -ENOMEM;
    memcpy(text, ptx, len);
    text[len] = 0;
    len = strlen(text); /* an image may carry NULs after its text */
    c.text = text;
    int rc = -ENOMEM;
    if (!(c.r = calloc(1, sizeof *c.r)))
        goto done;
    if ((rc = mti_ptx_lex(text, len, &c.lx)) != 0)
        goto done;
    if ((rc = scan(&c)) != 0)
        goto done;
    ptx_sb b = {0};
    emit(&c, &b);
    if (b.oom || c.oom) {
        free(b.p);
        rc = -ENOMEM;
        goto done;
    }
    c.r->pub.text = b.p;
    c.r->pub.len = b.n;
    *out = &c.r->pub;
    c.r = NULL;
    rc = 0;
done:
    if (c.r)
        mt_ptx_result_free(&c.r->pub);
    mti_ptx_lexed_free(&c.lx);
    free(c.regs);
    free(c.plans);
    free(c.scratch_open);
    free(text);
    return rc;
}
