/* Buffer and image hooks: creation (with the used size of buffers, not the
 * padded one), binding to memory (which attributes packets to objects and
 * tells capture which ranges the device may write), destruction (a
 * device-writable object leaves its range to be diffed once more: the device
 * may have written it before it went). */
#define _GNU_SOURCE
#include <stdlib.h>

#include "layer.h"
#include "usage.h"


static void add_object(lt_device *dev, uint64_t handle, int is_image, int writable, VkDeviceSize size,
                       VkDeviceSize used)
{
    lt_object *o = calloc(1, sizeof *o);
    if (!o) {
        lt_rec_note(0, "oom-object", "out of memory: an object is not attributed (its bytes are "
                                     "still captured)");
        return;
    }
    o->handle = handle;
    o->id = lt_next_id();
    o->is_image = is_image;
    o->gpu_writable = writable;
    o->size = size;
    o->used = used;
    pthread_mutex_lock(&dev->lock);
    if (lt_map_put(&dev->objects, handle, o) != 0)
        free(o);
    else
        lt_rec_object(o->id, is_image ? MT_TRACE_OBJECT_IMAGE : MT_TRACE_OBJECT_BUFFER, size, used);
    pthread_mutex_unlock(&dev->lock);
}

LT_HOOK(VkResult, CreateBuffer, VkDevice device, const VkBufferCreateInfo *ci,
        const VkAllocationCallbacks *alloc, VkBuffer *out)
{
    lt_device *dev = lt_device_from(device);
    VkResult res = dev->t.CreateBuffer(device, ci, alloc, out);
    if (res != VK_SUCCESS || !dev->capture)
        return res;
    VkMemoryRequirements req = {.size = ci->size};
    if (dev->t.GetBufferMemoryRequirements)
        dev->t.GetBufferMemoryRequirements(device, *out, &req);
    add_object(dev, (uint64_t)*out, 0, lt_buffer_gpu_writable(ci), req.size, ci->size);
    return res;
}

LT_HOOK(VkResult, CreateImage, VkDevice device, const VkImageCreateInfo *ci,
        const VkAllocationCallbacks *alloc, VkImage *out)
{
    lt_device *dev = lt_device_from(device);
    VkResult res = dev->t.CreateImage(device, ci, alloc, out);
    if (res != VK_SUCCESS || !dev->capture)
        return res;
    VkMemoryRequirements req = {0};
    /* Disjoint multi-planar images have per-plane requirements only. */
    if (!(ci->flags & VK_IMAGE_CREATE_DISJOINT_BIT) && dev->t.GetImageMemoryRequirements)
        dev->t.GetImageMemoryRequirements(device, *out, &req);
    add_object(dev, (uint64_t)*out, 1, lt_image_gpu_writable(ci), req.size, req.size);
    return res;
}

static void destroy_object(lt_device *dev, uint64_t handle)
{
    if (!handle || !dev->capture)
        return;
    pthread_mutex_lock(&dev->lock);
    lt_object *o = lt_map_del(&dev->objects, handle);
    if (o) {
        if (o->mem)
            lt_memory_remove_binding(o->mem, o);
        lt_rec_destroy(MT_TRACE_DESTROY_OBJECT, o->id);
        free(o);
    }
    pthread_mutex_unlock(&dev->lock);
}

LT_HOOK(void, DestroyBuffer, VkDevice device, VkBuffer buffer, const VkAllocationCallbacks *alloc)
{
    lt_device *dev = lt_device_from(device);
    destroy_object(dev, (uint64_t)buffer);
    dev->t.DestroyBuffer(device, buffer, alloc);
}

LT_HOOK(void, DestroyImage, VkDevice device, VkImage image, const VkAllocationCallbacks *alloc)
{
    lt_device *dev = lt_device_from(device);
    destroy_object(dev, (uint64_t)image);
    dev->t.DestroyImage(device, image, alloc);
}

