/* Loader interface: negotiation, vkCreateInstance/vkCreateDevice chaining,
 * per-instance and per-device dispatch, and proc-addr lookup.
 *
 * Dispatchable handles (instance, physical device, device, queue, command
 * buffer) start with the loader's dispatch pointer, which is the same for a
 * device and its queues and command buffers: it is the key of our tables. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layer.h"

#define LT_EXPORT __attribute__((visibility("default")))

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static lt_instance *g_instances[64];
static lt_device *g_devices[64];

static void *key_of(const void *handle) { return *(void *const *)handle; }

static lt_instance *instance_from(const void *handle)
{
    void *k = key_of(handle);
    lt_instance *r = NULL;
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < 64 && !r; i++)
        if (g_instances[i] && g_instances[i]->key == k)
            r = g_instances[i];
    pthread_mutex_unlock(&g_lock);
    return r;
}

lt_device *lt_device_from(const void *handle)
{
    void *k = key_of(handle);
    lt_device *r = NULL;
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < 64 && !r; i++)
        if (g_devices[i] && g_devices[i]->key == k)
            r = g_devices[i];
    pthread_mutex_unlock(&g_lock);
    return r;
}

void lt_devices_lock(int lock)
{
    /* Registration order is fixed while g_lock is held, so every caller
     * takes the device locks in the same order. */
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < 64; i++)
        if (g_devices[i]) {
            if (lock)
                pthread_mutex_lock(&g_devices[i]->lock);
            else
                pthread_mutex_unlock(&g_devices[i]->lock);
        }
    pthread_mutex_unlock(&g_lock);
}

static int register_ptr(void **table, void *p)
{
    pthread_mutex_lock(&g_lock);
    int ok = 0;
    for (int i = 0; i < 64 && !ok; i++)
        if (!table[i])
            table[i] = p, ok = 1;
    pthread_mutex_unlock(&g_lock);
    return ok;
}

static void unregister_ptr(void **table, void *p)
{
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < 64; i++)
        if (table[i] == p)
            table[i] = NULL;
    pthread_mutex_unlock(&g_lock);
}

/* ---- instance ---------------------------------------------------------------- */

static VkLayerInstanceCreateInfo *instance_link_info(const VkInstanceCreateInfo *ci)
{
    VkLayerInstanceCreateInfo *p = (VkLayerInstanceCreateInfo *)ci->pNext;
    while (p && !(p->sType == VK_STRUCTURE_TYPE_LOADER_INSTANCE_CREATE_INFO &&
                  p->function == VK_LAYER_LINK_INFO))
        p = (VkLayerInstanceCreateInfo *)p->pNext;
    return p;
}

static VKAPI_ATTR VkResult VKAPI_CALL lt_CreateInstance(const VkInstanceCreateInfo *ci,
                                                        const VkAllocationCallbacks *alloc,
                                                        VkInstance *out)
{
    VkLayerInstanceCreateInfo *link = instance_link_info(ci);
    if (!link)
        return VK_ERROR_INITIALIZATION_FAILED;
    PFN_vkGetInstanceProcAddr next_gipa = link->u.pLayerInfo->pfnNextGetInstanceProcAddr;
    link->u.pLayerInfo = link->u.pLayerInfo->pNext; /* for the next layer down */
    PFN_vkCreateInstance create = (PFN_vkCreateInstance)next_gipa(NULL, "vkCreateInstance");
    if (!create)
        return VK_ERROR_INITIALIZATION_FAILED;
    VkResult res = create(ci, alloc, out);
    if (res != VK_SUCCESS)
        return res;

    lt_config_load();
    lt_instance *inst = calloc(1, sizeof *inst);
    if (!inst) {
        lt_warn_once("oom-instance", "out of memory: this instance is not captured");
        return res;
    }
    inst->handle = *out;
    inst->key = key_of(*out);
    inst->next_gipa = next_gipa;
#define IGET(name) inst->name = (PFN_vk##name)next_gipa(*out, "vk" #name)
    IGET(DestroyInstance);
    IGET(CreateDevice);
    IGET(GetPhysicalDeviceMemoryProperties);
    IGET(GetPhysicalDeviceProperties);
#undef IGET
    if (ci->pApplicationInfo) {
        const VkApplicationInfo *a = ci->pApplicationInfo;
        if (a->pApplicationName)
            snprintf(inst->app_name, sizeof inst->app_name, "%s", a->pApplicationName);
        if (a->pEngineName)
            snprintf(inst->engine_name, sizeof inst->engine_name, "%s", a->pEngineName);
        inst->api_version = a->apiVersion;
    }
    if (!register_ptr((void **)g_instances, inst)) {
        free(inst);
        lt_warn_once("too-many-instances", "more than 64 instances: extra ones are not captured");
        return res;
    }
    pthread_mutex_lock(&lt_ctx.lock);
    lt_ctx.ninstances++;
    pthread_mutex_unlock(&lt_ctx.lock);
    return res;
}

