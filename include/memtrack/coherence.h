/* memtrack coherence: one valid content per buffer across devices, with the
 * migrations decided at enqueue time.
 *
 * The memory manager a device runtime embeds (an OpenCL-like runtime is the
 * model). A context (mt_coh) holds devices behind a small backend interface
 * (host memory, the simulated device, NVIDIA GPUs through the CUDA driver
 * API, or one the runtime plugs in), clients that own buffers, and queues.
 *
 *  - Buffers get no device memory at creation. The first command on a device
 *    that uses a buffer allocates its instance there (from an `alloc`
 *    allocator per device); when the device is full, instances whose content
 *    is valid elsewhere are evicted, least recently used first, else the
 *    enqueue fails with MT_EDEVMEM and changes nothing.
 *  - Validity is kept per range, not per buffer: for every range of a buffer
 *    the set of locations (host memory, devices) that hold its latest
 *    content. Writing 4 KiB of a 1 GiB buffer on one device makes another
 *    device re-fetch those 4 KiB, not the buffer.
 *  - mt_coh_enqueue() validates the command (handles, ownership, ranges,
 *    access) before anything else, decides which migrations it needs, and
 *    creates them as commands on hidden per-device migration engines, linked
 *    by event dependencies: device to device where the backends can, else
 *    through host memory. It returns the command's event; execution happens
 *    later, in parallel where dependencies allow.
 *  - Host writes to a buffer created with MT_COH_BUF_TRACK_HOST are tracked
 *    (memtrack `track`), so the next upload copies only the dirty pages.
 *  - Sub-buffers are (parent, offset); maps migrate a range to host memory;
 *    fine-grained SVM is shared memory (no migration), coarse-grained SVM is
 *    a coherent buffer reached through a pointer, and a buffer created on an
 *    SVM pointer shares the SVM allocation's content instead of treating the
 *    pointer as host memory.
 *  - Freeing a buffer, closing a client or losing a device releases device
 *    memory once the commands that use it have completed (`timeline`
 *    deferred reclamation).
 *
 * Threads: every function may be called from any thread unless its comment
 * says otherwise; calls on one context are serialised by its lock (the
 * planner), while execution runs on the engines' threads. docs/coherence.md
 * explains versions, ranges, the planner, eviction, the SVM rules, and how to
 * plug in a backend. */
#ifndef MEMTRACK_COHERENCE_H
#define MEMTRACK_COHERENCE_H

#include <stddef.h>
#include <stdint.h>

#include "memtrack/base.h"
#include "memtrack/device_sim.h"
#include "memtrack/track.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mt_coh mt_coh;
typedef struct mt_coh_client mt_coh_client;
typedef struct mt_coh_queue mt_coh_queue;
typedef struct mt_coh_event mt_coh_event;

/* A buffer or sub-buffer handle. 0 is never valid; a freed handle stays
 * invalid (generations), so using it is an error, never a crash. */
typedef uint64_t mt_coh_buf;

/* Location 0 is host memory; devices are 1..MT_COH_MAX_DEVICES. */
#define MT_COH_HOST 0u
#define MT_COH_MAX_DEVICES 63u
#define MT_COH_MAX_ARGS 64u

/* ---- context ---------------------------------------------------------------- */

enum {
    /* PoCL's rule, for comparisons: one version per whole buffer and
     * whole-buffer copies (every range is widened to its buffer). */
    MT_COH_WHOLE_BUFFER = 1u << 0,
};

