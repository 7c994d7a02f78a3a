/* PTX statement lexer (see lex.h). PTX has three statement shapes: '{' / '}'
 * blocks, 'label:' and ';'-terminated statements; a few directives end at the
 * end of their line instead, function headers end at the '{' of their body,
 * and debug sections are opaque blocks of line-terminated data. Comments and
 * strings are skipped wherever a ';' or '{' could hide in them. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "memtrack/check.h"
#include "lex.h"

int mti_ptx_is_ident_char(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '$' || c == '%' || c == '.';
}

const char *mti_ptx_skip_space(const char *p, const char *end)
{
    while (p < end) {
        if (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == '\f' || *p == '\v') {
            p++;
        } else if (p + 1 < end && p[0] == '/' && p[1] == '/') {
            while (p < end && *p != '\n')
                p++;
        } else if (p + 1 < end && p[0] == '/' && p[1] == '*') {
            const char *q = p + 2;
            while (q + 1 < end && !(q[0] == '*' && q[1] == '/'))
                q++;
            if (q + 1 >= end)
                return end; /* unterminated: the caller sees end */
            p = q + 2;
        } else {
            break;
        }
    }
    return p;
}

static int push(ptx_lexed *l, ptx_stmt_kind k, uint32_t line, size_t s, size_t e)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 256;
        ptx_stmt *nv = realloc(l->v, cap * sizeof *nv);
        if (!nv)
            return -ENOMEM;
        l->v = nv;
        l->cap = cap;
    }
    l->v[l->n++] = (ptx_stmt){k, line, s, e};
    return 0;
}

/* Does the word at p (up to end) equal w, followed by a non-identifier char? */
static int word_is(const char *p, const char *end, const char *w)
{
    size_t n = strlen(w);
    return (size_t)(end - p) >= n && memcmp(p, w, n) == 0 &&
           (p + n == end || !mti_ptx_is_ident_char((unsigned char)p[n]) || p[n] == '.');
}

static int is_header_start(const char *p, const char *end)
{
    /* Linkage words that may precede .entry/.func. */
    static const char *const link[] = {".visible", ".extern", ".weak", ".common", NULL};
    for (;;) {
        int matched = 0;
        for (int i = 0; link[i]; i++)
            if (word_is(p, end, link[i])) {
                p = mti_ptx_skip_space(p + strlen(link[i]), end);
                matched = 1;
                break;
            }
        if (!matched)
            break;
    }
    return word_is(p, end, ".entry") || word_is(p, end, ".func");
}

/* Advances past a string literal starting at p ('"'); returns NULL if unterminated. */
static const char *skip_string(const char *p, const char *end)
{
    for (p++; p < end; p++) {
        if (*p == '\\' && p + 1 < end)
            p++;
        else if (*p == '"')
            return p + 1;
    }
    return NULL;
}

static uint32_t count_lines(const char *from, const char *to)
{
    uint32_t n = 0;
    for (; from < to; from++)
        n += *from == '\n';
    return n;
}

int mti_ptx_lex(const char *text, size_t len, ptx_lexed *out)
{
    memset(out, 0, sizeof *out);
    const char *p = text, *end = text + len, *line_mark = text;
    uint32_t line = 1;
    int rc = 0;
    for (;;) {
        const char *q = mti_ptx_skip_space(p, end);
        if (q >= end)
            break; /* trailing blanks and comments stay in the gap after the last statement */
        line += count_lines(line_mark, q);
        line_mark = q;
        size_t s = (size_t)(q - text);
        const char *e;
        ptx_stmt_kind k;
        if (*q == '{') {
            k = PTX_OPEN;
            e = q + 1;
        } else if (*q == '}') {
            k = PTX_CLOSE;
            e = q + 1;
        } else if (word_is(q, end, ".version") || word_is(q, end, ".target") ||
                   word_is(q, end, ".address_size") || word_is(q, end, ".loc") ||
                   word_is(q, end, ".file")) {
            k = PTX_LINE;
            e = q;
            while (e < end && *e != '\n' && !(e + 1 < end && e[0] == '/' && (e[1] == '/' || e[1] == '*'))) {
                if (*e == '"') {
                    if (!(e = skip_string(e, end))) {
                        rc = MT_ECHECK_PTX;
                        goto fail;
                    }
                    continue;
                }
                e++;
            }
            while (e > q && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
                e--;
        } else if (word_is(q, end, ".section")) {
            /* ".section .name { data lines }": opaque, to the matching '}'. */
            k = PTX_SECTION;
            int depth = 0;
            for (e = q; e < end; e++) {
                if (*e == '"') {
                    if (!(e = skip_string(e, end)))
                        break;
                    e--;
                } else if (*e == '{') {
                    depth++;
                } else if (*e == '}' && --depth == 0) {
                    break;
                }
            }
            if (!e || e >= end) {
                rc = MT_ECHECK_PTX;
                goto fail;
            }
            e++;
        } else if (is_header_start(q, end)) {
            k = PTX_HEADER;
            int paren = 0;
            for (e = q; e < end; e++) {
                e = mti_ptx_skip_space(e, end);
                if (e >= end)
                    break;
                if (*e == '(')
                    paren++;
                else if (*e == ')')
                    paren--;
                else if (paren == 0 && (*e == '{' || *e == ';'))
                    break;
            }
            if (e >= end) {
                rc = MT_ECHECK_PTX;
                goto fail;
            }
            if (*e == ';') { /* a prototype: a whole statement */
                k = PTX_STMT;
                e++;
            }
        } else {
            /* A label is an identifier followed by ':' (not '::' as in L2::128B). */
            const char *t = q;
            while (t < end && mti_ptx_is_ident_char((unsigned char)*t) && *t != '.')
                t++;
            if (t > q && t < end && *t == ':' && (t + 1 >= end || t[1] != ':') && *q != '%' && *q != '@') {
                k = PTX_LABEL;
                e = t + 1;
            } else {
                k = PTX_STMT;
                for (e = q; e < end && *e != ';'; e++) {
                    if (*e == '"') {
                        if (!(e = skip_string(e, end))) {
                            rc = MT_ECHECK_PTX;
                            goto fail;
                        }
                        e--;
                    } else if (e + 1 < end && e[0] == '/' && (e[1] == '/' || e[1] == '*')) {
                        const char *after = mti_ptx_skip_space(e, end);
                        if (after >= end) {
                            e = end;
                            break;
                        }
                        e = after - 1;
                    }
                }
                if (e >= end) {
                    rc = MT_ECHECK_PTX;
                    goto fail;
                }
                e++;
            }
        }
        if ((rc = push(out, k, line, s, (size_t)(e - text))) != 0)
            goto fail;
        p = e;
    }
    return 0;
fail:
    mti_ptx_lexed_free(out);
    return rc;
}

void mti_ptx_lexed_free(ptx_lexed *l)
{
    free(l->v);
    memset(l, 0, sizeof *l);
}
