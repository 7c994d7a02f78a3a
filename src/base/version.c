#include "memtrack/base.h"

int mt_version(void) { return MT_VERSION; }

const char *mt_version_string(void) { return MT_VERSION_STRING; }