typedef struct mt_coh_opts {
    /* Validity is tracked in ranges whose ends are multiples of this (a power
     * of two, at least 16); 0 = 4096. A migration moves at most one granule
     * beyond each end of the bytes a command needs. */
    uint64_t granularity;
    uint32_t flags; /* MT_COH_* */
    /* Threads that collect tracked host writes of large buffers, the
     * enqueuing thread included (1: it alone); 0 = as many as CPUs, up to 9. */
    uint32_t collect_threads;
    /* A tracked host buffer is watched as ranges of this many bytes (a
     * multiple of the page size), collected in parallel; 0 = 16 MiB. */
    uint64_t track_chunk;
    /* Uploads of tracked buffers are issued in pieces of about this many
     * bytes as their pages are collected, so the copy starts before the
     * collection ends (a piece of a 32nd of it goes early when the copy
     * engine has nothing to do); 0 = 32 MiB. */
    uint64_t pipeline_bytes;
    mt_track_backend track_backend; /* for tracked buffers; 0 = auto (uffd where possible) */
    /* Ready commands are handed to the engines in batches of this many (a
     * flush, a wait, a finish, a map or a large transfer hand them over at
     * once); 0 = 32. Larger batches wake engine threads less often. */
    uint32_t batch;
    /* Tracked host memory on the uffd backend: threads of a collection
     * helper process that scans the written pages of an upload's chunks
     * (mt_tracker_opts.helper_threads: its scans do not interrupt the
     * collecting threads); 0 = none, the collecting threads scan. */
    uint32_t collect_helper;
    uint32_t reserved32;  /* zero */
    uint64_t reserved[3]; /* zero: room to grow (docs/design.md, "Options") */
} mt_coh_opts;

/* Creates a context with no devices. `opts` may be NULL. Returns 0 and sets
 * *out, -EINVAL for bad options, or -ENOMEM.
 * A context works in the process that created it. In a forked child (its
 * engine threads exist only in the parent) every call on it, its clients,
 * queues and buffers returns MT_EFORKED, a wait on an event still pending
 * at the fork too, and the destroy calls do nothing: a child that exits
 * through a runtime's destructors neither crashes nor hangs. */
MT_API int mt_coh_create(const mt_coh_opts *opts, mt_coh **out);

/* Shuts the context down: commands that have not started fail with
 * MT_ECANCELED, running ones are waited for, then every client, buffer,
 * queue and device is released. Events the application still holds stay
 * valid (completed) until released. NULL is a no-op. Not concurrently with
 * other calls on `c`. */
MT_API void mt_coh_destroy(mt_coh *c);

/* ---- device backends ----------------------------------------------------------- */

/* One piece of a transfer: `len` bytes from offset `src` of the source
 * instance to offset `dst` of the destination instance. */
typedef struct mt_coh_seg {
    uint64_t src, dst, len;
} mt_coh_seg;

typedef enum mt_coh_op_kind {
    MT_COH_OP_RUN = 1,      /* run a command's function (compute engine) */
    MT_COH_OP_UPLOAD = 2,   /* host memory -> this device (copy engine) */
    MT_COH_OP_DOWNLOAD = 3, /* this device -> host memory (copy engine) */
    MT_COH_OP_PEER = 4,     /* another device of this backend -> this device (copy engine) */
} mt_coh_op_kind;

enum { MT_COH_ENGINE_COMPUTE = 0, MT_COH_ENGINE_COPY = 1 };

struct mt_coh_exec;
/* A command's work. Runs on the device's compute engine thread; returns 0 or
 * a negative code (the command's event then fails with it). */
typedef int (*mt_coh_kernel_fn)(void *user, const struct mt_coh_exec *ex);

/* What a command sees when it runs. */
typedef struct mt_coh_exec {
    uint32_t device;        /* device id */
    const char *backend;    /* the backend's name: "host", "sim", "cuda", ... */
    void *device_handle;    /* host: NULL; sim: the mt_sim *; cuda: the CUcontext */
    void *native;           /* sim: the mt_stream * to write commands to; cuda: the
                             * CUstream to launch on; host: NULL */
    uint32_t nargs;
    const uint64_t *addr;   /* per argument: device address of its first byte
                             * (a host pointer on host-memory devices) */
    const uint64_t *size;   /* per argument: its size in bytes */
} mt_coh_exec;

/* One operation for a backend. Offsets in segs are relative to the instance
 * bases below. */
