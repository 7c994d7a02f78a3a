/* memtrack-hostile: a Vulkan application that does, one behaviour per run,
 * the legal things real applications do that a capture layer can break:
 * kernel writes into mapped memory, its own signal handlers and masks, its
 * own mprotect/madvise, fork/exec, events and timeline semaphores, several
 * instances, external memory, abnormal exits.
 *
 * Every behaviour checks its own results on the GPU (the device copies what
 * the app wrote into a readback buffer, and the app compares that with its
 * model of what it wrote), so a layer that changes what the application
 * observes fails the run; `memtrack verify` then checks the trace.
 *
 * Exit codes: 0 ok, 1 a check failed, 2 usage, 3 Vulkan unavailable,
 * 77 the driver lacks what the behaviour needs (reported, not a pass). */
#ifndef HV_H
#define HV_H

#include <stddef.h>
#include <stdint.h>
#include <vulkan/vulkan.h>

#define HV_SKIP 77

/* One HOST_VISIBLE|HOST_COHERENT memory with one buffer over all of it. */
typedef struct hv_mem {
    VkDeviceMemory mem;
    VkBuffer buf;
    VkDeviceSize size;
    unsigned char *ptr;   /* mapped pointer, NULL while unmapped */
    unsigned char *model; /* what the application believes the memory holds */
} hv_mem;

typedef struct hv {
    VkInstance inst;
    VkPhysicalDevice phys;
    VkDevice dev;
    VkQueue queue;
    uint32_t family, host_type;
    VkPhysicalDeviceProperties props;
    VkCommandPool pool;
    VkCommandBuffer cmd;
    VkFence fence;
    int frames; /* submits a behaviour makes where it loops; --frames */
} hv;

typedef struct hv_opts {
    const char *const *device_exts; /* extensions the behaviour needs */
    uint32_t ndevice_exts;
    int timeline; /* enable timelineSemaphore */
    void *features; /* feature structures (a chain) put into VkDeviceCreateInfo's */
} hv_opts;

/* Creates instance, device, queue, command pool/buffer and fence. Returns 0,
 * HV_SKIP when an extension or feature is missing, 3 without Vulkan. */
int hv_init(hv *h, const hv_opts *o);
void hv_fini(hv *h);
/* Another device on h's instance and physical device (copied from a set-up
 * hv into a fresh one), and its end, leaving the instance. */
int hv_init_device(hv *h, const hv_opts *o);
void hv_fini_device(hv *h);

/* A coherent memory of `size` bytes with a buffer of `usage` bound at 0,
 * zero-filled through the mapping, left mapped. Staging memories get
 * HV_SRC (the device only reads them: a capture must find the app's writes
 * by tracking, not by diffing device-writable ranges); readback memories get
 * HV_DST. pnext chains into VkMemoryAllocateInfo, buf_pnext into
 * VkBufferCreateInfo (external memory). Exits 3 on failure. */
#define HV_SRC VK_BUFFER_USAGE_TRANSFER_SRC_BIT
#define HV_DST VK_BUFFER_USAGE_TRANSFER_DST_BIT
void hv_alloc_ex(hv *h, hv_mem *m, VkDeviceSize size, VkBufferUsageFlags usage, const void *pnext,
                 const void *buf_pnext, int map);
void hv_alloc(hv *h, hv_mem *m, VkDeviceSize size, VkBufferUsageFlags usage);
void hv_free(hv *h, hv_mem *m);
void hv_map(hv *h, hv_mem *m);
void hv_unmap(hv *h, hv_mem *m);

/* Writes `len` deterministic bytes (from `seed`) at `off` through the
 * mapping and into the model. */
void hv_write(hv_mem *m, VkDeviceSize off, VkDeviceSize len, uint64_t seed);
/* Fills buf with the bytes hv_write would write. */
void hv_pattern(unsigned char *buf, size_t len, uint64_t seed);

/* The device copies all of src into dst (dst at least as large); the host
 * waits on the fence, then compares dst's mapping with src's model. Returns
 * 0 or 1 (and prints the first difference). */
int hv_gpu_check(hv *h, hv_mem *src, hv_mem *dst, const char *what);

/* Submits h->cmd and waits on the fence. */
void hv_submit_wait(hv *h);
void hv_begin(hv *h);
void hv_end(hv *h);

/* Frames of ordinary work on 1 MiB: eight writes per frame (from `seed`),
 * then a GPU check named `what`. Returns 0 or 1. */
int hv_frames_of_work(hv *h, uint64_t seed, const char *what);

/* Sleeps `ms` milliseconds, through interruptions. */
void hv_sleep_ms(long ms);
/* 0 when wait status `st` is an exit with `code`, else 1 with a message. */
int hv_status_is(int st, int code, const char *what);
/* Waits at most 30 s for child `pid` to exit with `code`: a child hung in an
 * exit handler fails the run (killed, "hung" said) instead of hanging it. */
int hv_wait_status(int pid, int code, const char *what);

/* 0 when the bytes equal, else 1 with a message naming `what`. */
int hv_compare(const unsigned char *got, const unsigned char *want, size_t len, const char *what);

uint64_t hv_rnd(uint64_t *s);
void hv_die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
extern const char *hv_argv0;

#define HV_VK(call)                                                                                \
    do {                                                                                           \
        VkResult r_ = (call);                                                                      \
        if (r_ != VK_SUCCESS)                                                                      \
            hv_die("%s failed (%d)", #call, (int)r_);                                              \
    } while (0)

/* A behaviour: returns the exit code. */
typedef struct hv_behaviour {
    const char *name;
    const char *what;
    int (*run)(hv *h, int argc, char **argv);
} hv_behaviour;

extern const hv_behaviour hv_kernel_behaviours[];
extern const hv_behaviour hv_signal_behaviours[];
extern const hv_behaviour hv_memory_behaviours[];
extern const hv_behaviour hv_process_behaviours[];
extern const hv_behaviour hv_sync_behaviours[];
extern const hv_behaviour hv_explore_behaviours[];
extern const hv_behaviour hv_sandbox_behaviours[];
extern const hv_behaviour hv_limits_behaviours[];

#endif
