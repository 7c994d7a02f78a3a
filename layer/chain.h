/* Vulkan pNext chains: finding an extending structure by its type. */
#ifndef MT_LAYER_CHAIN_H
#define MT_LAYER_CHAIN_H

#include <vulkan/vulkan.h>

/* The first structure of type t in the chain starting at next, or NULL. */
static inline const VkBaseInStructure *lt_chain_find(const void *next, VkStructureType t)
{
    for (const VkBaseInStructure *s = next; s; s = s->pNext)
        if (s->sType == t)
            return s;
    return NULL;
}

#endif