typedef struct mt_coh_op {
    mt_coh_op_kind kind;
    uint32_t nsegs;
    const mt_coh_seg *segs;
    uint64_t bytes;       /* sum of the segments' lengths */
    uint64_t dev_addr;    /* this device's instance (dst of UPLOAD/PEER, src of DOWNLOAD) */
    void *host;           /* UPLOAD/DOWNLOAD: the host-memory base */
    void *host_token;     /* what host_attach returned for `host` (NULL if none) */
    void *peer;           /* PEER: the source device's backend handle */
    uint64_t peer_addr;   /* PEER: the source instance */
    mt_coh_kernel_fn fn;  /* RUN */
    void *user;           /* RUN */
    mt_coh_exec exec;     /* RUN: native is filled in by the backend */
    uint64_t scratch[4];  /* the backend's, for an op in flight */
} mt_coh_op;

enum {
    /* submit may return 1 (in flight): the context then calls wait() for the
     * op from a completion thread, in submission order per engine. */
    MT_COH_CAP_ASYNC = 1u << 0,
    /* Device addresses are host pointers: other devices copy from and to
     * this device's memory as host memory (one hop, no relay). */
    MT_COH_CAP_HOST_MEMORY = 1u << 1,
    /* The device can use host memory in place (fine-grained SVM): svm_attach. */
    MT_COH_CAP_FINE_SVM = 1u << 2,
    /* With MT_COH_CAP_ASYNC: the ops submitted to one engine run in
     * submission order, each seeing what the ones before it wrote, and an op
     * that fails in flight makes the later ones of that engine fail too (a
     * CUDA stream). The context then submits a command whose dependencies on
     * the same engine are submitted without waiting for their completion, so
     * back-to-back copies into one instance keep the engine busy. */
    MT_COH_CAP_IN_ORDER = 1u << 3,
    /* With MT_COH_CAP_IN_ORDER: submit may also be called for the copy engine
     * from a thread that is not the engine's (never two at once for one
     * engine, never beside the engine's own submitter), leaving that thread
     * as it found it. The thread planning an upload of tracked host memory
     * then submits its pieces itself while the engine's thread has nothing
     * queued, instead of waking that thread (tens of microseconds, at times
     * hundreds, before the device goes on copying). */
    MT_COH_CAP_SUBMIT_ANY_THREAD = 1u << 4,
};

/* The backend interface: a table of functions over an opaque device handle.
 * The context calls mem_*, can_peer and svm_* under its lock, submit and
 * wait from the device's engine threads (one thread per engine, so the two
 * engines of a device may run concurrently; MT_COH_CAP_SUBMIT_ANY_THREAD
 * lets another thread take the copy engine's turn to submit, one at a time),
 * host_attach/detach from the thread that submits or release paths.
 * Everything optional may be NULL. */
typedef struct mt_coh_backend {
    const char *name;
    uint32_t caps; /* MT_COH_CAP_* */
    /* Provide a region of device memory of at least min_size bytes: set *base
     * (device address) and *size; return 0, or -ENOSPC when there is no more
     * device memory. The context suballocates regions with `alloc`. */
    int (*mem_grow)(void *dev, uint64_t min_size, uint64_t *base, uint64_t *size);
    /* Return a region (at context shutdown or device loss). */
    void (*mem_release)(void *dev, uint64_t base, uint64_t size);
    /* Start `op` on `engine`: return 0 (done), 1 (in flight, MT_COH_CAP_ASYNC
     * only) or a negative code (MT_EDEVLOST marks the device lost). */
    int (*submit)(void *dev, int engine, mt_coh_op *op);
    /* Wait for an in-flight op: 0 or a negative code. */
    int (*wait)(void *dev, int engine, mt_coh_op *op);
    /* 1 when this device can copy directly from `src` (same backend). */
    int (*can_peer)(void *dev, void *src);
    /* Prepare host memory for transfers (pinning); *token goes into ops. */
    int (*host_attach)(void *dev, void *ptr, uint64_t len, void **token);
    void (*host_detach)(void *dev, void *token);
    /* Fine-grained SVM: make [ptr, ptr+len) usable in place; *addr is its
     * device address. */
    int (*svm_attach)(void *dev, void *ptr, uint64_t len, uint64_t *addr, void **token);
    void (*svm_detach)(void *dev, void *token);
    /* Release waits in progress (shutdown): later waits return an error. */
    void (*shutdown)(void *dev);
    /* Free the device handle (after its engines stopped). */
    void (*destroy)(void *dev);
} mt_coh_backend;

