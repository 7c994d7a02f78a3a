/* Fences and semaphores whose payloads leave Vulkan. A fence or semaphore
 * exported as a file descriptor (vkGetFenceFdKHR, vkGetSemaphoreFdKHR, or
 * created exportable, which is how an application says it will) lets the
 * application learn of device progress outside Vulkan: it polls a sync
 * file, or another API waits on it, and then reads mapped memory the device
 * wrote. Shadow mode copies what the device wrote into the application's
 * copy at Vulkan's waits only (sync.c), so such a read would see stale
 * bytes. From the first sign of it, memories the device maps from then on
 * are tracked in place (guard) instead of shadow (capture.c's
 * initial_mode), and the trace says so; memories already in shadow mode
 * stay so (the application holds their pointers), which the trace says
 * too. */
#define _GNU_SOURCE
#include "chain.h"
#include "layer.h"

static void exported(lt_device *dev, const char *how)
{
    if (!dev->capture || __atomic_exchange_n(&dev->progress_exported, 1, __ATOMIC_RELAXED))
        return;
    if (lt_cfg()->mode != LT_SHADOW)
        return; /* only shadow mode has the gap */
    lt_rec_note(0, "progress-exported", "the application exports device progress (%s): shadow mode "
                "cannot follow what it learns that way, so memories mapped from now on are tracked "
                "in place (guard) instead", how);
    int live = __atomic_load_n(&dev->shadow_mapped, __ATOMIC_RELAXED);
    if (live)
        lt_rec_note(0, "progress-exported-live", "%d memories already mapped stay in shadow mode: "
                    "what the device writes there reaches the application at Vulkan's waits only",
                    live);
}

LT_HOOK(VkResult, CreateFence, VkDevice device, const VkFenceCreateInfo *ci,
        const VkAllocationCallbacks *alloc, VkFence *out)
{
    lt_device *dev = lt_device_from(device);
    VkResult res = dev->t.CreateFence(device, ci, alloc, out);
    const VkBaseInStructure *e = lt_chain_find(ci->pNext, VK_STRUCTURE_TYPE_EXPORT_FENCE_CREATE_INFO);
    if (res == VK_SUCCESS && e && ((const VkExportFenceCreateInfo *)(const void *)e)->handleTypes)
        exported(dev, "an exportable fence");
    return res;
}

LT_HOOK(VkResult, CreateSemaphore, VkDevice device, const VkSemaphoreCreateInfo *ci,
        const VkAllocationCallbacks *alloc, VkSemaphore *out)
{
    lt_device *dev = lt_device_from(device);
    VkResult res = dev->t.CreateSemaphore(device, ci, alloc, out);
    const VkBaseInStructure *e = lt_chain_find(ci->pNext, VK_STRUCTURE_TYPE_EXPORT_SEMAPHORE_CREATE_INFO);
    if (res == VK_SUCCESS && e && ((const VkExportSemaphoreCreateInfo *)(const void *)e)->handleTypes)
        exported(dev, "an exportable semaphore");
    return res;
}

LT_HOOK(VkResult, GetFenceFdKHR, VkDevice device, const VkFenceGetFdInfoKHR *info, int *fd)
{
    lt_device *dev = lt_device_from(device);
    exported(dev, "vkGetFenceFdKHR"); /* before: the descriptor is the application's at once */
    return dev->t.GetFenceFdKHR(device, info, fd);
}

LT_HOOK(VkResult, GetSemaphoreFdKHR, VkDevice device, const VkSemaphoreGetFdInfoKHR *info, int *fd)
{
    lt_device *dev = lt_device_from(device);
    exported(dev, "vkGetSemaphoreFdKHR");
    return dev->t.GetSemaphoreFdKHR(device, info, fd);
}
