/* VK_LAYER_MEMTRACK_capture: internal structures shared by the layer's files.
 *
 * dispatch.c   loader interface, instance/device creation, proc-addr lookup
 * config.c     environment (MEMTRACK_*), process-wide capture context, trace file
 * map.c        handle -> pointer hash map
 * memory.c     vkAllocate/Free/Map/Unmap/Flush/Invalidate (+Map2/Unmap2)
 * objects.c    buffers and images: create, bind, destroy
 * queue.c      submits, present, sparse binding, waits
 * capture.c    per-memory capture in each mode, packets, content hashes
 * autopilot.c  `auto`: choosing guard or scan per memory from observed density
 *
 * Locking: one mutex per device (dev->lock) protects the device's maps and
 * memories and serialises captures, so that the UPDATE, CONTENT_HASH and
 * SUBMIT records of one submit stay together in the trace. The fault handler
 * (track) never takes it. Calls down the chain are made without it, except
 * map/unmap/free, which must be ordered with the capture of that memory. */
#ifndef MT_LAYER_H
#define MT_LAYER_H

#include <pthread.h>
#include <stdint.h>
#include <vulkan/vk_layer.h>
#include <vulkan/vulkan.h>

#include "memtrack/memtrack.h"

#define LT_LAYER_NAME "VK_LAYER_MEMTRACK_capture"

/* VK_KHR_map_memory2 postdates Debian 12's headers (1.3.239). */
#ifndef VK_KHR_map_memory2
#define VK_KHR_map_memory2 1
#define VK_STRUCTURE_TYPE_MEMORY_MAP_INFO_KHR ((VkStructureType)1000271000)
#define VK_STRUCTURE_TYPE_MEMORY_UNMAP_INFO_KHR ((VkStructureType)1000271001)
typedef VkFlags VkMemoryUnmapFlagsKHR;
typedef struct VkMemoryMapInfoKHR {
    VkStructureType sType;
    const void *pNext;
    VkMemoryMapFlags flags;
    VkDeviceMemory memory;
    VkDeviceSize offset;
    VkDeviceSize size;
} VkMemoryMapInfoKHR;
typedef struct VkMemoryUnmapInfoKHR {
    VkStructureType sType;
    const void *pNext;
    VkMemoryUnmapFlagsKHR flags;
    VkDeviceMemory memory;
} VkMemoryUnmapInfoKHR;
typedef VkResult(VKAPI_PTR *PFN_vkMapMemory2KHR)(VkDevice, const VkMemoryMapInfoKHR *, void **);
typedef VkResult(VKAPI_PTR *PFN_vkUnmapMemory2KHR)(VkDevice, const VkMemoryUnmapInfoKHR *);
#endif

typedef enum lt_mode {
    LT_AUTO = 0,
    LT_GUARD, /* track the driver's mapping in place */
    LT_SHADOW, /* hand the app an anonymous mapping; write back changed bytes */
    LT_SCAN,   /* no tracking: diff all exposed memory */
    LT_COPY,   /* no diff: copy all exposed memory */
    LT_NMODES
} lt_mode;

const char *lt_mode_name(lt_mode m);
int lt_mode_parse(const char *s); /* -1 if unknown */

/* ---- handle map (map.c) -------------------------------------------------- */
typedef struct lt_map {
    uint64_t *keys; /* 0 = empty, UINT64_MAX = deleted */
    void **vals;
    size_t cap, used, live;
} lt_map;

void *lt_map_get(const lt_map *m, uint64_t key);
int lt_map_put(lt_map *m, uint64_t key, void *val); /* 0 or -ENOMEM */
void *lt_map_del(lt_map *m, uint64_t key);
void lt_map_free(lt_map *m);
/* Calls fn for every value; fn may not modify the map. */
void lt_map_each(const lt_map *m, void (*fn)(void *val, void *arg), void *arg);