typedef struct mt_coh_device_opts {
    const char *name; /* for mt_coh_device_info; NULL = the backend's name */
    uint64_t reserved[4]; /* zero: room to grow (docs/design.md, "Options") */
} mt_coh_device_opts;

/* Adds a device served by backend `be` (which must outlive the context) with
 * handle `dev`; the context owns `dev` from now on (be->destroy frees it,
 * also when this call fails). Starts the device's engine threads. Returns 0
 * and sets *id (1, 2, ...), -EINVAL, -ENOSPC (MT_COH_MAX_DEVICES reached) or
 * -ENOMEM. */
MT_API int mt_coh_device_add(mt_coh *c, const mt_coh_backend *be, void *dev,
                             const mt_coh_device_opts *opts, uint32_t *id);

/* A host-memory device (a CPU device): commands run on its thread with host
 * pointers; `mem_size` bytes of memory (0 = 64 MiB). Returns as
 * mt_coh_device_add. */
MT_API int mt_coh_add_host_device(mt_coh *c, uint64_t mem_size, uint32_t *id);

/* A simulated device (memtrack/device_sim.h) created with `opts` (NULL =
 * defaults) and attached to a stream; commands write device commands to the
 * stream given in mt_coh_exec.native. Returns as mt_coh_device_add. */
MT_API int mt_coh_add_sim_device(mt_coh *c, const mt_sim_opts *opts, uint32_t *id);

/* The mt_sim behind sim device `id` (for fault injection), or NULL. */
MT_API mt_sim *mt_coh_device_sim(mt_coh *c, uint32_t id);

typedef struct mt_coh_cuda_opts {
    uint64_t mem_limit;   /* device memory the context may use per GPU; 0 = 90% of free */
    uint32_t max_devices; /* 0 = every GPU */
    uint32_t repeat;      /* add each GPU this many times (0 = 1): separate devices
                           * sharing one GPU, for testing device-to-device paths */
    uint64_t reserved[4]; /* zero: room to grow (docs/design.md, "Options") */
} mt_coh_cuda_opts;

/* Adds every NVIDIA GPU found through the CUDA driver API, loaded at run time
 * (dlopen "libcuda.so.1"). No driver or no GPU is not an error: *count = 0.
 * Returns 0 and sets *first and *count, or a negative code. */
MT_API int mt_coh_add_cuda_devices(mt_coh *c, const mt_coh_cuda_opts *opts, uint32_t *first,
                                   uint32_t *count);

typedef struct mt_coh_device_info {
    const char *backend;   /* "host", "sim", "cuda", or the plugged backend's name */
    const char *name;
    uint32_t caps;
    int lost;              /* 0, or the loss code */
    uint64_t mem_reserved; /* device memory obtained from the backend */
    uint64_t mem_used;     /* of which in use by instances */
    uint64_t instances;    /* buffer instances on the device */
    uint64_t evictions;    /* instances evicted to make room */
    uint64_t bytes_in;     /* bytes copied into the device */
    uint64_t bytes_out;    /* bytes copied out of it */
} mt_coh_device_info;

/* Fills *out for device `id`. Returns 0 or -ENOENT. */
MT_API int mt_coh_device_info_get(mt_coh *c, uint32_t id, mt_coh_device_info *out);

/* Number of devices. */
MT_API uint32_t mt_coh_device_count(mt_coh *c);

/* ---- clients and queues ------------------------------------------------------------ */

/* A client (an OpenCL context, an open device file): owns buffers, SVM
 * allocations, queues and maps. Returns 0 and sets *out, -EINVAL or -ENOMEM. */
MT_API int mt_coh_client_create(mt_coh *c, mt_coh_client **out);

/* Closes the client: its queues, buffers, SVM allocations and maps are
 * released; device memory goes back once the commands still using it have
 * completed. Its handles become invalid at once. NULL is a no-op. */
MT_API void mt_coh_client_destroy(mt_coh_client *cl);