/* Records a successful binding. dev->lock held. */
static void bound(lt_device *dev, uint64_t handle, VkDeviceMemory memory, VkDeviceSize offset)
{
    lt_object *o = lt_map_get(&dev->objects, handle);
    lt_memory *m = lt_map_get(&dev->memories, (uint64_t)memory);
    if (!o || !m)
        return;
    if (o->mem)
        lt_memory_remove_binding(o->mem, o); /* not legal Vulkan, but do not corrupt */
    o->mem = m;
    o->offset = offset;
    lt_memory_add_binding(m, o);
    lt_rec_bind(o->id, m->id, offset);
}

LT_HOOK(VkResult, BindBufferMemory, VkDevice device, VkBuffer buffer, VkDeviceMemory memory,
        VkDeviceSize offset)
{
    lt_device *dev = lt_device_from(device);
    VkResult res = dev->t.BindBufferMemory(device, buffer, memory, offset);
    if (res == VK_SUCCESS && dev->capture) {
        pthread_mutex_lock(&dev->lock);
        bound(dev, (uint64_t)buffer, memory, offset);
        pthread_mutex_unlock(&dev->lock);
    }
    return res;
}

LT_HOOK(VkResult, BindImageMemory, VkDevice device, VkImage image, VkDeviceMemory memory,
        VkDeviceSize offset)
{
    lt_device *dev = lt_device_from(device);
    VkResult res = dev->t.BindImageMemory(device, image, memory, offset);
    if (res == VK_SUCCESS && dev->capture) {
        pthread_mutex_lock(&dev->lock);
        bound(dev, (uint64_t)image, memory, offset);
        pthread_mutex_unlock(&dev->lock);
    }
    return res;
}

static VkResult bind_buffers2(lt_device *dev, VkDevice device, uint32_t n,
                              const VkBindBufferMemoryInfo *infos, PFN_vkBindBufferMemory2 next)
{
    VkResult res = next(device, n, infos);
    if (res == VK_SUCCESS && dev->capture) {
        pthread_mutex_lock(&dev->lock);
        for (uint32_t i = 0; i < n; i++)
            bound(dev, (uint64_t)infos[i].buffer, infos[i].memory, infos[i].memoryOffset);
        pthread_mutex_unlock(&dev->lock);
    }
    return res;
}

static VkResult bind_images2(lt_device *dev, VkDevice device, uint32_t n,
                             const VkBindImageMemoryInfo *infos, PFN_vkBindImageMemory2 next)
{
    VkResult res = next(device, n, infos);
    if (res == VK_SUCCESS && dev->capture) {
        pthread_mutex_lock(&dev->lock);
        for (uint32_t i = 0; i < n; i++)
            if (infos[i].memory) /* swapchain bindings carry no memory */
                bound(dev, (uint64_t)infos[i].image, infos[i].memory, infos[i].memoryOffset);
        pthread_mutex_unlock(&dev->lock);
    }
    return res;
}

LT_HOOK(VkResult, BindBufferMemory2, VkDevice d, uint32_t n, const VkBindBufferMemoryInfo *i)
{
    lt_device *dev = lt_device_from(d);
    return bind_buffers2(dev, d, n, i, dev->t.BindBufferMemory2);
}

LT_HOOK(VkResult, BindBufferMemory2KHR, VkDevice d, uint32_t n, const VkBindBufferMemoryInfo *i)
{
    lt_device *dev = lt_device_from(d);
    return bind_buffers2(dev, d, n, i, dev->t.BindBufferMemory2KHR);
}

LT_HOOK(VkResult, BindImageMemory2, VkDevice d, uint32_t n, const VkBindImageMemoryInfo *i)
{
    lt_device *dev = lt_device_from(d);
    return bind_images2(dev, d, n, i, dev->t.BindImageMemory2);
}

LT_HOOK(VkResult, BindImageMemory2KHR, VkDevice d, uint32_t n, const VkBindImageMemoryInfo *i)
{
    lt_device *dev = lt_device_from(d);
    return bind_images2(dev, d, n, i, dev->t.BindImageMemory2KHR);
}
