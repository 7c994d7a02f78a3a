#include <stdio.h>
#include <stdlib.h>

#include "fuzz.h"

void mt_fuzz_fail(const char *what)
{
    fprintf(stderr, "fuzz invariant broken: %s\n", what);
    abort();
}
