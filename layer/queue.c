/* Queue hooks: every submit path captures before the work reaches the
 * driver; present marks a frame; sparse binding is reported as unsupported;
 * waits let shadow mode copy what the device wrote back to the app. */
#define _GNU_SOURCE
#include <stdint.h>

#include "layer.h"

static void note_queue(lt_device *dev, VkQueue q, uint32_t family, uint32_t index)
{
    if (!q)
        return;
    /* Stable across runs: family and index, not the handle. +1: 0 is "none". */
    uintptr_t id = ((uintptr_t)family << 16 | index) + 1;
    pthread_mutex_lock(&dev->lock);
    lt_map_put(&dev->queues, (uint64_t)(uintptr_t)q, (void *)id);
    pthread_mutex_unlock(&dev->lock);
}

VKAPI_ATTR void VKAPI_CALL lt_GetDeviceQueue(VkDevice device, uint32_t family, uint32_t index, VkQueue *q)
{
    lt_device *dev = lt_device_from(device);
    dev->t.GetDeviceQueue(device, family, index, q);
    note_queue(dev, *q, family, index);
}

VKAPI_ATTR void VKAPI_CALL lt_GetDeviceQueue2(VkDevice device, const VkDeviceQueueInfo2 *info, VkQueue *q)
{
    lt_device *dev = lt_device_from(device);
    dev->t.GetDeviceQueue2(device, info, q);
    note_queue(dev, *q, info->queueFamilyIndex, info->queueIndex);
}

VKAPI_ATTR VkResult VKAPI_CALL lt_QueueSubmit(VkQueue queue, uint32_t n, const VkSubmitInfo *s, VkFence f)
{
    lt_device *dev = lt_device_from(queue);
    lt_capture_submit(dev, queue);
    return dev->t.QueueSubmit(queue, n, s, f);
}

VKAPI_ATTR VkResult VKAPI_CALL lt_QueueSubmit2(VkQueue queue, uint32_t n, const VkSubmitInfo2 *s, VkFence f)
{
    lt_device *dev = lt_device_from(queue);
    lt_capture_submit(dev, queue);
    return dev->t.QueueSubmit2(queue, n, s, f);
}

VKAPI_ATTR VkResult VKAPI_CALL lt_QueueSubmit2KHR(VkQueue queue, uint32_t n, const VkSubmitInfo2 *s, VkFence f)
{
    lt_device *dev = lt_device_from(queue);
    lt_capture_submit(dev, queue);
    return dev->t.QueueSubmit2KHR(queue, n, s, f);
}

VKAPI_ATTR VkResult VKAPI_CALL lt_QueueBindSparse(VkQueue queue, uint32_t n, const VkBindSparseInfo *b, VkFence f)
{
    lt_device *dev = lt_device_from(queue);
    lt_warn_once("sparse", "vkQueueBindSparse is not supported: sparse bindings are not captured "
                           "(noted in the trace)");
    pthread_mutex_lock(&dev->lock);
    if (lt_tracing())
        lt_trace_check(mt_trace_write_annotation(
            lt_ctx.trace, 0, "unsupported: vkQueueBindSparse called; sparse bindings not captured"));
    pthread_mutex_unlock(&dev->lock);
    return dev->t.QueueBindSparse(queue, n, b, f);
}

VKAPI_ATTR VkResult VKAPI_CALL lt_QueuePresentKHR(VkQueue queue, const VkPresentInfoKHR *info)
{
    lt_device *dev = lt_device_from(queue);
    VkResult res = dev->t.QueuePresentKHR(queue, info);
    pthread_mutex_lock(&dev->lock);
    if (lt_tracing())
        lt_trace_check(mt_trace_write_frame(lt_ctx.trace, NULL));
    lt_ctx.st.frames++;
    pthread_mutex_unlock(&dev->lock);
    return res;
}

VKAPI_ATTR VkResult VKAPI_CALL lt_QueueWaitIdle(VkQueue queue)
{
    lt_device *dev = lt_device_from(queue);
    VkResult res = dev->t.QueueWaitIdle(queue);
    if (res == VK_SUCCESS)
        lt_capture_after_wait(dev);
    return res;
}

VKAPI_ATTR VkResult VKAPI_CALL lt_DeviceWaitIdle(VkDevice device)
{
    lt_device *dev = lt_device_from(device);
    VkResult res = dev->t.DeviceWaitIdle(device);
    if (res == VK_SUCCESS)
        lt_capture_after_wait(dev);
    return res;
}

VKAPI_ATTR VkResult VKAPI_CALL lt_WaitForFences(VkDevice device, uint32_t n, const VkFence *f,
                                                VkBool32 all, uint64_t timeout)
{
    lt_device *dev = lt_device_from(device);
    VkResult res = dev->t.WaitForFences(device, n, f, all, timeout);
    if (res == VK_SUCCESS)
        lt_capture_after_wait(dev);
    return res;
}

VKAPI_ATTR VkResult VKAPI_CALL lt_GetFenceStatus(VkDevice device, VkFence f)
{
    lt_device *dev = lt_device_from(device);
    VkResult res = dev->t.GetFenceStatus(device, f);
    if (res == VK_SUCCESS)
        lt_capture_after_wait(dev);
    return res;
}

VKAPI_ATTR VkResult VKAPI_CALL lt_WaitSemaphores(VkDevice device, const VkSemaphoreWaitInfo *w, uint64_t t)
{
    lt_device *dev = lt_device_from(device);
    VkResult res = dev->t.WaitSemaphores(device, w, t);
    if (res == VK_SUCCESS)
        lt_capture_after_wait(dev);
    return res;
}

VKAPI_ATTR VkResult VKAPI_CALL lt_WaitSemaphoresKHR(VkDevice device, const VkSemaphoreWaitInfo *w, uint64_t t)
{
    lt_device *dev = lt_device_from(device);
    VkResult res = dev->t.WaitSemaphoresKHR(device, w, t);
    if (res == VK_SUCCESS)
        lt_capture_after_wait(dev);
    return res;
}