/* An in-order queue of client `cl` on device `device`: each command waits for
 * the previous one. Returns 0 and sets *out, -ENOENT (no such device),
 * MT_EDEVLOST, or -ENOMEM. */
MT_API int mt_coh_queue_create(mt_coh_client *cl, uint32_t device, mt_coh_queue **out);

/* Frees a queue; its commands still run. NULL is a no-op. */
MT_API void mt_coh_queue_destroy(mt_coh_queue *q);

/* Hands every command enqueued so far (on any queue) to the engines. Commands
 * are handed over in batches otherwise (OpenCL's clFlush). Returns 0. */
MT_API int mt_coh_flush(mt_coh_queue *q);

/* Waits until every command enqueued on `q` so far has completed. Returns 0,
 * or the error of the last command. */
MT_API int mt_coh_finish(mt_coh_queue *q);

/* ---- buffers -------------------------------------------------------------------------- */

enum {
    MT_COH_BUF_READ_ONLY = 1u << 0,    /* commands may only read it */
    MT_COH_BUF_WRITE_ONLY = 1u << 1,   /* commands may only write it */
    MT_COH_BUF_USE_HOST_PTR = 1u << 2, /* host_ptr is the buffer's host memory and content */
    MT_COH_BUF_COPY_HOST_PTR = 1u << 3,/* the initial content is copied from host_ptr */
    /* The host writes the buffer's host memory directly, without maps:
     * memtrack tracks the pages written and uploads only those. Needs
     * USE_HOST_PTR (page-aligned host_ptr) or no host_ptr. */
    MT_COH_BUF_TRACK_HOST = 1u << 4,
};

typedef struct mt_coh_buffer_opts {
    uint32_t flags;  /* MT_COH_BUF_* */
    void *host_ptr;  /* with USE_HOST_PTR or COPY_HOST_PTR; may point into SVM */
    /* Called once memtrack no longer uses any memory of the buffer (after it
     * was freed and its last command completed): host_ptr may then be freed.
     * From any thread, possibly with the context's lock held: it must not
     * call mt_coh_* functions. */
    void (*released)(void *user);
    void *released_user;
    uint64_t reserved[4]; /* zero: room to grow (docs/design.md, "Options") */
} mt_coh_buffer_opts;

/* Creates a buffer of `size` bytes owned by `cl` (no device memory yet). The
 * content is zero unless a host pointer gives it. A host_ptr inside an SVM
 * allocation of `cl` makes a buffer that shares the allocation's content
 * (coarse-grained: its versions and instances; fine-grained: the memory);
 * one that reaches past the allocation's end is refused (-EINVAL).
 * Returns 0 and sets *out, -EINVAL, or -ENOMEM. */
MT_API int mt_coh_buffer_create(mt_coh_client *cl, uint64_t size, const mt_coh_buffer_opts *opts,
                                mt_coh_buf *out);

/* A sub-buffer: bytes [offset, offset+size) of `parent` (itself possibly a
 * sub-buffer), with access `flags` (READ_ONLY/WRITE_ONLY) no wider than the
 * parent's. It shares the parent's content; the parent stays alive while
 * sub-buffers exist. Returns 0 and sets *out, MT_ENOBUF, -ERANGE, -EACCES,
 * -EINVAL or -ENOMEM. */
MT_API int mt_coh_subbuffer_create(mt_coh_client *cl, mt_coh_buf parent, uint64_t offset,
                                   uint64_t size, uint32_t flags, mt_coh_buf *out);

/* Frees a buffer handle: it is invalid at once; memory is released when the
 * commands using it completed, its sub-buffers are freed and its maps are
 * unmapped (a map stays usable until then). Returns 0 or MT_ENOBUF. */
MT_API int mt_coh_buffer_free(mt_coh_client *cl, mt_coh_buf buf);

