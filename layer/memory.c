/* Memory hooks: allocation, mapping, flush/invalidate, free. Each records the
 * event and sets up or tears down the capture of the memory; the driver is
 * always called, whatever happens to capture. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "layer.h"

VKAPI_ATTR VkResult VKAPI_CALL lt_AllocateMemory(VkDevice device, const VkMemoryAllocateInfo *ai,
                                                 const VkAllocationCallbacks *alloc, VkDeviceMemory *out)
{
    lt_device *dev = lt_device_from(device);
    VkResult res = dev->t.AllocateMemory(device, ai, alloc, out);
    if (res != VK_SUCCESS)
        return res;
    lt_memory *m = calloc(1, sizeof *m);
    if (!m) {
        lt_warn_once("oom-memory", "out of memory: a device memory is not captured");
        return res;
    }
    m->handle = *out;
    m->id = lt_next_id();
    m->size = ai->allocationSize;
    m->type_index = ai->memoryTypeIndex;
    m->flags = ai->memoryTypeIndex < dev->memprops.memoryTypeCount
                   ? dev->memprops.memoryTypes[ai->memoryTypeIndex].propertyFlags
                   : 0;
    m->dev = dev;
    pthread_mutex_lock(&dev->lock);
    if (lt_map_put(&dev->memories, (uint64_t)m->handle, m) != 0) {
        free(m);
        m = NULL;
    } else if (lt_tracing()) {
        lt_trace_check(mt_trace_write_memory(lt_ctx.trace, m->id, m->size, m->type_index, m->flags));
    }
    pthread_mutex_unlock(&dev->lock);
    return res;
}

/* Unbinds every object from m and frees m's bookkeeping. dev->lock held. */
static void forget_memory(lt_memory *m)
{
    if (m->mapped)
        lt_capture_unmap(m);
    for (size_t i = 0; i < m->nbinds; i++)
        m->binds[i]->mem = NULL;
    free(m->binds);
    if (m->reference) {
        munmap(m->reference, (size_t)m->size);
        lt_ctx.st.shadow_bytes -= (uint64_t)(m->known_hi - m->known_lo);
    }
    free(m);
}

VKAPI_ATTR void VKAPI_CALL lt_FreeMemory(VkDevice device, VkDeviceMemory memory,
                                         const VkAllocationCallbacks *alloc)
{
    lt_device *dev = lt_device_from(device);
    if (memory) {
        pthread_mutex_lock(&dev->lock);
        lt_memory *m = lt_map_del(&dev->memories, (uint64_t)memory);
        if (m) {
            /* Freeing unmaps implicitly: capture what was written first. */
            uint64_t id = m->id;
            forget_memory(m);
            if (lt_tracing())
                lt_trace_check(mt_trace_write_destroy(lt_ctx.trace, MT_TRACE_DESTROY_MEMORY, id));
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

/* Registers a mapping the driver just made. dev->lock held. */
static void mapped(lt_device *dev, lt_memory *m, VkDeviceSize offset, VkDeviceSize size, void *ptr)
{
    m->mapped = 1;
    m->map_offset = offset;
    m->map_size = size == VK_WHOLE_SIZE ? m->size - offset : size;
    m->driver_ptr = ptr;
    m->next_mapped = dev->mapped;
    m->prev_mapped = NULL;
    if (dev->mapped)
        dev->mapped->prev_mapped = m;
    dev->mapped = m;
    lt_capture_map(m);
}

VKAPI_ATTR VkResult VKAPI_CALL lt_MapMemory(VkDevice device, VkDeviceMemory memory,
                                            VkDeviceSize offset, VkDeviceSize size,
                                            VkMemoryMapFlags flags, void **pp)
{
    lt_device *dev = lt_device_from(device);
    VkResult res = dev->t.MapMemory(device, memory, offset, size, flags, pp);
    if (res != VK_SUCCESS || !lt_tracing())
        return res;
    pthread_mutex_lock(&dev->lock);
    lt_memory *m = lt_map_get(&dev->memories, (uint64_t)memory);
    if (m && !m->mapped && m->size > offset) {
        mapped(dev, m, offset, size, *pp);
        *pp = m->app_ptr;
    }
    pthread_mutex_unlock(&dev->lock);
    return res;
}

VKAPI_ATTR VkResult VKAPI_CALL lt_MapMemory2KHR(VkDevice device, const VkMemoryMapInfoKHR *info, void **pp)
{
    lt_device *dev = lt_device_from(device);
    VkResult res = dev->t.MapMemory2KHR(device, info, pp);
    if (res != VK_SUCCESS || !lt_tracing())
        return res;
    pthread_mutex_lock(&dev->lock);
    lt_memory *m = lt_map_get(&dev->memories, (uint64_t)info->memory);
    if (m && !m->mapped && m->size > info->offset) {
        mapped(dev, m, info->offset, info->size, *pp);
        *pp = m->app_ptr;
    }
    pthread_mutex_unlock(&dev->lock);
    return res;
}

static void unmapping(lt_device *dev, VkDeviceMemory memory)
{
    pthread_mutex_lock(&dev->lock);
    lt_memory *m = lt_map_get(&dev->memories, (uint64_t)memory);
    if (m && m->mapped)
        lt_capture_unmap(m); /* before the driver's mapping goes away */
    pthread_mutex_unlock(&dev->lock);
}

VKAPI_ATTR void VKAPI_CALL lt_UnmapMemory(VkDevice device, VkDeviceMemory memory)
{
    lt_device *dev = lt_device_from(device);
    unmapping(dev, memory);
    dev->t.UnmapMemory(device, memory);
}

VKAPI_ATTR VkResult VKAPI_CALL lt_UnmapMemory2KHR(VkDevice device, const VkMemoryUnmapInfoKHR *info)
{
    lt_device *dev = lt_device_from(device);
    unmapping(dev, info->memory);
    return dev->t.UnmapMemory2KHR(device, info);
}

VKAPI_ATTR VkResult VKAPI_CALL lt_FlushMappedMemoryRanges(VkDevice device, uint32_t n,
                                                          const VkMappedMemoryRange *ranges)
{
    lt_device *dev = lt_device_from(device);
    /* Shadow mode: the app's writes reach the driver's mapping here, as they
     * must for the device to see them; other modes just capture early. */
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
    return dev->t.FlushMappedMemoryRanges(device, n, ranges);
}

VKAPI_ATTR VkResult VKAPI_CALL lt_InvalidateMappedMemoryRanges(VkDevice device, uint32_t n,
                                                               const VkMappedMemoryRange *ranges)
{
    lt_device *dev = lt_device_from(device);
    VkResult res = dev->t.InvalidateMappedMemoryRanges(device, n, ranges);
    if (res != VK_SUCCESS)
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

/* ---- bindings ----------------------------------------------------------- */

void lt_memory_add_binding(lt_memory *m, lt_object *o)
{
    if (m->nbinds == m->capbinds) {
        size_t ncap = m->capbinds ? m->capbinds * 2 : 8;
        lt_object **b = realloc(m->binds, ncap * sizeof *b);
        if (!b) {
            lt_warn_once("oom-bind", "out of memory: a binding is not attributed");
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
            return;
        }
}
