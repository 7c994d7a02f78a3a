/* memtrack device_sim: a simulated asynchronous device behind a stream.
 *
 * The device is a thread that consumes an mt_stream and executes its commands
 * against its own memory: a separate device address range (starting at
 * `base`, not a host pointer) backed by host memory the simulator owns and
 * managed by a memtrack `alloc` region. Host code reaches it only through
 * mt_sim_alloc/free/read/write.
 *
 * The memory model is that of a pipelined device, so that a missing barrier
 * shows up as wrong memory: a command reads memory when it executes, but its
 * writes are posted and become visible (in order) only at the next BARRIER,
 * FENCE or RESET (or when the posted-write buffer fills). A read of memory
 * written since the last barrier therefore sees the old contents.
 *
 * Commands: the stream's NOP, STATE, FENCE, BARRIER, RESET, plus MT_SIM_FILL,
 * MT_SIM_COPY and MT_SIM_STORE below. A command touching memory outside the
 * device range, an unknown op or an unknown state register is a device fault:
 * the device is lost (MT_EDEVLOST), as real hardware would be.
 *
 * Fault injection (mt_sim_faults): delays every Nth command, device loss at
 * a chosen command, a stall (the device stops until mt_sim_unstall), and
 * mt_sim_lose() from any thread. Command numbers count from 1 at attach. */
#ifndef MEMTRACK_DEVICE_SIM_H
#define MEMTRACK_DEVICE_SIM_H

#include <stddef.h>
#include <stdint.h>

#include "memtrack/base.h"
#include "memtrack/stream.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mt_sim mt_sim;

/* State registers (mt_stream_set_state slots) the device understands. */
enum mt_sim_reg {
    MT_SIM_REG_DST = 0,   /* destination address */
    MT_SIM_REG_SRC = 1,   /* source address */
    MT_SIM_REG_LEN = 2,   /* length in bytes */
    MT_SIM_REG_VALUE = 3, /* fill pattern: 8 bytes, little-endian, repeated */
    MT_SIM_NREGS = 4
};

enum mt_sim_op {
    MT_SIM_FILL = MT_CMD_USER,      /* [DST, DST+LEN) := VALUE pattern (pattern byte i%8 at byte i) */
    MT_SIM_COPY = MT_CMD_USER + 1,  /* [DST, DST+LEN) := [SRC, SRC+LEN) as read now (memmove) */
    MT_SIM_STORE = MT_CMD_USER + 2, /* 8 bytes at address b := a (little-endian); no state */
};

typedef struct mt_sim_faults {
    uint64_t lose_at;     /* command number at which the device is lost instead of
                           * executing it; 0 = never */
    uint64_t stall_at;    /* the device stops before this command until
                           * mt_sim_unstall (or loss, or detach); 0 = never */
    uint32_t delay_every; /* sleep delay_ns before every Nth command; 0 = never */
    uint32_t delay_ns;
} mt_sim_faults;

typedef struct mt_sim_opts {
    size_t mem_size;     /* bytes of device memory; 0 = 16 MiB */
    uint64_t base;       /* device address of the first byte; 0 = MT_SIM_DEFAULT_BASE */
    size_t posted_bytes; /* posted-write buffer; 0 = 64 KiB */
    mt_sim_faults faults;
    uint64_t reserved[4]; /* zero: room to grow (docs/design.md, "Options") */
} mt_sim_opts;

#define MT_SIM_DEFAULT_BASE 0x10000000000ull /* 1 TiB: far from typical host pointers */

typedef struct mt_sim_stats {
    uint64_t executed;  /* commands executed since attach */
    uint64_t fences;    /* fences signalled */
    uint64_t barriers;  /* barriers executed */
    uint64_t commits;   /* times posted writes were made visible */
    uint64_t overflows; /* commits forced by a full posted-write buffer */
    int lost;           /* 0, or the loss code */
} mt_sim_stats;

/* Creates a detached device with zeroed memory. `opts` may be NULL. Returns
 * 0 and sets *out, -EINVAL, or -ENOMEM. Any thread. */
MT_API int mt_sim_create(const mt_sim_opts *opts, mt_sim **out);

/* Detaches (stopping the device thread) and frees the device. NULL: no-op. */
MT_API void mt_sim_destroy(mt_sim *sim);

/* Starts the device thread consuming `s`. Returns 0, -EBUSY (already
 * attached), MT_EDEVLOST (lost: mt_sim_reset first) or a pthread error.
 * Not concurrently with attach/detach/reset. */
MT_API int mt_sim_attach(mt_sim *sim, mt_stream *s);

/* Stops the device thread at the next command boundary and joins it.
 * Commands still in the ring are not executed; posted writes are made
 * visible unless the device was lost. Not concurrently with attach/reset. */
MT_API void mt_sim_detach(mt_sim *sim);

/* Brings a detached, possibly lost device back: clears the loss, the state
 * registers and posted writes; memory and allocations are kept. Returns 0 or
 * -EBUSY (attached). */
MT_API int mt_sim_reset(mt_sim *sim);

/* Replaces the fault plan; takes effect at the next attach. Returns 0 or
 * -EBUSY (attached). */
MT_API int mt_sim_set_faults(mt_sim *sim, const mt_sim_faults *faults);

/* Allocates `size` bytes of device memory (rounded up to 8) aligned to
 * `align` (a power of two; 0 = 64) from the device range's alloc region.
 * Returns 0 and sets *addr (a device address), -EINVAL, -ENOSPC (device
 * memory full) or -ENOMEM (host metadata). Any thread. */
MT_API int mt_sim_alloc(mt_sim *sim, size_t size, size_t align, uint64_t *addr);

/* Frees memory from mt_sim_alloc. The caller makes sure no queued command
 * still uses it (mt_stream_defer does exactly that). Returns 0, -ENOENT (no
 * allocation starts at addr) or -EINVAL (outside the range). Any thread. */
MT_API int mt_sim_free(mt_sim *sim, uint64_t addr);

/* Copies `len` bytes of device memory at `addr` to the host. The caller
 * orders this after a fence covering the device's writes there. Returns 0 or
 * -EFAULT (outside the range). Any thread. */
MT_API int mt_sim_read(mt_sim *sim, uint64_t addr, void *dst, size_t len);

/* Copies `len` host bytes into device memory at `addr`. The caller orders
 * this before writing the commands that read it, and after the device's last
 * use of that memory. Returns 0 or -EFAULT (outside the range). Any thread. */
MT_API int mt_sim_write(mt_sim *sim, uint64_t addr, const void *src, size_t len);

/* Returns the device address of the first byte of device memory. Any thread. */
MT_API uint64_t mt_sim_base(const mt_sim *sim);

/* Returns the size in bytes of the device range. Any thread. */
MT_API size_t mt_sim_size(const mt_sim *sim);

/* Loses the device now (a watchdog's verdict): the thread stops and the
 * attached stream is lost with MT_EDEVLOST. Any thread. */
MT_API void mt_sim_lose(mt_sim *sim);

/* Lets a stalled device go on. Any thread. */
MT_API void mt_sim_unstall(mt_sim *sim);

/* Copies the counters into *out (exact once the device thread is idle or
 * detached; approximate while it runs). Any thread. */
MT_API void mt_sim_stats_get(mt_sim *sim, mt_sim_stats *out);

#ifdef __cplusplus
}
#endif
#endif