typedef struct mt_coh_buffer_info {
    uint64_t size;
    uint64_t offset;       /* in its root buffer (sub-buffers, SVM views) */
    uint64_t version;      /* writes to the root buffer so far */
    uint64_t valid_mask;   /* locations valid for the whole range (bit 0: host) */
    uint64_t any_mask;     /* locations valid for some of it */
    uint64_t lost_bytes;   /* bytes with no valid copy (their device was lost) */
    uint32_t ranges;       /* validity ranges of the root buffer */
    void *host;            /* its host memory, if any */
} mt_coh_buffer_info;

/* Describes a buffer's state (for tests and tools). Returns 0 or MT_ENOBUF. */
MT_API int mt_coh_buffer_info_get(mt_coh_client *cl, mt_coh_buf buf, mt_coh_buffer_info *out);

/* ---- shared virtual memory ------------------------------------------------------------- */

enum {
    MT_COH_SVM_FINE = 1,   /* host and devices share the memory: no migration, no map */
    MT_COH_SVM_COARSE = 2, /* one address; content kept coherent; host access by map */
};

/* Allocates `size` bytes of SVM of `kind` for `cl`. Fine-grained SVM needs
 * devices with MT_COH_CAP_FINE_SVM (others refuse it at enqueue). Returns 0
 * and sets *ptr, -EINVAL or -ENOMEM. */
MT_API int mt_coh_svm_alloc(mt_coh_client *cl, uint64_t size, uint32_t kind, void **ptr);

/* Frees an SVM allocation (deferred like a buffer, maps included). Returns 0
 * or MT_ENOBUF. */
MT_API int mt_coh_svm_free(mt_coh_client *cl, void *ptr);

/* ---- commands -------------------------------------------------------------------------- */

enum {
    MT_COH_READ = 1u << 0,
    /* The command writes the range. Without MT_COH_READ it overwrites every
     * byte of it, so nothing is fetched first. */
    MT_COH_WRITE = 1u << 1,
    MT_COH_RW = MT_COH_READ | MT_COH_WRITE,
};

/* One buffer argument. */
typedef struct mt_coh_arg {
    mt_coh_buf buf;  /* a buffer or sub-buffer; 0 = `svm` instead */
    void *svm;       /* a pointer into an SVM allocation, when buf is 0 */
    uint64_t offset; /* from the buffer's start (or from svm) */
    uint64_t size;   /* > 0 */
    uint32_t access; /* MT_COH_READ / MT_COH_WRITE / MT_COH_RW */
} mt_coh_arg;

typedef struct mt_coh_command {
    mt_coh_kernel_fn fn;  /* NULL: only make the arguments coherent on the
                           * device (OpenCL's clEnqueueMigrateMemObjects) */
    void *user;
    const mt_coh_arg *args;
    uint32_t nargs;       /* at most MT_COH_MAX_ARGS */
    mt_coh_event *const *wait; /* events to wait for (any client's of this context) */
    uint32_t nwait;
} mt_coh_command;

/* Enqueues a command on `q`. Validates first: the queue's device is alive,
 * every argument names a live buffer (or SVM allocation) of the queue's
 * client, its range lies inside it, its access is allowed (buffer flags,
 * maps), its content is not lost, the wait events are not NULL and belong
 * to the queue's context (-EINVAL otherwise); an invalid
 * command returns an error and reaches no device. Then makes sure the
 * arguments have instances on the device (evicting if needed), plans the
 * migrations and queues everything. Returns 0 and sets *ev (NULL = not
 * wanted; release it with mt_coh_event_release), or MT_ENOBUF, -ERANGE,
 * -EACCES, MT_EMAPPED, MT_ELOSTDATA, MT_EDEVLOST, MT_EDEVMEM (no room even
 * after eviction), -EOPNOTSUPP (fine SVM on a device without it), -EINVAL
 * or -ENOMEM; on error nothing was enqueued and no content changed (after
 * -ENOMEM, copies the planner had already started may still run: they only
 * make content valid in more places). */
MT_API int mt_coh_enqueue(mt_coh_queue *q, const mt_coh_command *cmd, mt_coh_event **ev);

/* Maps `target` (a buffer range or SVM range; access READ: read, WRITE:
 * write without reading, RW: both) for the host, ordered after the queue's
 * previous commands and `wait`. *ptr is valid once *ev completes; after a
 * writing map the host copy is the only valid one. Returns as
 * mt_coh_enqueue; -EBUSY when the range is already mapped for writing. */