/* ---- objects and memories -------------------------------------------------- */
typedef struct lt_memory lt_memory;

typedef struct lt_object {
    uint64_t handle;
    uint64_t id;
    int is_image;
    int gpu_writable; /* a usage that lets the device write its memory */
    VkDeviceSize size; /* memory requirements (padded) */
    VkDeviceSize used; /* buffers: the size the app asked for */
    lt_memory *mem;    /* bound memory, NULL if not bound */
    VkDeviceSize offset;
} lt_object;

typedef struct lt_device lt_device;

struct lt_memory {
    VkDeviceMemory handle;
    uint64_t id;
    VkDeviceSize size;
    uint32_t type_index;
    VkMemoryPropertyFlags flags;
    lt_device *dev;

    /* mapping */
    int mapped;
    VkDeviceSize map_offset, map_size;
    unsigned char *driver_ptr; /* the driver's mapping of [map_offset, +map_size) */
    unsigned char *app_ptr;    /* what the app got: driver_ptr, or the shadow mapping */
    size_t app_len;            /* bytes of the shadow mapping (page-rounded) */

    /* What replay knows: reference[offset] is the content the trace carries
     * for byte `offset` of the memory. A zero-filled MAP_NORESERVE mapping of
     * the whole memory, touched only where mapped. [known_lo, known_hi) is
     * where it equals the real content (besides device writes, which are
     * diffed at every capture). */
    unsigned char *reference;
    VkDeviceSize known_lo, known_hi;

    lt_mode mode;       /* current mode of this memory */
    int auto_mode;      /* chosen by the autopilot */
    int fell_back;      /* tracking could not be set up: scan */
    mt_range_id range;  /* tracker range (guard: driver_ptr; shadow: app_ptr), 0 if none */
    mt_track_backend backend;

    /* autopilot state, kept across map/unmap cycles: a memory mapped every
     * frame is judged on its history, not restarted in guard each time */
    size_t hist[3];       /* pages written in the last three captures */
    unsigned nhist;
    double scan_page_ns;  /* measured cost of scanning one page of this memory, 0 if unknown */
    double guard_setup_ns; /* measured: arming + disarming its tracking once (map cycle) */
    double collect_ns;     /* measured: one collect of its tracker range */
    int remapped;          /* mapped more than once: guard pays setup every cycle */
    int streak;
    lt_mode auto_pref; /* mode auto left it in at the last unmap; LT_AUTO if never mapped */

    /* bindings sorted by offset */
    lt_object **binds;
    size_t nbinds, capbinds;

    lt_memory *next_mapped, *prev_mapped; /* device's list of mapped memories */
};

/* The device dispatch entries the layer uses. */
typedef struct lt_device_table {
    PFN_vkGetDeviceProcAddr GetDeviceProcAddr;
    PFN_vkDestroyDevice DestroyDevice;
    PFN_vkGetDeviceQueue GetDeviceQueue;
    PFN_vkGetDeviceQueue2 GetDeviceQueue2;
    PFN_vkAllocateMemory AllocateMemory;
    PFN_vkFreeMemory FreeMemory;
    PFN_vkMapMemory MapMemory;
    PFN_vkUnmapMemory UnmapMemory;
    PFN_vkMapMemory2KHR MapMemory2KHR;
    PFN_vkUnmapMemory2KHR UnmapMemory2KHR;
    PFN_vkFlushMappedMemoryRanges FlushMappedMemoryRanges;
    PFN_vkInvalidateMappedMemoryRanges InvalidateMappedMemoryRanges;
    PFN_vkCreateBuffer CreateBuffer;
    PFN_vkDestroyBuffer DestroyBuffer;
    PFN_vkCreateImage CreateImage;
    PFN_vkDestroyImage DestroyImage;
    PFN_vkGetBufferMemoryRequirements GetBufferMemoryRequirements;
    PFN_vkGetImageMemoryRequirements GetImageMemoryRequirements;
    PFN_vkBindBufferMemory BindBufferMemory;
    PFN_vkBindImageMemory BindImageMemory;
    PFN_vkBindBufferMemory2 BindBufferMemory2;
    PFN_vkBindBufferMemory2 BindBufferMemory2KHR;
    PFN_vkBindImageMemory2 BindImageMemory2;
    PFN_vkBindImageMemory2 BindImageMemory2KHR;
    PFN_vkQueueSubmit QueueSubmit;
    PFN_vkQueueSubmit2 QueueSubmit2;
    PFN_vkQueueSubmit2 QueueSubmit2KHR;
    PFN_vkQueueBindSparse QueueBindSparse;
    PFN_vkQueuePresentKHR QueuePresentKHR;
    PFN_vkQueueWaitIdle QueueWaitIdle;
    PFN_vkDeviceWaitIdle DeviceWaitIdle;
    PFN_vkWaitForFences WaitForFences;
    PFN_vkGetFenceStatus GetFenceStatus;
    PFN_vkWaitSemaphores WaitSemaphores;
    PFN_vkWaitSemaphores WaitSemaphoresKHR;
} lt_device_table;

