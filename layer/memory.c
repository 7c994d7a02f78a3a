/* Memory hooks: allocation (and what it says about external memory),
 * mapping, flush/invalidate, free; bindings and the ranges the device may
 * have written. Each records the event and has the capture engine set up or
 * tear down the capture of the memory; the driver is always called, whatever
 * happens to capture. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "layer.h"
#include "chain.h"
#include "refcache.h"

/* What the allocation's pNext chain says about sharing. The sType values
 * exist in every header version, platform structures included. */
static uint32_t external_kind(const VkMemoryAllocateInfo *ai, void **host_ptr)
{
    uint32_t ext = 0;
    for (const VkBaseInStructure *p = ai->pNext; p; p = p->pNext) {
        switch (p->sType) {
        case VK_STRUCTURE_TYPE_EXPORT_MEMORY_ALLOCATE_INFO:
        case VK_STRUCTURE_TYPE_EXPORT_MEMORY_ALLOCATE_INFO_NV:
            if (((const VkExportMemoryAllocateInfo *)p)->handleTypes)
                ext |= LT_EXT_EXPORTED;
            break;
        case VK_STRUCTURE_TYPE_IMPORT_MEMORY_HOST_POINTER_INFO_EXT: {
            const VkImportMemoryHostPointerInfoEXT *h = (const VkImportMemoryHostPointerInfoEXT *)p;
            if (h->handleType && h->pHostPointer) {
                ext |= LT_EXT_HOST_PTR;
                *host_ptr = h->pHostPointer;
                if (h->handleType == VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_MAPPED_FOREIGN_MEMORY_BIT_EXT)
                    ext |= LT_EXT_HOST_SHARED;
            }
            break;
        }
        case VK_STRUCTURE_TYPE_IMPORT_MEMORY_FD_INFO_KHR:
            if (((const VkImportMemoryFdInfoKHR *)p)->handleType)
                ext |= LT_EXT_IMPORTED;
            break;
        case VK_STRUCTURE_TYPE_IMPORT_MEMORY_WIN32_HANDLE_INFO_KHR:
        case VK_STRUCTURE_TYPE_IMPORT_MEMORY_WIN32_HANDLE_INFO_NV:
        case VK_STRUCTURE_TYPE_IMPORT_ANDROID_HARDWARE_BUFFER_INFO_ANDROID:
        case VK_STRUCTURE_TYPE_IMPORT_MEMORY_ZIRCON_HANDLE_INFO_FUCHSIA:
        case VK_STRUCTURE_TYPE_IMPORT_MEMORY_BUFFER_COLLECTION_FUCHSIA:
            ext |= LT_EXT_IMPORTED;
            break;
        default:
            break;
        }
    }
    return ext;
}

/* An imported host allocation is exposed from birth: the app writes it
 * through its own pointer, never through a map. dev->lock held. */
static void expose_host_pointer(lt_device *dev, lt_memory *m, void *ptr)
{
    m->mapped = 1;
    m->map_offset = 0;
    m->map_size = m->size;
    m->driver_ptr = ptr;
    lt_memory_link_exposed(dev, m);
    lt_capture_expose(m);
    lt_rec_note(m->id, "host-pointer",
                "memory %llu is imported from a host pointer: captured at the application's "
                "pointer for its whole life",
                (unsigned long long)m->id);
}

/* Whether memory of this type takes the host's memory: host-visible memory
 * (system memory, or a CPU or integrated device's only heap), or a heap that
 * is not the device's own. Memory mapped through a discrete GPU's PCI BAR
 * counts too, which only makes the budget careful a little early. */
static int host_backed(const lt_device *dev, uint32_t type_index)
{
    if (type_index >= dev->memprops.memoryTypeCount)
        return 0;
    const VkMemoryType *t = &dev->memprops.memoryTypes[type_index];
    return (t->propertyFlags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) ||
           !(dev->memprops.memoryHeaps[t->heapIndex].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT);
}