static VKAPI_ATTR void VKAPI_CALL lt_DestroyInstance(VkInstance instance,
                                                     const VkAllocationCallbacks *alloc)
{
    lt_instance *inst = instance ? instance_from(instance) : NULL;
    if (!inst)
        return;
    PFN_vkDestroyInstance destroy = inst->DestroyInstance;
    unregister_ptr((void **)g_instances, inst);
    free(inst);
    destroy(instance, alloc);
    pthread_mutex_lock(&lt_ctx.lock);
    int last = --lt_ctx.ninstances == 0;
    pthread_mutex_unlock(&lt_ctx.lock);
    if (last)
        lt_trace_close();
}

/* ---- device ---------------------------------------------------------------- */

static VkLayerDeviceCreateInfo *device_link_info(const VkDeviceCreateInfo *ci)
{
    VkLayerDeviceCreateInfo *p = (VkLayerDeviceCreateInfo *)ci->pNext;
    while (p && !(p->sType == VK_STRUCTURE_TYPE_LOADER_DEVICE_CREATE_INFO &&
                  p->function == VK_LAYER_LINK_INFO))
        p = (VkLayerDeviceCreateInfo *)p->pNext;
    return p;
}

static void fill_device_table(lt_device_table *t, VkDevice d, PFN_vkGetDeviceProcAddr gdpa)
{
    t->GetDeviceProcAddr = gdpa;
#define DGET(name) t->name = (PFN_vk##name)gdpa(d, "vk" #name)
    DGET(DestroyDevice);
    DGET(GetDeviceQueue);
    DGET(GetDeviceQueue2);
    DGET(AllocateMemory);
    DGET(FreeMemory);
    DGET(MapMemory);
    DGET(UnmapMemory);
    DGET(MapMemory2KHR);
    DGET(UnmapMemory2KHR);
    DGET(FlushMappedMemoryRanges);
    DGET(InvalidateMappedMemoryRanges);
    DGET(CreateBuffer);
    DGET(DestroyBuffer);
    DGET(CreateImage);
    DGET(DestroyImage);
    DGET(GetBufferMemoryRequirements);
    DGET(GetImageMemoryRequirements);
    DGET(BindBufferMemory);
    DGET(BindImageMemory);
    DGET(BindBufferMemory2);
    DGET(BindBufferMemory2KHR);
    DGET(BindImageMemory2);
    DGET(BindImageMemory2KHR);
    DGET(QueueSubmit);
    DGET(QueueSubmit2);
    DGET(QueueSubmit2KHR);
    DGET(QueueBindSparse);
    DGET(QueuePresentKHR);
    DGET(QueueWaitIdle);
    DGET(DeviceWaitIdle);
    DGET(WaitForFences);
    DGET(GetFenceStatus);
    DGET(WaitSemaphores);
    DGET(WaitSemaphoresKHR);
#undef DGET
}

