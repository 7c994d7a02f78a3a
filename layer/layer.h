/* VK_LAYER_MEMTRACK_capture: the types and internal interfaces shared by the
 * layer's files. The layer is built in tiers, each file one job:
 *
 *   entry.c      loader interface: negotiation, vkGet*ProcAddr, the hook
 *                table, instance and device creation/destruction
 *   registry.c   instances and devices by dispatch key (no fixed cap); a
 *                device the layer does not capture still passes through
 *   memory.c     vkAllocate/Free/Map/Unmap/Flush/Invalidate (+Map2/Unmap2)
 *   objects.c    buffers and images: create, bind, destroy
 *   queue.c      submits, present, sparse binding (marks what it binds)
 *   sync.c       host/device synchronisation: fences, idle waits, events,
 *                semaphores (shadow mode's sync points)
 *   hostcopy.c   host image copies (sync points too)
 *   syncexport.c fences and semaphores exported: shadow mode gives way to guard
 *   capture.c    the capture engine: per-memory modes, packets, hashes. The
 *                only place that changes a memory's mode.
 *   autopilot.c  `auto` as a pure policy (autopilot.h), calibrate.c its costs
 *   session.c    the process's one trace: its lifetime, records, statistics,
 *                warnings and the status line (session.h)
 *   process.c    fork, exec, exit and fatal signals (process.h)
 *   config.c     MEMTRACK_* parsing (config.h)
 *   map.c        handle -> pointer hash map
 *
 * Locking: `dev->lock` protects everything reachable from one device (its
 * handle maps, memories, objects, bindings, the mapped list, each memory's
 * capture state) and serialises that device's captures, so that the UPDATE,
 * CONTENT_HASH and SUBMIT records of one submit stay in order. The registry
 * has its own lock, never taken while a device lock is held. The trace writer
 * has its own (session.c). The fault handler (track) takes none of them.
 * Calls down the chain are made without dev->lock, except map/unmap/free and
 * the sync points that must be ordered with the capture of that memory. */
#ifndef MT_LAYER_H
#define MT_LAYER_H

#include <pthread.h>
#include <stdint.h>
#include <vulkan/vk_layer.h>
#include <vulkan/vulkan.h>

#include "autopilot.h"
#include "config.h"
#include "memtrack/memtrack.h"
#include "session.h"

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
/* vkMapMemory2/vkUnmapMemory2 are core in Vulkan 1.4 (the same functions as
 * the KHR ones): a 1.4 application calls them by their core names. */
typedef PFN_vkMapMemory2KHR lt_PFN_vkMapMemory2;
typedef PFN_vkUnmapMemory2KHR lt_PFN_vkUnmapMemory2;
/* VK_EXT_host_image_copy (core in 1.4; newer than Debian 12's headers):
 * vkCopyMemoryToImage, vkCopyImageToMemory and vkCopyImageToImage take one
 * info structure, vkTransitionImageLayout a count and an array; the layer
 * passes them on untouched. */
typedef VkResult(VKAPI_PTR *lt_PFN_host_copy)(VkDevice, const void *);
typedef VkResult(VKAPI_PTR *lt_PFN_host_transition)(VkDevice, uint32_t, const void *);
/* VK_EXT_map_memory_placed: the application chooses the address. */
#define LT_MEMORY_MAP_PLACED_BIT 0x1u
#define LT_STRUCTURE_TYPE_MEMORY_MAP_PLACED_INFO ((VkStructureType)1000272002)

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
    int gpu_writable;  /* a usage that lets the device write its memory */
    VkDeviceSize size; /* memory requirements (padded) */
    VkDeviceSize used; /* buffers: the size the app asked for */
    lt_memory *mem;    /* bound memory, NULL if not bound */
    VkDeviceSize offset;
} lt_object;

/* A byte range of a memory, [offset, offset + length). */
typedef struct lt_range {
    VkDeviceSize offset, length;
} lt_range;

typedef struct lt_device lt_device;

/* A queue: its stable id (family and index) and the serials of its last
 * submit and of the last one the host has seen complete (inflight.c). */
typedef struct lt_queue {
    uint64_t id;
    uint64_t last_submit, completed;
} lt_queue;