typedef struct lt_instance {
    VkInstance handle;
    void *key;
    PFN_vkGetInstanceProcAddr next_gipa;
    PFN_vkDestroyInstance DestroyInstance;
    PFN_vkCreateDevice CreateDevice;
    PFN_vkGetPhysicalDeviceMemoryProperties GetPhysicalDeviceMemoryProperties;
    PFN_vkGetPhysicalDeviceProperties GetPhysicalDeviceProperties;
    char app_name[128], engine_name[128];
    uint32_t api_version;
} lt_instance;

struct lt_device {
    VkDevice handle;
    void *key;
    lt_instance *inst;
    VkPhysicalDevice phys;
    lt_device_table t;
    VkPhysicalDeviceMemoryProperties memprops;
    pthread_mutex_t lock;
    lt_map memories; /* VkDeviceMemory -> lt_memory */
    lt_map objects;  /* VkBuffer/VkImage -> lt_object */
    lt_map queues;   /* VkQueue -> queue id + 1 */
    lt_memory *mapped; /* list of mapped memories */
    int shadow_mapped; /* how many mapped memories use shadow mode */
};

/* ---- dispatch (dispatch.c) ------------------------------------------------- */
lt_device *lt_device_from(const void *dispatchable); /* device, queue or command buffer */
/* Takes (1) or releases (0) every device's lock: nothing writes a record meanwhile. */
void lt_devices_lock(int lock);

/* ---- process-wide context (config.c) ----------------------------------------- */
typedef struct lt_stats {
    uint64_t submits, frames;
    uint64_t capture_ns, capture_ns_max;
    uint64_t packets, packet_bytes;
    uint64_t hashes;
    uint64_t shadow_bytes, shadow_bytes_peak; /* reference + shadow mappings touched */
    uint64_t mode_switches, fallbacks;
} lt_stats;

typedef struct lt_context {
    lt_mode mode;
    int verify;
    int progress;
    size_t merge_gap;
    char output[4096];
    char stats_path[4096];
    mt_trace_writer *trace; /* NULL until the first device, or after an error */
    int trace_failed;
    mt_tracker *tracker;
    pthread_mutex_t lock; /* context fields below and the trace's lifetime */
    uint64_t next_id;     /* memories and objects share one id space */
    lt_stats st;
    uint64_t last_progress_ns;
    int ninstances;
    /* Test hook (MEMTRACK_TEST_DROP_UPDATE=k): the k-th update packet is not
     * written, as if the capture had lost a write; verify must catch it. */
    uint64_t drop_update;
} lt_context;

extern lt_context lt_ctx;

/* 1 while records are being written (a trace is open and has not failed).
 * Callers hold a device lock (see lt_trace_close). */
