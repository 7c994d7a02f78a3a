/* Queue hooks: every submit path captures before the work reaches the
 * driver; present marks a frame; sparse binding is reported as not
 * captured. */
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
    return dev->t.QueueSubmit(queue, n, s, f);
}

LT_HOOK(VkResult, QueueSubmit2, VkQueue queue, uint32_t n, const VkSubmitInfo2 *s, VkFence f)
{
    lt_device *dev = lt_device_from(queue);
    lt_submit sub = {n, NULL, s, f};
    lt_capture_submit(dev, queue, &sub);
    return dev->t.QueueSubmit2(queue, n, s, f);
}

LT_HOOK(VkResult, QueueSubmit2KHR, VkQueue queue, uint32_t n, const VkSubmitInfo2 *s, VkFence f)
{
    lt_device *dev = lt_device_from(queue);
    lt_submit sub = {n, NULL, s, f};
    lt_capture_submit(dev, queue, &sub);
    return dev->t.QueueSubmit2KHR(queue, n, s, f);
}

LT_HOOK(VkResult, QueueBindSparse, VkQueue queue, uint32_t n, const VkBindSparseInfo *b, VkFence f)
{
    lt_device *dev = lt_device_from(queue);
    if (dev->capture)
        lt_rec_note(0, "sparse", "vkQueueBindSparse called: sparse bindings are not captured");
    return dev->t.QueueBindSparse(queue, n, b, f);
}

LT_HOOK(VkResult, QueuePresentKHR, VkQueue queue, const VkPresentInfoKHR *info)
{
    lt_device *dev = lt_device_from(queue);
    VkResult res = dev->t.QueuePresentKHR(queue, info);
    lt_capture_present(dev);
    return res;
}
