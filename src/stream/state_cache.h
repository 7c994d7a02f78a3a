/* The state-elision cache: the last value the stream sent for each state
 * register (the HardDoom driver's cache of surface addresses and dims).
 *
 * An entry is trusted only while its valid bit is set. Everything that can
 * change device state behind the stream's back clears the bits: a RESET
 * (mt_stream_reset) clears them all before it is even written, so a RESET
 * that fails to go out leaves the cache conservative, never wrong. A state
 * command that fails to be written does not update its entry. */
#ifndef MT_STREAM_STATE_CACHE_H
#define MT_STREAM_STATE_CACHE_H

#include <stdint.h>

typedef struct mt_state_cache {
    uint64_t value[64];
    uint64_t valid; /* bit i: value[i] is what the device holds */
} mt_state_cache;

/* 1 when the device is known to hold `v` in `slot` (slot < 64). */
static inline int mti_state_cache_hit(const mt_state_cache *c, uint32_t slot, uint64_t v)
{
    return (c->valid >> slot & 1) && c->value[slot] == v;
}

static inline void mti_state_cache_note(mt_state_cache *c, uint32_t slot, uint64_t v)
{
    c->value[slot] = v;
    c->valid |= 1ull << slot;
}

static inline void mti_state_cache_forget(mt_state_cache *c)
{
    c->valid = 0;
}

#endif