MT_API int mt_coh_map(mt_coh_queue *q, const mt_coh_arg *target, mt_coh_event *const *wait,
                      uint32_t nwait, void **ptr, mt_coh_event **ev);

/* Ends the map that returned `ptr` (ordered in `q`). Returns 0 (sets *ev if
 * not NULL), -ENOENT (no such map of this client) or -ENOMEM (the map is
 * still there). */
MT_API int mt_coh_unmap(mt_coh_queue *q, void *ptr, mt_coh_event **ev);

/* ---- events ------------------------------------------------------------------------------ */

/* Waits for the event's command. timeout_ns < 0 waits without limit, 0 polls.
 * Returns 0 (done), the command's error, or MT_ETIMEDOUT. */
MT_API int mt_coh_event_wait(mt_coh_event *ev, int64_t timeout_ns);

/* 1 while pending, 0 when done, or the command's error. Lock-free. */
MT_API int mt_coh_event_status(const mt_coh_event *ev);

/* Takes one more reference to an event (each one is dropped with
 * mt_coh_event_release). NULL is a no-op. Any thread. */
MT_API void mt_coh_event_retain(mt_coh_event *ev);

/* Drops a reference; the event is freed with the last one (it stays valid
 * after mt_coh_destroy until then). NULL is a no-op. Any thread. */
MT_API void mt_coh_event_release(mt_coh_event *ev);

typedef struct mt_coh_event_info {
    uint64_t bytes_in;   /* bytes the planner decided to copy into the command's device */
    uint64_t bytes_relay;/* of which copied to host memory first (two hops) */
    uint32_t migrations; /* migration commands created for it */
} mt_coh_event_info;

/* What the planner decided for the event's command. Returns 0. */
MT_API int mt_coh_event_info_get(const mt_coh_event *ev, mt_coh_event_info *out);

/* ---- statistics ------------------------------------------------------------------------ */

typedef struct mt_coh_stats {
    uint64_t enqueues;       /* commands enqueued (maps included) */
    uint64_t rejected;       /* enqueues refused by validation or memory */
    uint64_t migrations;     /* migration commands created */
    uint64_t bytes_h2d;      /* uploads: host memory (or a host-memory device) -> device */
    uint64_t bytes_d2h;      /* downloads: device -> host memory (or a host-memory device) */
    uint64_t bytes_d2d;      /* peer copies between devices of one backend */
    uint64_t bytes_relay;    /* device -> host -> device: the first hop (also in d2h) */
    uint64_t evictions;
    uint64_t host_dirty_bytes; /* tracked host bytes found written */
    uint64_t failed;         /* commands that failed */
} mt_coh_stats;

/* Copies the counters. Returns 0. */
MT_API int mt_coh_stats_get(mt_coh *c, mt_coh_stats *out);

/* How tracked host buffers (MT_COH_BUF_TRACK_HOST) are watched: 1 when the
 * pages the host writes are tracked everywhere (uffd, or the signal tracker
 * with the interposer libmemtrack_preload.so preloaded: docs/track.md); 0
 * when some of their memory is uploaded whole at every sync instead (exact,
 * not minimal): memory the signal tracker would have to write-protect
 * without the interposer (the application's read(2) into it would fail, its
 * own SIGSEGV handler would take memtrack's faults), memory mapped shared or
 * from a file (its other mappings, other processes and write(2) to the file
 * change it unseen: mt_track_aliasable), or memory the application unmapped
 * or remapped under the buffer. -EINVAL without a context. Any thread. */
MT_API int mt_coh_track_status(mt_coh *c);

/* The collection helper of tracked host memory (mt_coh_opts.collect_helper):
 * mt_tracker_helper_status() of the context's tracker (1 running, 2
 * starting, 0 not asked or no tracked buffer yet, negative: collection is
 * in-process, and why). Any thread. */
MT_API int mt_coh_collect_helper_status(mt_coh *c);

#ifdef __cplusplus
}
#endif
#endif