static inline int lt_tracing(void) { return lt_ctx.trace && !lt_ctx.trace_failed; }

/* Reads MEMTRACK_* once. */
void lt_config_load(void);
/* Opens the trace at the first device (header metadata needs the driver). */
void lt_trace_open(lt_instance *inst, VkPhysicalDevice phys);
/* Closes the trace (last instance destroyed, or exit). Idempotent. */
void lt_trace_close(void);
/* Next stable id for a memory or object. */
uint64_t lt_next_id(void);
/* Reports a trace write error once and stops writing. */
void lt_trace_check(int rc);
/* Prints a one-time warning on stderr (per distinct message key). */
void lt_warn_once(const char *key, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
uint64_t lt_now_ns(void);
void lt_progress(void);

/* ---- capture (capture.c) ------------------------------------------------------- */
/* Sets a freshly mapped memory up for its mode and records its initial
 * content where replay does not know it yet. dev->lock held. */
void lt_capture_map(lt_memory *m);
/* Captures what changed in m since its last capture (and syncs shadow mode
 * both ways). dev->lock held. */
void lt_capture_memory(lt_memory *m);
/* Final capture and teardown of m's mapping. dev->lock held. */
void lt_capture_unmap(lt_memory *m);
/* Device writes -> app (shadow mode) after the host synchronised with the
 * device. dev->lock held. */
void lt_capture_sync_in(lt_memory *m);
/* Everything a submit needs: capture all mapped memories, content hashes
 * (verify), then the SUBMIT record. Takes dev->lock. */
void lt_capture_submit(lt_device *dev, VkQueue queue);
/* After a successful wait on the device: sync shadow memories in. */
void lt_capture_after_wait(lt_device *dev);

/* Memory bookkeeping (memory.c). */
/* Device teardown: captures and forgets every memory, frees every object. */
void lt_memory_destroy_all(lt_device *dev);
void lt_memory_add_binding(lt_memory *m, lt_object *o);
void lt_memory_remove_binding(lt_memory *m, lt_object *o);

/* ---- autopilot (autopilot.c) ---------------------------------------------------- */
/* Called after each capture of a memory in auto mode with the pages that
 * were written (guard) or held changes (scan), and the capture's duration;
 * may switch the memory between guard and scan. */
void lt_autopilot_observe(lt_memory *m, size_t dirty_pages, uint64_t capture_ns);
/* 1 when scanning the whole mapping costs less than one first-write fault:
 * auto then scans it and never tracks it. */
int lt_autopilot_always_scan(const lt_memory *m);
/* Starts or stops in-place tracking of m's driver mapping (guard). */
int lt_guard_start(lt_memory *m);
void lt_guard_stop(lt_memory *m);

/* ---- hooks ---------------------------------------------------------------------- */
VKAPI_ATTR VkResult VKAPI_CALL lt_AllocateMemory(VkDevice, const VkMemoryAllocateInfo *,
                                                 const VkAllocationCallbacks *, VkDeviceMemory *);
VKAPI_ATTR void VKAPI_CALL lt_FreeMemory(VkDevice, VkDeviceMemory, const VkAllocationCallbacks *);
VKAPI_ATTR VkResult VKAPI_CALL lt_MapMemory(VkDevice, VkDeviceMemory, VkDeviceSize, VkDeviceSize,
                                            VkMemoryMapFlags, void **);
VKAPI_ATTR void VKAPI_CALL lt_UnmapMemory(VkDevice, VkDeviceMemory);
VKAPI_ATTR VkResult VKAPI_CALL lt_MapMemory2KHR(VkDevice, const VkMemoryMapInfoKHR *, void **);
VKAPI_ATTR VkResult VKAPI_CALL lt_UnmapMemory2KHR(VkDevice, const VkMemoryUnmapInfoKHR *);
VKAPI_ATTR VkResult VKAPI_CALL lt_FlushMappedMemoryRanges(VkDevice, uint32_t, const VkMappedMemoryRange *);
VKAPI_ATTR VkResult VKAPI_CALL lt_InvalidateMappedMemoryRanges(VkDevice, uint32_t,
                                                               const VkMappedMemoryRange *);
VKAPI_ATTR VkResult VKAPI_CALL lt_CreateBuffer(VkDevice, const VkBufferCreateInfo *,
                                               const VkAllocationCallbacks *, VkBuffer *);
VKAPI_ATTR void VKAPI_CALL lt_DestroyBuffer(VkDevice, VkBuffer, const VkAllocationCallbacks *);
VKAPI_ATTR VkResult VKAPI_CALL lt_CreateImage(VkDevice, const VkImageCreateInfo *,
                                              const VkAllocationCallbacks *, VkImage *);
VKAPI_ATTR void VKAPI_CALL lt_DestroyImage(VkDevice, VkImage, const VkAllocationCallbacks *);
VKAPI_ATTR VkResult VKAPI_CALL lt_BindBufferMemory(VkDevice, VkBuffer, VkDeviceMemory, VkDeviceSize);
VKAPI_ATTR VkResult VKAPI_CALL lt_BindImageMemory(VkDevice, VkImage, VkDeviceMemory, VkDeviceSize);
VKAPI_ATTR VkResult VKAPI_CALL lt_BindBufferMemory2(VkDevice, uint32_t, const VkBindBufferMemoryInfo *);
VKAPI_ATTR VkResult VKAPI_CALL lt_BindBufferMemory2KHR(VkDevice, uint32_t, const VkBindBufferMemoryInfo *);
VKAPI_ATTR VkResult VKAPI_CALL lt_BindImageMemory2(VkDevice, uint32_t, const VkBindImageMemoryInfo *);
VKAPI_ATTR VkResult VKAPI_CALL lt_BindImageMemory2KHR(VkDevice, uint32_t, const VkBindImageMemoryInfo *);
VKAPI_ATTR void VKAPI_CALL lt_GetDeviceQueue(VkDevice, uint32_t, uint32_t, VkQueue *);
VKAPI_ATTR void VKAPI_CALL lt_GetDeviceQueue2(VkDevice, const VkDeviceQueueInfo2 *, VkQueue *);
VKAPI_ATTR VkResult VKAPI_CALL lt_QueueSubmit(VkQueue, uint32_t, const VkSubmitInfo *, VkFence);
VKAPI_ATTR VkResult VKAPI_CALL lt_QueueSubmit2(VkQueue, uint32_t, const VkSubmitInfo2 *, VkFence);
VKAPI_ATTR VkResult VKAPI_CALL lt_QueueSubmit2KHR(VkQueue, uint32_t, const VkSubmitInfo2 *, VkFence);
VKAPI_ATTR VkResult VKAPI_CALL lt_QueueBindSparse(VkQueue, uint32_t, const VkBindSparseInfo *, VkFence);
VKAPI_ATTR VkResult VKAPI_CALL lt_QueuePresentKHR(VkQueue, const VkPresentInfoKHR *);
VKAPI_ATTR VkResult VKAPI_CALL lt_QueueWaitIdle(VkQueue);
VKAPI_ATTR VkResult VKAPI_CALL lt_DeviceWaitIdle(VkDevice);
VKAPI_ATTR VkResult VKAPI_CALL lt_WaitForFences(VkDevice, uint32_t, const VkFence *, VkBool32, uint64_t);
VKAPI_ATTR VkResult VKAPI_CALL lt_GetFenceStatus(VkDevice, VkFence);
VKAPI_ATTR VkResult VKAPI_CALL lt_WaitSemaphores(VkDevice, const VkSemaphoreWaitInfo *, uint64_t);
VKAPI_ATTR VkResult VKAPI_CALL lt_WaitSemaphoresKHR(VkDevice, const VkSemaphoreWaitInfo *, uint64_t);

#endif
