/* Extending wrapping N-bit device counters to 64-bit timeline values.
 *
 * The device's counter holds the low N bits of the true value. Given a
 * reference (the last value we know, e.g. the completed one) that lies within
 * 2^(N-1) of the true value, the true value is ref plus the N-bit difference
 * (raw - ref) read as a *signed* N-bit number: a forward distance below half
 * the range is progress, anything else is a stale read behind ref. */
#include "memtrack/timeline.h"

/* Sign-extends the low `bits` bits of x (1 <= bits <= 64). */
static int64_t sign_extend(uint64_t x, unsigned bits)
{
    if (bits >= 64)
        return (int64_t)x;
    uint64_t sign = 1ull << (bits - 1);
    x &= (sign << 1) - 1;
    /* (x ^ sign) - sign maps [0, 2^bits) onto [-2^(bits-1), 2^(bits-1)). */
    return (int64_t)((x ^ sign) - sign);
}

uint64_t mt_fence_extend(uint64_t ref, uint64_t raw, unsigned bits)
{
    if (bits == 0 || bits > 64)
        bits = 64;
    /* Unsigned wrap-around of ref + delta is the intended mod-2^64 result. */
    return ref + (uint64_t)sign_extend(raw - ref, bits);
}

int mt_fence_reached(uint64_t done, uint64_t target, unsigned bits)
{
    if (bits == 0 || bits > 64)
        bits = 64;
    return sign_extend(done - target, bits) >= 0;
}
