/* Host image copies (VK_EXT_host_image_copy, core in Vulkan 1.4): the driver
 * copies between host memory and an image's memory on the host, at once,
 * with no submit and no wait around it. The image's memory may be mapped
 * (a linear image the application also reads or writes through its
 * mapping), so in shadow mode these calls are sync points both ways: the
 * application's writes reach the driver's memory before the driver reads
 * it (write-back), and what the driver wrote reaches the application's
 * copy before the call returns (sync-in). Every image such a call names has
 * VK_IMAGE_USAGE_HOST_TRANSFER_BIT, which usage.c counts as writable, so
 * its range is diffed at every capture in any mode: the trace gets those
 * bytes too. Other modes hand the application the driver's mapping and pay
 * one lock. */
#define _GNU_SOURCE
#include "layer.h"

/* Shadow memories: the driver reads what the application wrote (before
 * the call), the application reads what the driver wrote (after it). */
static VkResult after(lt_device *dev, VkResult res)
{
    lt_capture_after_wait(dev, &(lt_seen){.kind = LT_SEEN_HOST_COPY});
    return res;
}

#define COPY_HOOK(name)                                                                            \
    LT_HOOK(VkResult, name, VkDevice device, const void *info)                                     \
    {                                                                                              \
        lt_device *dev = lt_device_from(device);                                                   \
        lt_capture_host_release(dev);                                                              \
        return after(dev, dev->t.name(device, info));                                              \
    }
COPY_HOOK(CopyMemoryToImage)
COPY_HOOK(CopyMemoryToImageEXT)
COPY_HOOK(CopyImageToMemory)
COPY_HOOK(CopyImageToMemoryEXT)
COPY_HOOK(CopyImageToImage)
COPY_HOOK(CopyImageToImageEXT)
#undef COPY_HOOK

/* A layout transition on the host may rewrite the image's memory (a
 * compressed layout to a plain one). */
#define TRANSITION_HOOK(name)                                                                      \
    LT_HOOK(VkResult, name, VkDevice device, uint32_t n, const void *infos)                        \
    {                                                                                              \
        lt_device *dev = lt_device_from(device);                                                   \
        lt_capture_host_release(dev);                                                              \
        return after(dev, dev->t.name(device, n, infos));                                          \
    }
TRANSITION_HOOK(TransitionImageLayout)
TRANSITION_HOOK(TransitionImageLayoutEXT)
#undef TRANSITION_HOOK
