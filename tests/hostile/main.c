/* memtrack-hostile BEHAVIOUR [ARGS] [--frames N] | --list
 * Environment: HV_MEMORY=device-local takes device-local host-visible
 * memory (the PCI BAR on a discrete GPU) instead of the first host-visible
 * coherent type; HV_VERBOSE=1 says which type; HV_HANG_DUMP=1 has gdb print
 * every thread of a child that hangs. See hv.h. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hv.h"

static const hv_behaviour *const g_groups[] = {hv_process_behaviours, hv_kernel_behaviours,
                                               hv_signal_behaviours, hv_memory_behaviours, hv_explore_behaviours,
                                               hv_sync_behaviours, hv_sandbox_behaviours, hv_limits_behaviours};
#define NGROUPS (sizeof g_groups / sizeof g_groups[0])

static int usage(void)
{
    fprintf(stderr, "usage: memtrack-hostile BEHAVIOUR [ARGS] [--frames N] | --list\n"
                    "environment: HV_MEMORY=device-local (device-local host-visible memory), HV_VERBOSE=1,\n"
                    "HV_HANG_DUMP=1 (gdb's backtraces of a child that hangs)\n");
    return 2;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return usage();
    if (strcmp(argv[1], "--list") == 0) {
        for (size_t g = 0; g < NGROUPS; g++)
            for (const hv_behaviour *b = g_groups[g]; b->name; b++)
                printf("%-20s %s\n", b->name, b->what);
        return 0;
    }
    hv h = {0};
    /* --frames N anywhere after the behaviour; the rest is the behaviour's. */
    int n = 0;
    char *args[64];
    for (int i = 1; i < argc && n < 63; i++) {
        if (strcmp(argv[i], "--frames") == 0 && i + 1 < argc)
            h.frames = atoi(argv[++i]);
        else
            args[n++] = argv[i];
    }
    args[n] = NULL;
    for (size_t g = 0; g < NGROUPS; g++)
        for (const hv_behaviour *b = g_groups[g]; b->name; b++)
            if (strcmp(b->name, args[0]) == 0) {
                int rc = b->run(&h, n, args);
                if (rc == 0)
                    printf("%s: %s: ok\n", hv_argv0, b->name);
                return rc;
            }
    fprintf(stderr, "%s: unknown behaviour '%s' (--list)\n", hv_argv0, args[0]);
    return 2;
}