LT_HOOK(VkResult, AllocateMemory, VkDevice device, const VkMemoryAllocateInfo *ai,
        const VkAllocationCallbacks *alloc, VkDeviceMemory *out)
{
    lt_device *dev = lt_device_from(device);
    void *host_ptr = NULL;
    uint32_t external = external_kind(ai, &host_ptr);
    /* An import takes no new memory: it was taken where it was made. */
    if (dev->capture && !(external & (LT_EXT_IMPORTED | LT_EXT_HOST_PTR)) &&
        host_backed(dev, ai->memoryTypeIndex))
        lt_capture_make_room(dev, ai->allocationSize);
    VkResult res = dev->t.AllocateMemory(device, ai, alloc, out);
    if (res != VK_SUCCESS || !dev->capture)
        return res;
    lt_memory *m = calloc(1, sizeof *m);
    if (!m) {
        lt_rec_note(0, "oom-memory", "out of memory: a device memory is not captured");
        return res;
    }
    m->handle = *out;
    m->id = lt_next_id();
    m->size = ai->allocationSize;
    m->type_index = ai->memoryTypeIndex;
    m->flags = ai->memoryTypeIndex < dev->memprops.memoryTypeCount
                   ? dev->memprops.memoryTypes[ai->memoryTypeIndex].propertyFlags
                   : 0;
    m->external = external;
    /* Host memory whose other mappings (a second view, another process, a
     * forked child, write(2) to its file) write it: no fault is raised here
     * for those, so it cannot be tracked in place. Unknown counts as yes. */
    if ((m->external & LT_EXT_HOST_PTR) && mt_track_aliasable(host_ptr, (size_t)m->size) != 0)
        m->external |= LT_EXT_HOST_SHARED;
    m->dev = dev;
    m->auto_pref = LT_AUTO;
    pthread_mutex_lock(&dev->lock);
    if (lt_map_put(&dev->memories, (uint64_t)m->handle, m) != 0) {
        free(m);
        m = NULL;
        lt_rec_note(0, "oom-memory", "out of memory: a device memory is not captured");
    } else {
        lt_rec_memory(m->id, m->size, m->type_index, m->flags);
        lt_heirs_take(m);
        if ((m->external & (LT_EXT_EXPORTED | LT_EXT_IMPORTED)) &&
            !(m->flags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT))
            lt_rec_note(m->id, "external-invisible",
                        "memory %llu is shared with other processes or APIs and is not host "
                        "visible: what is written into it elsewhere is not captured",
                        (unsigned long long)m->id);
        if (m->external & LT_EXT_HOST_PTR)
            expose_host_pointer(dev, m, host_ptr);
    }
    pthread_mutex_unlock(&dev->lock);
    return res;
}

/* Unbinds every object from m and frees m's bookkeeping. dev->lock held. */
static void forget_memory(lt_memory *m)
{
    if (m->mapped)
        lt_capture_conceal(m, 1);
    lt_heirs_leave(m);
    for (size_t i = 0; i < m->nbinds; i++)
        m->binds[i]->mem = NULL;
    free(m->binds);
    free(m->stale);
    free(m->sparse);
    lt_view_free(m);
    if (m->reference) {
        /* Accounted off first: a kept reference counts again in the cache,
         * and the peak must not count it twice. */
        lt_stat_add(LT_ST_EXTRA_BYTES, -(int64_t)lt_reference_held(m));
        lt_refcache_give(m->reference, lt_reference_bytes(m));
    }
    free(m);
}

LT_HOOK(void, FreeMemory, VkDevice device, VkDeviceMemory memory, const VkAllocationCallbacks *alloc)
{
    lt_device *dev = lt_device_from(device);
    if (memory && dev->capture) {
        pthread_mutex_lock(&dev->lock);
        lt_memory *m = lt_map_del(&dev->memories, (uint64_t)memory);
        if (m) {
            /* Freeing unmaps implicitly: capture what was written first. */
            uint64_t id = m->id;
            forget_memory(m);
            lt_rec_destroy(MT_TRACE_DESTROY_MEMORY, id);
        }
        pthread_mutex_unlock(&dev->lock);
    }
    dev->t.FreeMemory(device, memory, alloc);
}

static void forget_one(void *val, void *arg)
{
    (void)arg;
    forget_memory(val);
}

static void free_one(void *val, void *arg)
{
    (void)arg;
    free(val);
}

void lt_memory_destroy_all(lt_device *dev)
{
    lt_map_each(&dev->memories, forget_one, NULL);
    /* Objects the application did not destroy (invalid, but not ours to
     * leak); their memories are gone already. */
    lt_map_each(&dev->objects, free_one, NULL);
}

void lt_memory_link_exposed(lt_device *dev, lt_memory *m)
{
    m->next_mapped = dev->mapped;
    m->prev_mapped = NULL;
    if (dev->mapped)
        dev->mapped->prev_mapped = m;
    dev->mapped = m;
}

void lt_memory_unlink_exposed(lt_device *dev, lt_memory *m)
{
    if (m->prev_mapped)
        m->prev_mapped->next_mapped = m->next_mapped;
    else
        dev->mapped = m->next_mapped;
    if (m->next_mapped)
        m->next_mapped->prev_mapped = m->prev_mapped;
    m->next_mapped = m->prev_mapped = NULL;
}

