/* mt_strerror: text for 0, negated errno values and memtrack's MT_E* codes. */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>

#include "memtrack/base.h"

static const char *mt_own_error(int code)
{
    switch (code) {
    case MT_ECORRUPT: return "corrupt input: data failed validation";
    case MT_ECHECKSUM: return "checksum mismatch";
    case MT_ETRUNCATED: return "truncated input";
    case MT_EVERSION: return "unsupported format version";
    case MT_EDEVLOST: return "device lost";
    case MT_EDEGRADED: return "succeeded with reduced precision (degraded)";
    case MT_EUNSUPPORTED: return "not supported on this platform or kernel";
    case MT_ECANCELED: return "wait cancelled";
    case MT_ETIMEDOUT: return "wait timed out";
    case MT_ENOBUF: return "no such buffer (freed, invalid, or owned by another client)";
    case MT_EDEVMEM: return "device memory full: nothing evictable";
    case MT_ELOSTDATA: return "buffer content lost with its device";
    case MT_EMAPPED: return "buffer range is mapped for the host";
    case MT_ECHECK_NOACCESS: return "address not addressable";
    case MT_ECHECK_UNINIT: return "read of uninitialised memory";
    case MT_ECHECK_PTX: return "PTX text not understood";
    case MT_EFORKED: return "object of the parent process: not usable in a forked child";
    case MT_EUNMAPPED: return "memory was unmapped or moved by the application";
    default: return NULL;
    }
}

const char *mt_strerror(int code)
{
    if (code == 0)
        return "success";
    if (code > 0)
        return "unknown error (positive code)";
    const char *own = mt_own_error(code);
    if (own)
        return own;
    if (code > -4096) {
        /* strerrordesc_np (glibc >= 2.32) returns static text and, unlike
         * strerror, is thread-safe and locale-independent. */
        const char *s = strerrordesc_np(-code);
        if (s)
            return s;
    }
    return "unknown error";
}