static VKAPI_ATTR VkResult VKAPI_CALL lt_CreateDevice(VkPhysicalDevice phys,
                                                      const VkDeviceCreateInfo *ci,
                                                      const VkAllocationCallbacks *alloc,
                                                      VkDevice *out)
{
    lt_instance *inst = instance_from(phys);
    VkLayerDeviceCreateInfo *link = device_link_info(ci);
    if (!link)
        return VK_ERROR_INITIALIZATION_FAILED;
    PFN_vkGetInstanceProcAddr next_gipa = link->u.pLayerInfo->pfnNextGetInstanceProcAddr;
    PFN_vkGetDeviceProcAddr next_gdpa = link->u.pLayerInfo->pfnNextGetDeviceProcAddr;
    link->u.pLayerInfo = link->u.pLayerInfo->pNext;
    PFN_vkCreateDevice create =
        (PFN_vkCreateDevice)next_gipa(inst ? inst->handle : VK_NULL_HANDLE, "vkCreateDevice");
    if (!create)
        return VK_ERROR_INITIALIZATION_FAILED;
    VkResult res = create(phys, ci, alloc, out);
    if (res != VK_SUCCESS || !inst)
        return res;

    lt_device *dev = calloc(1, sizeof *dev);
    if (!dev) {
        lt_warn_once("oom-device", "out of memory: this device is not captured");
        return res;
    }
    dev->handle = *out;
    dev->key = key_of(*out);
    dev->inst = inst;
    dev->phys = phys;
    pthread_mutex_init(&dev->lock, NULL);
    fill_device_table(&dev->t, *out, next_gdpa);
    inst->GetPhysicalDeviceMemoryProperties(phys, &dev->memprops);
    lt_trace_open(inst, phys);
    if (!register_ptr((void **)g_devices, dev)) {
        free(dev);
        lt_warn_once("too-many-devices", "more than 64 devices: extra ones are not captured");
    }
    return res;
}

static VKAPI_ATTR void VKAPI_CALL lt_DestroyDevice(VkDevice device, const VkAllocationCallbacks *alloc)
{
    lt_device *dev = device ? lt_device_from(device) : NULL;
    if (!dev)
        return;
    unregister_ptr((void **)g_devices, dev);
    pthread_mutex_lock(&dev->lock);
    lt_memory_destroy_all(dev);
    pthread_mutex_unlock(&dev->lock);
    PFN_vkDestroyDevice destroy = dev->t.DestroyDevice;
    lt_map_free(&dev->memories);
    lt_map_free(&dev->objects);
    lt_map_free(&dev->queues);
    pthread_mutex_destroy(&dev->lock);
    free(dev);
    destroy(device, alloc);
}

/* ---- proc addr -------------------------------------------------------------- */

typedef struct hook {
    const char *name;
    PFN_vkVoidFunction fn;
} hook;

#define H(name) {"vk" #name, (PFN_vkVoidFunction)lt_##name}
static const hook g_device_hooks[] = {
    H(DestroyDevice),
    H(GetDeviceQueue),
    H(GetDeviceQueue2),
    H(AllocateMemory),
    H(FreeMemory),
    H(MapMemory),
    H(UnmapMemory),
    H(MapMemory2KHR),
    H(UnmapMemory2KHR),
    H(FlushMappedMemoryRanges),
    H(InvalidateMappedMemoryRanges),
    H(CreateBuffer),
    H(DestroyBuffer),
    H(CreateImage),
    H(DestroyImage),
    H(BindBufferMemory),
    H(BindImageMemory),
    H(BindBufferMemory2),
    H(BindBufferMemory2KHR),
    H(BindImageMemory2),
    H(BindImageMemory2KHR),
    H(QueueSubmit),
    H(QueueSubmit2),
    H(QueueSubmit2KHR),
    H(QueueBindSparse),
    H(QueuePresentKHR),
    H(QueueWaitIdle),
    H(DeviceWaitIdle),
    H(WaitForFences),
    H(GetFenceStatus),
    H(WaitSemaphores),
    H(WaitSemaphoresKHR),
};
#undef H

