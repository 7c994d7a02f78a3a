/* Text the commands share: JSON strings and the names of trace endings. */
#include <stdio.h>

#include "cli.h"
#include "memtrack/trace.h"

void mt_cli_json_string(FILE *f, const char *s, size_t n, int html_safe)
{
    fputc('"', f);
    for (size_t i = 0; i < n && s[i]; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20 || (html_safe && (c == '<' || c == '>' || c == '&')))
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

const char *mt_cli_end_name(int end)
{
    switch (end) {
    case MT_TRACE_END_CLOSED: return "closed";
    case MT_TRACE_END_CHECKPOINT: return "checkpoint";
    case MT_TRACE_END_EMERGENCY: return "emergency";
    default: return "scanned";
    }
}