/* A mapping the driver just made, if the layer captures it: returns the
 * pointer the application gets. dev->lock held. */
static void *mapped(lt_device *dev, VkDeviceMemory memory, VkDeviceSize offset, VkDeviceSize size,
                    void *ptr)
{
    lt_memory *m = lt_map_get(&dev->memories, (uint64_t)memory);
    /* A host-pointer import stays exposed at the app's pointer; a second map
     * of a mapped memory is the app's error: neither changes capture. */
    if (!m || m->mapped || offset >= m->size)
        return ptr;
    m->mapped = 1;
    m->map_offset = offset;
    m->map_size = size == VK_WHOLE_SIZE ? m->size - offset : size;
    m->driver_ptr = ptr;
    lt_memory_link_exposed(dev, m);
    lt_capture_expose(m);
    return m->app_ptr;
}

LT_HOOK(VkResult, MapMemory, VkDevice device, VkDeviceMemory memory, VkDeviceSize offset,
        VkDeviceSize size, VkMemoryMapFlags flags, void **pp)
{
    lt_device *dev = lt_device_from(device);
    VkResult res = dev->t.MapMemory(device, memory, offset, size, flags, pp);
    if (res != VK_SUCCESS || !dev->capture)
        return res;
    pthread_mutex_lock(&dev->lock);
    *pp = mapped(dev, memory, offset, size, *pp);
    pthread_mutex_unlock(&dev->lock);
    return res;
}

/* Placed maps (VK_EXT_map_memory_placed) put the mapping where the app
 * says: it must get exactly that address, so no shadow. */
static int placed_map(const VkMemoryMapInfoKHR *info)
{
    return (info->flags & LT_MEMORY_MAP_PLACED_BIT) &&
           lt_chain_find(info->pNext, LT_STRUCTURE_TYPE_MEMORY_MAP_PLACED_INFO) != NULL;
}

static VkResult map2(VkDevice device, const VkMemoryMapInfoKHR *info, void **pp, int core)
{
    lt_device *dev = lt_device_from(device);
    VkResult res = core ? dev->t.MapMemory2(device, info, pp) : dev->t.MapMemory2KHR(device, info, pp);
    if (res != VK_SUCCESS || !dev->capture)
        return res;
    pthread_mutex_lock(&dev->lock);
    lt_memory *m = lt_map_get(&dev->memories, (uint64_t)info->memory);
    if (m && !m->mapped)
        m->placed = placed_map(info);
    *pp = mapped(dev, info->memory, info->offset, info->size, *pp);
    pthread_mutex_unlock(&dev->lock);
    return res;
}

LT_HOOK(VkResult, MapMemory2KHR, VkDevice device, const VkMemoryMapInfoKHR *info, void **pp)
{
    return map2(device, info, pp, 0);
}

LT_HOOK(VkResult, MapMemory2, VkDevice device, const VkMemoryMapInfoKHR *info, void **pp)
{
    return map2(device, info, pp, 1);
}

static void unmapping(lt_device *dev, VkDeviceMemory memory)
{
    if (!dev->capture)
        return;
    pthread_mutex_lock(&dev->lock);
    lt_memory *m = lt_map_get(&dev->memories, (uint64_t)memory);
    if (m && m->mapped && !(m->external & LT_EXT_HOST_PTR))
        lt_capture_conceal(m, 0); /* before the driver's mapping goes away */
    pthread_mutex_unlock(&dev->lock);
}

LT_HOOK(void, UnmapMemory, VkDevice device, VkDeviceMemory memory)
{
    lt_device *dev = lt_device_from(device);
    unmapping(dev, memory);
    dev->t.UnmapMemory(device, memory);
}

LT_HOOK(VkResult, UnmapMemory2KHR, VkDevice device, const VkMemoryUnmapInfoKHR *info)
{
    lt_device *dev = lt_device_from(device);
    unmapping(dev, info->memory);
    return dev->t.UnmapMemory2KHR(device, info);
}

LT_HOOK(VkResult, UnmapMemory2, VkDevice device, const VkMemoryUnmapInfoKHR *info)
{
    lt_device *dev = lt_device_from(device);
    unmapping(dev, info->memory);
    return dev->t.UnmapMemory2(device, info);
}

