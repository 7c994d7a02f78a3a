/* Device-writable usages (usage.h). A device write raises no fault, so the
 * capture diffs the ranges of device-writable objects at every submit: an
 * object taken for read-only here loses what the device writes into it
 * from the trace, and in shadow mode the application's own copy never gets
 * it (the application reads stale bytes). So when in doubt: writable. */
#include <stdint.h>

#include "chain.h"
#include "usage.h"

/* Debian 12's headers (1.3.239) predate VK_KHR_maintenance5. */
#define LT_STRUCTURE_TYPE_BUFFER_USAGE_FLAGS_2_CREATE_INFO ((VkStructureType)1000470006)

typedef struct lt_buffer_usage_flags2_info {
    VkStructureType sType;
    const void *pNext;
    uint64_t usage; /* VkBufferUsageFlags2: the legacy bits keep their values */
} lt_buffer_usage_flags2_info;

#define BUFFER_READ_ONLY                                                                           \
    ((uint64_t)(VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_UNIFORM_TEXEL_BUFFER_BIT |       \
                VK_BUFFER_USAGE_UNIFORM_BUFFER_BIT | VK_BUFFER_USAGE_INDEX_BUFFER_BIT |             \
                VK_BUFFER_USAGE_VERTEX_BUFFER_BIT | VK_BUFFER_USAGE_INDIRECT_BUFFER_BIT))
#define IMAGE_READ_ONLY                                                                            \
    ((VkImageUsageFlags)(VK_IMAGE_USAGE_TRANSFER_SRC_BIT | VK_IMAGE_USAGE_SAMPLED_BIT |            \
                         VK_IMAGE_USAGE_INPUT_ATTACHMENT_BIT))

int lt_buffer_gpu_writable(const VkBufferCreateInfo *ci)
{
    uint64_t usage = ci->usage;
    const VkBaseInStructure *f2 = lt_chain_find(ci->pNext, LT_STRUCTURE_TYPE_BUFFER_USAGE_FLAGS_2_CREATE_INFO);
    if (f2)
        usage = ((const lt_buffer_usage_flags2_info *)(const void *)f2)->usage;
    return (usage & ~BUFFER_READ_ONLY) != 0;
}

int lt_image_gpu_writable(const VkImageCreateInfo *ci)
{
    VkImageUsageFlags usage = ci->usage;
    const VkBaseInStructure *st = lt_chain_find(ci->pNext, VK_STRUCTURE_TYPE_IMAGE_STENCIL_USAGE_CREATE_INFO);
    if (st)
        usage |= ((const VkImageStencilUsageCreateInfo *)(const void *)st)->stencilUsage;
    return (usage & ~IMAGE_READ_ONLY) != 0;
}