static PFN_vkVoidFunction find_hook(const char *name)
{
    for (size_t i = 0; i < sizeof g_device_hooks / sizeof g_device_hooks[0]; i++)
        if (strcmp(name, g_device_hooks[i].name) == 0)
            return g_device_hooks[i].fn;
    return NULL;
}

/* The loader gets these static functions, never the exported symbols: in a
 * process that also has libvulkan loaded, a reference to our own exported
 * vkGetInstanceProcAddr could be bound to libvulkan's (ELF interposition),
 * and the chain below us would call back into the loader. */
static VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL gdpa(VkDevice device, const char *name)
{
    if (!name)
        return NULL;
    if (strcmp(name, "vkGetDeviceProcAddr") == 0)
        return (PFN_vkVoidFunction)gdpa;
    lt_device *dev = device ? lt_device_from(device) : NULL;
    if (!dev)
        return NULL;
    PFN_vkVoidFunction next = dev->t.GetDeviceProcAddr(device, name);
    /* Only hook what the device really offers (e.g. vkQueueSubmit2 needs 1.3
     * or the extension): returning a hook for a missing function would make
     * the application think it exists. */
    PFN_vkVoidFunction mine = next ? find_hook(name) : NULL;
    return mine ? mine : next;
}

static VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL gipa(VkInstance instance, const char *name)
{
    if (!name)
        return NULL;
    if (strcmp(name, "vkGetInstanceProcAddr") == 0)
        return (PFN_vkVoidFunction)gipa;
    if (strcmp(name, "vkCreateInstance") == 0)
        return (PFN_vkVoidFunction)lt_CreateInstance;
    if (strcmp(name, "vkGetDeviceProcAddr") == 0)
        return (PFN_vkVoidFunction)gdpa;
    if (!instance)
        return NULL;
    lt_instance *inst = instance_from(instance);
    if (!inst)
        return NULL;
    if (strcmp(name, "vkDestroyInstance") == 0)
        return (PFN_vkVoidFunction)lt_DestroyInstance;
    if (strcmp(name, "vkCreateDevice") == 0)
        return (PFN_vkVoidFunction)lt_CreateDevice;
    PFN_vkVoidFunction next = inst->next_gipa(instance, name);
    PFN_vkVoidFunction mine = next ? find_hook(name) : NULL;
    return mine ? mine : next;
}

/* Exported for loaders that look the entry points up by name. */
LT_EXPORT VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL vkGetDeviceProcAddr(VkDevice device, const char *name);
LT_EXPORT VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL vkGetInstanceProcAddr(VkInstance instance, const char *name);
LT_EXPORT VKAPI_ATTR VkResult VKAPI_CALL vkNegotiateLoaderLayerInterfaceVersion(VkNegotiateLayerInterface *v);

LT_EXPORT VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL vkGetDeviceProcAddr(VkDevice device, const char *name)
{
    return gdpa(device, name);
}

LT_EXPORT VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL vkGetInstanceProcAddr(VkInstance instance, const char *name)
{
    return gipa(instance, name);
}

LT_EXPORT VKAPI_ATTR VkResult VKAPI_CALL vkNegotiateLoaderLayerInterfaceVersion(VkNegotiateLayerInterface *v)
{
    if (!v || v->sType != LAYER_NEGOTIATE_INTERFACE_STRUCT)
        return VK_ERROR_INITIALIZATION_FAILED;
    if (v->loaderLayerInterfaceVersion > 2)
        v->loaderLayerInterfaceVersion = 2;
    v->pfnGetInstanceProcAddr = gipa;
    v->pfnGetDeviceProcAddr = gdpa;
    v->pfnGetPhysicalDeviceProcAddr = NULL;
    return VK_SUCCESS;
}