/* How a memory reaches the world outside this process's mappings. */
enum {
    LT_EXT_EXPORTED = 1u << 0,  /* allocated exportable: another API or process may map it */
    LT_EXT_IMPORTED = 1u << 1,  /* imported from an fd/handle: others may write it */
    LT_EXT_HOST_PTR = 1u << 2,  /* imported host allocation: the app writes it directly */
    /* ... and that host memory is written elsewhere too: it is mapped shared
     * or from a file (mt_track_aliasable), or it is foreign memory mapped
     * into the process (HOST_MAPPED_FOREIGN_MEMORY). */
    LT_EXT_HOST_SHARED = 1u << 3,
};

struct lt_memory {
    VkDeviceMemory handle;
    uint64_t id;
    VkDeviceSize size;
    uint32_t type_index;
    VkMemoryPropertyFlags flags;
    uint32_t external; /* LT_EXT_* */
    lt_device *dev;

    /* Exposure: bytes the application can write without telling the driver.
     * A mapping ([map_offset, +map_size) at driver_ptr), or for an imported
     * host allocation the whole memory at the app's own pointer. */
    int mapped;
    VkDeviceSize map_offset, map_size;
    unsigned char *driver_ptr; /* the real bytes: what the device reads */
    unsigned char *app_ptr;    /* what the app writes: driver_ptr, or the shadow */
    int placed;                /* the app chose the address (map_memory_placed): no shadow */
    void *shadow_base;         /* shadow mode: the anonymous mapping (page aligned) */
    size_t shadow_len;

    /* What replay knows: reference[offset] is the content the trace carries
     * for byte `offset` of the memory. A zero-filled MAP_NORESERVE mapping of
     * the whole memory, touched only where exposed. [known_lo, known_hi) is
     * where it equals the real content (besides device writes, which are
     * diffed at every capture). */
    unsigned char *reference;
    VkDeviceSize known_lo, known_hi;
    /* Copy mode through the reference (verify, write-combined memory): the
     * span of what it staged there, counted as the layer's memory besides
     * [known_lo, known_hi) (empty: lo == hi). */
    VkDeviceSize staged_lo, staged_hi;

    /* Capture state: changed only by capture.c. */
    lt_mode mode;      /* current mode of this memory */
    int auto_mode;     /* chosen by the autopilot */
    int pinned;        /* a fallback fixed the mode (scan): the autopilot stays out */
    /* Under a memory limit its reference copy was refused or given back
     * (budget.h): recorded whole (copy) at every capture from then on. */
    int budget_copy;
    int pending_guard; /* auto: arm at the next capture, then scan once */
    mt_range_id range; /* tracker range (guard: driver_ptr; shadow: app_ptr), 0 if none */
    mt_track_backend backend;
    lt_mode auto_pref; /* mode auto left it in at the last unmap; LT_AUTO if never */
    lt_ap_state ap;
    int inherited;     /* auto_pref and ap come from a freed memory like it (heirs.c) */
    int concealing;    /* the capture running is the last before an unmap or free */
    unsigned lives;    /* captures since allocation (the last before an unmap or free not counted) */
    /* A capture in copy wrote the window without updating the reference:
     * replay knows bytes the reference does not (see initial_mode). */
    int copied;
    uint64_t verify_hash; /* this submit's content hash (capture threads) */

    /* Ranges the device may have written through objects no longer bound
     * there (destroyed or rebound): diffed at the next capture that sees
     * them, like the ranges of bound device-writable objects. */
    lt_range *stale;
    size_t nstale, capstale;
    int stale_whole; /* out of memory recording one: the whole memory is stale */
    /* Ranges bound to device-writable sparse resources (vkQueueBindSparse):
     * diffed at every capture like a bound writable object's, and kept
     * until the memory goes (a sparse binding's end is not tracked). */
    lt_range *sparse;
    size_t nsparse, capsparse;
    int sparse_whole; /* out of memory recording one: the whole memory */
    /* The reference no longer equals what the trace told replay (changes
     * went unrecorded while capture was paused): the next exposure writes
     * the window's full content. */
    int ref_stale;
    /* Bulk captures written straight from the memory (bulk_capture) leave
     * the reference behind replay in [lag_lo, lag_hi) (empty: lo == hi): a
     * diff there could miss bytes, so a probe refreshes first and an
     * exposure overlapping it writes its window whole. */
    VkDeviceSize lag_lo, lag_hi;
    /* Reading the window (view.c): each pointer's cached all-readable
     * answer (driver_ptr, then app_ptr where it differs), and the snapshot
     * of a window with pages protected against reads. */
    const unsigned char *view_at[2];
    size_t view_len[2];
    uint64_t view_seen[2];
    unsigned char *stage;
    size_t stage_len;
    int view_noted;
    int child_noted; /* the trace says a forked child may write it (capture.c) */
    size_t changed_bytes; /* bytes the last diff_emit wrote as packets (merge gaps included) */
    size_t work_bytes;    /* bytes the last capture read (compared or copied): the next one's estimate */

