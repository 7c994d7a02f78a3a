/* Whether the device may write a buffer's or an image's memory, from its
 * creation info alone (no Vulkan calls: unit-tested without a device). */
#ifndef MT_LAYER_USAGE_H
#define MT_LAYER_USAGE_H

#include <vulkan/vulkan.h>

/* 1 when some usage of the buffer lets the device write it: anything but
 * transfer source, uniform (texel), index, vertex and indirect. The usage
 * of a VkBufferUsageFlags2CreateInfo in the chain (VK_KHR_maintenance5,
 * Vulkan 1.4) replaces ci->usage, which the driver then ignores. */
int lt_buffer_gpu_writable(const VkBufferCreateInfo *ci);

/* 1 when some usage of the image lets the device write it: anything but
 * transfer source, sampled and input attachment, for the depth aspect
 * (ci->usage) or the stencil aspect (a VkImageStencilUsageCreateInfo in
 * the chain, Vulkan 1.2). */
int lt_image_gpu_writable(const VkImageCreateInfo *ci);

#endif
