/* Host/device synchronisation: the points where shadow mode must move data.
 *
 * The host observes device progress (vkQueueWaitIdle, vkDeviceWaitIdle,
 * vkWaitForFences, vkGetFenceStatus, vkWaitSemaphores, a timeline counter
 * value read with vkGetSemaphoreCounterValue, an event found set by
 * vkGetEventStatus): whatever the device wrote must be in the app's shadow
 * mapping before the call returns (sync-in). The host releases device work
 * (vkSetEvent, vkSignalSemaphore): whatever the app wrote into its shadow
 * mapping must be in the driver's memory before the device can run on
 * (write-back). Other modes hand the app the driver's own mapping, so these
 * hooks cost them one lock, which also notes what work the host now knows
 * complete (inflight.c). A call that reports the device lost is one more
 * sync-in: the device writes nothing after, and an application may read
 * what it got to (the markers a crash handler reads). */
#define _GNU_SOURCE
#include "layer.h"

/* MEMTRACK_TEST_LOSE_DEVICE: the k-th vkWaitForFences of the process
 * reports a loss after its real wait. */
static int test_lose(void)
{
    static _Atomic uint64_t waits;
    return lt_test_kth(&waits, lt_cfg()->test_lose);
}

/* What a call's result tells: a success is a sync point (`seen`), a loss
 * the last one. */
static VkResult outcome(lt_device *dev, VkResult res, const lt_seen *seen, const char *call)
{
    if (res == VK_SUCCESS)
        lt_capture_after_wait(dev, seen);
    else if (res == VK_ERROR_DEVICE_LOST)
        lt_capture_device_lost(dev, call);
    return res;
}

LT_HOOK(VkResult, QueueWaitIdle, VkQueue queue)
{
    lt_device *dev = lt_device_from(queue);
    VkResult res = dev->t.QueueWaitIdle(queue);
    return outcome(dev, res, &(lt_seen){.kind = LT_SEEN_QUEUE_IDLE, .queue = queue}, "vkQueueWaitIdle");
}

LT_HOOK(VkResult, DeviceWaitIdle, VkDevice device)
{
    lt_device *dev = lt_device_from(device);
    VkResult res = dev->t.DeviceWaitIdle(device);
    return outcome(dev, res, &(lt_seen){.kind = LT_SEEN_DEVICE_IDLE}, "vkDeviceWaitIdle");
}

LT_HOOK(VkResult, WaitForFences, VkDevice device, uint32_t n, const VkFence *f, VkBool32 all,
        uint64_t timeout)
{
    lt_device *dev = lt_device_from(device);
    VkResult res = dev->t.WaitForFences(device, n, f, all, timeout);
    if (res == VK_SUCCESS && dev->capture && test_lose())
        res = VK_ERROR_DEVICE_LOST;
    return outcome(dev, res, &(lt_seen){.kind = LT_SEEN_FENCES, .n = n, .fences = f, .all = all},
                   "vkWaitForFences");
}

LT_HOOK(VkResult, GetFenceStatus, VkDevice device, VkFence f)
{
    lt_device *dev = lt_device_from(device);
    VkResult res = dev->t.GetFenceStatus(device, f);
    return outcome(dev, res, &(lt_seen){.kind = LT_SEEN_FENCES, .n = 1, .fences = &f, .all = 1},
                   "vkGetFenceStatus");
}

LT_HOOK(VkResult, WaitSemaphores, VkDevice device, const VkSemaphoreWaitInfo *w, uint64_t t)
{
    lt_device *dev = lt_device_from(device);
    VkResult res = dev->t.WaitSemaphores(device, w, t);
    return outcome(dev, res, &(lt_seen){.kind = LT_SEEN_SEMAPHORES, .wait = w}, "vkWaitSemaphores");
}

LT_HOOK(VkResult, WaitSemaphoresKHR, VkDevice device, const VkSemaphoreWaitInfo *w, uint64_t t)
{
    lt_device *dev = lt_device_from(device);
    VkResult res = dev->t.WaitSemaphoresKHR(device, w, t);
    return outcome(dev, res, &(lt_seen){.kind = LT_SEEN_SEMAPHORES, .wait = w}, "vkWaitSemaphoresKHR");
}

/* Polling a timeline's counter is a wait that returns at once: the value it
 * reads may be one the device signalled after writing memory. */
LT_HOOK(VkResult, GetSemaphoreCounterValue, VkDevice device, VkSemaphore s, uint64_t *v)
{
    lt_device *dev = lt_device_from(device);
    VkResult res = dev->t.GetSemaphoreCounterValue(device, s, v);
    if (res == VK_ERROR_DEVICE_LOST)
        lt_capture_device_lost(dev, "vkGetSemaphoreCounterValue");
    else if (res == VK_SUCCESS)
        lt_capture_after_wait(dev, &(lt_seen){.kind = LT_SEEN_COUNTER, .sem = s, .value = *v});
    return res;
}

LT_HOOK(VkResult, GetSemaphoreCounterValueKHR, VkDevice device, VkSemaphore s, uint64_t *v)
{
    lt_device *dev = lt_device_from(device);
    VkResult res = dev->t.GetSemaphoreCounterValueKHR(device, s, v);
    if (res == VK_ERROR_DEVICE_LOST)
        lt_capture_device_lost(dev, "vkGetSemaphoreCounterValueKHR");
    else if (res == VK_SUCCESS)
        lt_capture_after_wait(dev, &(lt_seen){.kind = LT_SEEN_COUNTER, .sem = s, .value = *v});
    return res;
}

LT_HOOK(VkResult, SignalSemaphore, VkDevice device, const VkSemaphoreSignalInfo *info)
{
    lt_device *dev = lt_device_from(device);
    lt_capture_host_release(dev);
    return dev->t.SignalSemaphore(device, info);
}

LT_HOOK(VkResult, SignalSemaphoreKHR, VkDevice device, const VkSemaphoreSignalInfo *info)
{
    lt_device *dev = lt_device_from(device);
    lt_capture_host_release(dev);
    return dev->t.SignalSemaphoreKHR(device, info);
}

LT_HOOK(VkResult, SetEvent, VkDevice device, VkEvent event)
{
    lt_device *dev = lt_device_from(device);
    lt_capture_host_release(dev);
    return dev->t.SetEvent(device, event);
}

LT_HOOK(VkResult, GetEventStatus, VkDevice device, VkEvent event)
{
    lt_device *dev = lt_device_from(device);
    VkResult res = dev->t.GetEventStatus(device, event);
    if (res == VK_EVENT_SET)
        lt_capture_after_wait(dev, &(lt_seen){.kind = LT_SEEN_EVENT});
    else if (res == VK_ERROR_DEVICE_LOST)
        lt_capture_device_lost(dev, "vkGetEventStatus");
    return res;
}