    /* bindings sorted by offset */
    lt_object **binds;
    size_t nbinds, capbinds;

    lt_memory *next_mapped, *prev_mapped; /* device's list of exposed memories */
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
    lt_PFN_vkMapMemory2 MapMemory2;
    lt_PFN_vkUnmapMemory2 UnmapMemory2;
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
    PFN_vkSignalSemaphore SignalSemaphore;
    PFN_vkSignalSemaphore SignalSemaphoreKHR;
    PFN_vkGetSemaphoreCounterValue GetSemaphoreCounterValue;
    PFN_vkGetSemaphoreCounterValue GetSemaphoreCounterValueKHR;
    PFN_vkSetEvent SetEvent;
    PFN_vkGetEventStatus GetEventStatus;
    lt_PFN_host_copy CopyMemoryToImage, CopyMemoryToImageEXT;
    lt_PFN_host_copy CopyImageToMemory, CopyImageToMemoryEXT;
    lt_PFN_host_copy CopyImageToImage, CopyImageToImageEXT;
    lt_PFN_host_transition TransitionImageLayout, TransitionImageLayoutEXT;
    PFN_vkCreateFence CreateFence;
    PFN_vkCreateSemaphore CreateSemaphore;
    PFN_vkGetFenceFdKHR GetFenceFdKHR;
    PFN_vkGetSemaphoreFdKHR GetSemaphoreFdKHR;
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

/* What a freed auto memory learned, for the next one like it (heirs.c). */
typedef struct lt_heir {
    int used;
    VkDeviceSize size;
    uint32_t type_index, external;
    lt_mode pref;
    lt_ap_state ap;
} lt_heir;
#define LT_HEIRS 16

struct lt_device {
    VkDevice handle;
    void *key;
    lt_instance *inst;
    VkPhysicalDevice phys;
    lt_device_table t;
    VkPhysicalDeviceMemoryProperties memprops;
    VkDeviceSize map_align; /* minMemoryMapAlignment */
    int capture;            /* 0: pass everything through (not captured) */
    int active;             /* the capture window is open for this device (dev->lock) */
    uint64_t window_epoch;  /* the window epoch `active` reflects (dev->lock) */
    pthread_mutex_t lock;
    lt_map memories; /* VkDeviceMemory -> lt_memory */
    lt_map objects;  /* VkBuffer/VkImage -> lt_object */
    lt_map queues;    /* VkQueue -> lt_queue */
    lt_map fences;    /* VkFence -> the submit that signals it (inflight.c) */
    lt_map timelines; /* VkSemaphore -> timeline values submits will signal */
    uint64_t submit_serial;
    lt_memory *mapped; /* list of exposed memories */
    int shadow_mapped; /* how many exposed memories use shadow mode (atomic reads) */
    int progress_exported; /* a fence or semaphore payload may leave Vulkan (syncexport.c; atomic) */
    lt_heir heirs[LT_HEIRS]; /* dev->lock */
    unsigned next_heir;
};

/* ---- registry (registry.c) -------------------------------------------------- */
/* Lookups by any dispatchable handle (instance/physical device; device,
 * queue, command buffer). NULL when unknown. Any thread. */
lt_instance *lt_instance_from(const void *handle);
lt_device *lt_device_from(const void *handle);
/* 0 or -ENOMEM. */
int lt_registry_add_instance(lt_instance *inst);
int lt_registry_add_device(lt_device *dev);
void lt_registry_remove_instance(lt_instance *inst);
/* Returns how many devices remain. */
size_t lt_registry_remove_device(lt_device *dev);
/* A forked child: the registry's lock may have been held by another thread
 * of the parent; make it usable again. */
void lt_registry_after_fork(void);

/* ---- capture engine (capture.c) -------------------------------------------- */
/* Reading m's window at p (driver_ptr or app_ptr) as a capture (view.c).
 * lt_view_readable: 1 when every page can be read in place (cached, no
 * system call while nothing in the process takes reads away), else 0.
 * lt_view_snapshot, where some cannot: what a diff over the n sorted
 * regions regs reads (regs NULL: the whole window), taken without faulting,
 * except the sorted regions dev (where the device may have written), read
 * in place; p itself where that is all, or where no snapshot can be had.
 * Valid until the next call for m; capture threads, one per memory. */
int lt_view_readable(lt_memory *m, const unsigned char *p);
const unsigned char *lt_view_snapshot(lt_memory *m, const unsigned char *p, const mt_diff_region *regs, size_t n,
                                      const mt_diff_region *dev, size_t ndev);
/* Frees the snapshot (the memory is freed). */
void lt_view_free(lt_memory *m);

/* The length of m's reference copy's mapping (its size, page-rounded). */
size_t lt_reference_bytes(const lt_memory *m);
/* What m's reference counts as the layer's memory (LT_ST_EXTRA_BYTES): the
 * span replay knows and what copy mode staged there. */
size_t lt_reference_held(const lt_memory *m);
/* The application is about to allocate `bytes` of device memory that host
 * memory backs: the layer's copies give back what a memory limit then
 * needs (budget.h), before the allocation. Takes dev->lock. */
void lt_capture_make_room(lt_device *dev, VkDeviceSize bytes);
/* Sets a freshly exposed memory up for its mode and records its initial
 * content where replay does not know it yet. dev->lock held. */
void lt_capture_expose(lt_memory *m);
/* Final capture (unless `freeing` makes it pointless) and teardown of m's
 * exposure. dev->lock held. */
void lt_capture_conceal(lt_memory *m, int freeing);
/* Captures what changed in m since its last capture (and syncs shadow mode
 * both ways). dev->lock held. */
void lt_capture_memory(lt_memory *m);
/* auto's inheritance between memories of the same size and type (heirs.c),
 * dev->lock held: a freed memory leaves its choice; a new one takes it (1)
 * or starts afresh (0). */
void lt_heirs_leave(lt_memory *m);
int lt_heirs_take(lt_memory *m);
/* Device writes -> app (shadow mode) after the host synchronised with the
 * device. dev->lock held. */
void lt_capture_sync_in(lt_memory *m);
/* A submit as the application made it (one of s, s2), for inflight.c. */
typedef struct lt_submit {
    uint32_t n;
    const VkSubmitInfo *s;
    const VkSubmitInfo2 *s2;
    VkFence fence;
} lt_submit;
/* Everything a submit needs: capture all exposed memories, content hashes
 * (verify), then the SUBMIT record; notes the submit as running. Takes
 * dev->lock. */
void lt_capture_submit(lt_device *dev, VkQueue queue, const lt_submit *sub);
/* A frame was presented: the FRAME record, and the capture window moves
 * on. Takes dev->lock. */
void lt_capture_present(lt_device *dev);
/* The host released device work (vkSetEvent, vkSignalSemaphore): app writes
 * in shadow mappings must reach the driver first. Takes dev->lock. */
void lt_capture_host_release(lt_device *dev);
/* What the host just learnt about device progress. */
typedef enum lt_seen_kind {
    LT_SEEN_QUEUE_IDLE, LT_SEEN_DEVICE_IDLE, LT_SEEN_FENCES, LT_SEEN_SEMAPHORES, LT_SEEN_COUNTER,
    LT_SEEN_EVENT,
    LT_SEEN_HOST_COPY /* the driver wrote an image's memory on the host (hostcopy.c) */
} lt_seen_kind;
typedef struct lt_seen {
    lt_seen_kind kind;
    VkQueue queue;                   /* QUEUE_IDLE */
    uint32_t n;                      /* FENCES */
    const VkFence *fences;
    int all;
    const VkSemaphoreWaitInfo *wait; /* SEMAPHORES */
    VkSemaphore sem;                 /* COUNTER */
    uint64_t value;
} lt_seen;
/* After the host observed device progress (a wait, a signalled fence,
 * event or semaphore value): note the work known complete, and sync
 * shadow memories in. Takes dev->lock. */
void lt_capture_after_wait(lt_device *dev, const lt_seen *seen);
/* A call reported VK_ERROR_DEVICE_LOST: the device writes nothing more, and
 * the application may read what it got to (a crash handler's markers), so
 * shadow memories get the driver's content, but memory mapped through the
 * PCI BAR (device-local, not cached: a lost device's mapping may be gone).
 * Said once in the trace. Takes dev->lock. */
void lt_capture_device_lost(lt_device *dev, const char *call);
/* Why a memory cannot use the tracked modes, or NULL. */
const char *lt_capture_untrackable(const lt_memory *m);

/* ---- device work still running (inflight.c); dev->lock held ------------------ */
lt_queue *lt_queue_of(lt_device *dev, VkQueue q);
void lt_inflight_submit(lt_device *dev, VkQueue queue, uint32_t n, const VkSubmitInfo *s, VkFence fence);
void lt_inflight_submit2(lt_device *dev, VkQueue queue, uint32_t n, const VkSubmitInfo2 *s, VkFence fence);
/* The fences are signalled (all of them, or the only one). */
void lt_inflight_fences_done(lt_device *dev, uint32_t n, const VkFence *fences, int all);
void lt_inflight_timeline_reached(lt_device *dev, VkSemaphore sem, uint64_t value);
void lt_inflight_queue_idle(lt_device *dev, VkQueue queue);
void lt_inflight_device_idle(lt_device *dev);
/* How many queues may still run work the host has not seen complete. */
uint64_t lt_inflight_running(lt_device *dev);
void lt_inflight_free(lt_device *dev);

/* ---- memory bookkeeping (memory.c) ------------------------------------------ */
/* Device teardown: captures and forgets every memory, frees every object. */
void lt_memory_destroy_all(lt_device *dev);
void lt_memory_add_binding(lt_memory *m, lt_object *o);
/* Removes o from m's bindings; a device-writable object leaves its range
 * behind as stale (the device may have written it). */
void lt_memory_remove_binding(lt_memory *m, lt_object *o);
/* Adds [off, off+len) to m's stale device-write ranges. */
void lt_memory_note_stale(lt_memory *m, VkDeviceSize off, VkDeviceSize len);
/* Adds [off, off+len) to m's sparse-bound device-writable ranges. */
void lt_memory_note_sparse(lt_memory *m, VkDeviceSize off, VkDeviceSize len);
/* Links m into the device's exposed list (dev->lock held). */
void lt_memory_link_exposed(lt_device *dev, lt_memory *m);
void lt_memory_unlink_exposed(lt_device *dev, lt_memory *m);

/* ---- hooks ---------------------------------------------------------------------- */
#define LT_HOOK(ret, name, ...) VKAPI_ATTR ret VKAPI_CALL lt_##name(__VA_ARGS__)
LT_HOOK(VkResult, AllocateMemory, VkDevice, const VkMemoryAllocateInfo *, const VkAllocationCallbacks *,
        VkDeviceMemory *);
LT_HOOK(void, FreeMemory, VkDevice, VkDeviceMemory, const VkAllocationCallbacks *);
LT_HOOK(VkResult, MapMemory, VkDevice, VkDeviceMemory, VkDeviceSize, VkDeviceSize, VkMemoryMapFlags, void **);
LT_HOOK(void, UnmapMemory, VkDevice, VkDeviceMemory);
LT_HOOK(VkResult, MapMemory2KHR, VkDevice, const VkMemoryMapInfoKHR *, void **);
LT_HOOK(VkResult, UnmapMemory2KHR, VkDevice, const VkMemoryUnmapInfoKHR *);
LT_HOOK(VkResult, MapMemory2, VkDevice, const VkMemoryMapInfoKHR *, void **);
LT_HOOK(VkResult, UnmapMemory2, VkDevice, const VkMemoryUnmapInfoKHR *);
LT_HOOK(VkResult, FlushMappedMemoryRanges, VkDevice, uint32_t, const VkMappedMemoryRange *);
LT_HOOK(VkResult, InvalidateMappedMemoryRanges, VkDevice, uint32_t, const VkMappedMemoryRange *);
LT_HOOK(VkResult, CreateBuffer, VkDevice, const VkBufferCreateInfo *, const VkAllocationCallbacks *, VkBuffer *);
LT_HOOK(void, DestroyBuffer, VkDevice, VkBuffer, const VkAllocationCallbacks *);
LT_HOOK(VkResult, CreateImage, VkDevice, const VkImageCreateInfo *, const VkAllocationCallbacks *, VkImage *);
LT_HOOK(void, DestroyImage, VkDevice, VkImage, const VkAllocationCallbacks *);
LT_HOOK(VkResult, BindBufferMemory, VkDevice, VkBuffer, VkDeviceMemory, VkDeviceSize);
LT_HOOK(VkResult, BindImageMemory, VkDevice, VkImage, VkDeviceMemory, VkDeviceSize);
LT_HOOK(VkResult, BindBufferMemory2, VkDevice, uint32_t, const VkBindBufferMemoryInfo *);
LT_HOOK(VkResult, BindBufferMemory2KHR, VkDevice, uint32_t, const VkBindBufferMemoryInfo *);
LT_HOOK(VkResult, BindImageMemory2, VkDevice, uint32_t, const VkBindImageMemoryInfo *);
LT_HOOK(VkResult, BindImageMemory2KHR, VkDevice, uint32_t, const VkBindImageMemoryInfo *);
LT_HOOK(void, GetDeviceQueue, VkDevice, uint32_t, uint32_t, VkQueue *);
LT_HOOK(void, GetDeviceQueue2, VkDevice, const VkDeviceQueueInfo2 *, VkQueue *);
LT_HOOK(VkResult, QueueSubmit, VkQueue, uint32_t, const VkSubmitInfo *, VkFence);
LT_HOOK(VkResult, QueueSubmit2, VkQueue, uint32_t, const VkSubmitInfo2 *, VkFence);
LT_HOOK(VkResult, QueueSubmit2KHR, VkQueue, uint32_t, const VkSubmitInfo2 *, VkFence);
LT_HOOK(VkResult, QueueBindSparse, VkQueue, uint32_t, const VkBindSparseInfo *, VkFence);
LT_HOOK(VkResult, QueuePresentKHR, VkQueue, const VkPresentInfoKHR *);
LT_HOOK(VkResult, QueueWaitIdle, VkQueue);
LT_HOOK(VkResult, DeviceWaitIdle, VkDevice);
LT_HOOK(VkResult, WaitForFences, VkDevice, uint32_t, const VkFence *, VkBool32, uint64_t);
LT_HOOK(VkResult, GetFenceStatus, VkDevice, VkFence);
LT_HOOK(VkResult, WaitSemaphores, VkDevice, const VkSemaphoreWaitInfo *, uint64_t);
LT_HOOK(VkResult, WaitSemaphoresKHR, VkDevice, const VkSemaphoreWaitInfo *, uint64_t);
LT_HOOK(VkResult, SignalSemaphore, VkDevice, const VkSemaphoreSignalInfo *);
LT_HOOK(VkResult, SignalSemaphoreKHR, VkDevice, const VkSemaphoreSignalInfo *);
LT_HOOK(VkResult, GetSemaphoreCounterValue, VkDevice, VkSemaphore, uint64_t *);
LT_HOOK(VkResult, GetSemaphoreCounterValueKHR, VkDevice, VkSemaphore, uint64_t *);
LT_HOOK(VkResult, SetEvent, VkDevice, VkEvent);
LT_HOOK(VkResult, GetEventStatus, VkDevice, VkEvent);
LT_HOOK(VkResult, CopyMemoryToImage, VkDevice, const void *);
LT_HOOK(VkResult, CopyMemoryToImageEXT, VkDevice, const void *);
LT_HOOK(VkResult, CopyImageToMemory, VkDevice, const void *);
LT_HOOK(VkResult, CopyImageToMemoryEXT, VkDevice, const void *);
LT_HOOK(VkResult, CopyImageToImage, VkDevice, const void *);
LT_HOOK(VkResult, CopyImageToImageEXT, VkDevice, const void *);
LT_HOOK(VkResult, TransitionImageLayout, VkDevice, uint32_t, const void *);
LT_HOOK(VkResult, TransitionImageLayoutEXT, VkDevice, uint32_t, const void *);
LT_HOOK(VkResult, CreateFence, VkDevice, const VkFenceCreateInfo *, const VkAllocationCallbacks *, VkFence *);
LT_HOOK(VkResult, CreateSemaphore, VkDevice, const VkSemaphoreCreateInfo *, const VkAllocationCallbacks *,
        VkSemaphore *);
LT_HOOK(VkResult, GetFenceFdKHR, VkDevice, const VkFenceGetFdInfoKHR *, int *);
LT_HOOK(VkResult, GetSemaphoreFdKHR, VkDevice, const VkSemaphoreGetFdInfoKHR *, int *);

#endif
