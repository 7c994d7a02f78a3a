/* PTX statements: the text split into the units the instrumenter decides on,
 * each an exact span of the input so that everything not instrumented is
 * copied through byte for byte. */
#ifndef MT_CHECK_PTX_LEX_H
#define MT_CHECK_PTX_LEX_H

#include <stddef.h>
#include <stdint.h>

typedef enum ptx_stmt_kind {
    PTX_OPEN,      /* "{" */
    PTX_CLOSE,     /* "}" */
    PTX_LABEL,     /* "name:" */
    PTX_LINE,      /* a directive that ends at the end of its line: .version, .target,
                      .address_size, .loc, .file */
    PTX_SECTION,   /* ".section name { ... }", kept whole */
    PTX_HEADER,    /* a function header: "[linkage] .entry|.func ... " up to '{' or ';' (excl.) */
    PTX_STMT,      /* anything else, up to and including ';' */
} ptx_stmt_kind;

typedef struct ptx_stmt {
    ptx_stmt_kind kind;
    uint32_t line;   /* 1-based line of the first character */
    size_t start;    /* span in the input: [start, end) */
    size_t end;
} ptx_stmt;

typedef struct ptx_lexed {
    ptx_stmt *v;
    size_t n, cap;
} ptx_lexed;

/* Splits text[0, len) into statements. Returns 0, -ENOMEM, or MT_ECHECK_PTX
 * for an unterminated comment, string or statement. */
int mti_ptx_lex(const char *text, size_t len, ptx_lexed *out);
void mti_ptx_lexed_free(ptx_lexed *l);

/* Token helpers over a span. */
int mti_ptx_is_ident_char(int c);
/* Skips blanks and comments from p, not past end. */
const char *mti_ptx_skip_space(const char *p, const char *end);

#endif