LT_HOOK(VkResult, FlushMappedMemoryRanges, VkDevice device, uint32_t n, const VkMappedMemoryRange *ranges)
{
    lt_device *dev = lt_device_from(device);
    /* Shadow mode: the app's writes reach the driver's mapping here, as they
     * must for the device to see them; other modes just capture early. */
    if (dev->capture) {
        pthread_mutex_lock(&dev->lock);
        for (uint32_t i = 0; i < n; i++) {
            lt_memory *m = lt_map_get(&dev->memories, (uint64_t)ranges[i].memory);
            int seen = 0;
            for (uint32_t j = 0; j < i; j++)
                seen |= ranges[j].memory == ranges[i].memory;
            if (m && m->mapped && !seen)
                lt_capture_memory(m);
        }
        pthread_mutex_unlock(&dev->lock);
    }
    return dev->t.FlushMappedMemoryRanges(device, n, ranges);
}

LT_HOOK(VkResult, InvalidateMappedMemoryRanges, VkDevice device, uint32_t n,
        const VkMappedMemoryRange *ranges)
{
    lt_device *dev = lt_device_from(device);
    VkResult res = dev->t.InvalidateMappedMemoryRanges(device, n, ranges);
    if (res != VK_SUCCESS || !dev->capture)
        return res;
    pthread_mutex_lock(&dev->lock);
    for (uint32_t i = 0; i < n; i++) {
        lt_memory *m = lt_map_get(&dev->memories, (uint64_t)ranges[i].memory);
        if (m)
            lt_capture_sync_in(m);
    }
    pthread_mutex_unlock(&dev->lock);
    return res;
}

/* ---- bindings and stale device-write ranges --------------------------------- */

void lt_memory_add_binding(lt_memory *m, lt_object *o)
{
    if (m->nbinds == m->capbinds) {
        size_t ncap = m->capbinds ? m->capbinds * 2 : 8;
        lt_object **b = realloc(m->binds, ncap * sizeof *b);
        if (!b) {
            /* Unattributed bytes are still captured (object 0); a device
             * writable object would not be re-diffed: scan instead. */
            lt_rec_note(m->id, "oom-bind", "out of memory: a binding is not attributed");
            if (o->gpu_writable)
                lt_memory_note_stale(m, o->offset, o->size);
            return;
        }
        m->binds = b;
        m->capbinds = ncap;
    }
    size_t i = m->nbinds;
    while (i > 0 && m->binds[i - 1]->offset > o->offset) {
        m->binds[i] = m->binds[i - 1];
        i--;
    }
    m->binds[i] = o;
    m->nbinds++;
}

void lt_memory_remove_binding(lt_memory *m, lt_object *o)
{
    for (size_t i = 0; i < m->nbinds; i++)
        if (m->binds[i] == o) {
            memmove(m->binds + i, m->binds + i + 1, (m->nbinds - i - 1) * sizeof *m->binds);
            m->nbinds--;
            break;
        }
    /* The device may have written through o before it went (its last
     * submit may even still run): that range is diffed once more. */
    if (o->gpu_writable)
        lt_memory_note_stale(m, o->offset, o->is_image ? o->size : o->used);
}

/* Adds [off, off+len) (clipped to m) to a list of ranges, merged into an
 * overlapping or touching one so that the list stays short. -1: out of
 * memory, nothing added. */
static int add_range(const lt_memory *m, lt_range **v, size_t *n, size_t *cap, VkDeviceSize off,
                     VkDeviceSize len)
{
    if (len == 0 || off >= m->size)
        return 0;
    if (len > m->size - off)
        len = m->size - off;
    for (size_t i = 0; i < *n; i++) {
        lt_range *r = &(*v)[i];
        if (off <= r->offset + r->length && r->offset <= off + len) {
            VkDeviceSize lo = off < r->offset ? off : r->offset;
            VkDeviceSize hi = off + len > r->offset + r->length ? off + len : r->offset + r->length;
            r->offset = lo;
            r->length = hi - lo;
            return 0;
        }
    }
    if (*n == *cap) {
        size_t ncap = *cap ? *cap * 2 : 4;
        lt_range *nv = realloc(*v, ncap * sizeof *nv);
        if (!nv)
            return -1;
        *v = nv;
        *cap = ncap;
    }
    (*v)[(*n)++] = (lt_range){off, len};
    return 0;
}

void lt_memory_note_stale(lt_memory *m, VkDeviceSize off, VkDeviceSize len)
{
    if (add_range(m, &m->stale, &m->nstale, &m->capstale, off, len) != 0)
        m->stale_whole = 1; /* cannot remember the range: the whole memory */
}

void lt_memory_note_sparse(lt_memory *m, VkDeviceSize off, VkDeviceSize len)
{
    if (add_range(m, &m->sparse, &m->nsparse, &m->capsparse, off, len) != 0)
        m->sparse_whole = 1;
}
