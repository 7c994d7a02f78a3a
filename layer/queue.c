/* Queue hooks: every submit path captures before the work reaches the
 * driver; present marks a frame; sparse binding marks the memory it binds
 * to resources the device may write. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>

#include "layer.h"

static void note_queue(lt_device *dev, VkQueue q, uint32_t family, uint32_t index)
{
    if (!q || !dev->capture)
        return;
    pthread_mutex_lock(&dev->lock);
    if (!lt_queue_of(dev, q)) {
        lt_queue *lq = calloc(1, sizeof *lq);
        /* Stable across runs: family and index, not the handle. */
        if (lq)
            lq->id = (uint64_t)family << 16 | index;
        if (lq && lt_map_put(&dev->queues, (uint64_t)(uintptr_t)q, lq) != 0)
            free(lq);
    }
    pthread_mutex_unlock(&dev->lock);
}

LT_HOOK(void, GetDeviceQueue, VkDevice device, uint32_t family, uint32_t index, VkQueue *q)
{
    lt_device *dev = lt_device_from(device);
    dev->t.GetDeviceQueue(device, family, index, q);
    note_queue(dev, *q, family, index);
}

LT_HOOK(void, GetDeviceQueue2, VkDevice device, const VkDeviceQueueInfo2 *info, VkQueue *q)
{
    lt_device *dev = lt_device_from(device);
    dev->t.GetDeviceQueue2(device, info, q);
    note_queue(dev, *q, info->queueFamilyIndex, info->queueIndex);
}

LT_HOOK(VkResult, QueueSubmit, VkQueue queue, uint32_t n, const VkSubmitInfo *s, VkFence f)
{
    lt_device *dev = lt_device_from(queue);
    lt_submit sub = {n, s, NULL, f};
    lt_capture_submit(dev, queue, &sub);
    VkResult res = dev->t.QueueSubmit(queue, n, s, f);
    if (res == VK_ERROR_DEVICE_LOST)
        lt_capture_device_lost(dev, "vkQueueSubmit");
    return res;
}

LT_HOOK(VkResult, QueueSubmit2, VkQueue queue, uint32_t n, const VkSubmitInfo2 *s, VkFence f)
{
    lt_device *dev = lt_device_from(queue);
    lt_submit sub = {n, NULL, s, f};
    lt_capture_submit(dev, queue, &sub);
    VkResult res = dev->t.QueueSubmit2(queue, n, s, f);
    if (res == VK_ERROR_DEVICE_LOST)
        lt_capture_device_lost(dev, "vkQueueSubmit2");
    return res;
}

LT_HOOK(VkResult, QueueSubmit2KHR, VkQueue queue, uint32_t n, const VkSubmitInfo2 *s, VkFence f)
{
    lt_device *dev = lt_device_from(queue);
    lt_submit sub = {n, NULL, s, f};
    lt_capture_submit(dev, queue, &sub);
    VkResult res = dev->t.QueueSubmit2KHR(queue, n, s, f);
    if (res == VK_ERROR_DEVICE_LOST)
        lt_capture_device_lost(dev, "vkQueueSubmit2KHR");
    return res;
}

/* Memory bound to a sparse resource the device may write: its range is
 * diffed at every capture from now on (device_ranges in capture.c), or the
 * device's writes there would be lost from the trace, and in shadow mode
 * never reach the application's copy. dev->lock held. */
static void sparse_bound(lt_device *dev, uint64_t resource, const VkSparseMemoryBind *bind)
{
    const lt_object *o = lt_map_get(&dev->objects, resource);
    lt_memory *m = bind->memory ? lt_map_get(&dev->memories, (uint64_t)bind->memory) : NULL;
    if (m && (!o || o->gpu_writable)) /* an object not known: writable, to be safe */
        lt_memory_note_sparse(m, bind->memoryOffset, bind->size);
}

/* Records where sparse resources the device may write are bound. Binds
 * that later unbind a range leave it marked (a diff more, never a write
 * less). An image's per-block binds name a region, not a byte count: the
 * memory from their offset on is marked. The bindings take effect on the
 * queue later; marking them now only diffs earlier. */
static void note_sparse(lt_device *dev, uint32_t n, const VkBindSparseInfo *b)
{
    pthread_mutex_lock(&dev->lock);
    for (uint32_t i = 0; i < n; i++) {
        for (uint32_t j = 0; j < b[i].bufferBindCount; j++) {
            const VkSparseBufferMemoryBindInfo *bb = &b[i].pBufferBinds[j];
            for (uint32_t k = 0; k < bb->bindCount; k++)
                sparse_bound(dev, (uint64_t)bb->buffer, &bb->pBinds[k]);
        }
        for (uint32_t j = 0; j < b[i].imageOpaqueBindCount; j++) {
            const VkSparseImageOpaqueMemoryBindInfo *ib = &b[i].pImageOpaqueBinds[j];
            for (uint32_t k = 0; k < ib->bindCount; k++)
                sparse_bound(dev, (uint64_t)ib->image, &ib->pBinds[k]);
        }
        for (uint32_t j = 0; j < b[i].imageBindCount; j++) {
            const VkSparseImageMemoryBindInfo *ib = &b[i].pImageBinds[j];
            for (uint32_t k = 0; k < ib->bindCount; k++) {
                const VkSparseImageMemoryBind *p = &ib->pBinds[k];
                VkSparseMemoryBind whole = {.size = VK_WHOLE_SIZE, .memory = p->memory,
                                            .memoryOffset = p->memoryOffset};
                sparse_bound(dev, (uint64_t)ib->image, &whole);
            }
        }
    }
    pthread_mutex_unlock(&dev->lock);
}

LT_HOOK(VkResult, QueueBindSparse, VkQueue queue, uint32_t n, const VkBindSparseInfo *b, VkFence f)
{
    lt_device *dev = lt_device_from(queue);
    if (dev->capture) {
        note_sparse(dev, n, b);
        lt_rec_note(0, "sparse", "vkQueueBindSparse called: memory bound to sparse resources is "
                                 "captured, unattributed to them, and diffed at every submit if "
                                 "the device may write them");
    }
    return dev->t.QueueBindSparse(queue, n, b, f);
}

LT_HOOK(VkResult, QueuePresentKHR, VkQueue queue, const VkPresentInfoKHR *info)
{
    lt_device *dev = lt_device_from(queue);
    VkResult res = dev->t.QueuePresentKHR(queue, info);
    if (res == VK_ERROR_DEVICE_LOST)
        lt_capture_device_lost(dev, "vkQueuePresentKHR");
    lt_capture_present(dev);
    return res;
}
