/* Loader interface: negotiation, vkCreateInstance/vkCreateDevice chaining,
 * the hook table and proc-addr lookup.
 *
 * Every instance and device created through the layer is registered with its
 * dispatch table, captured or not (a process left uncaptured, or a device
 * created after the trace failed, passes everything through): an entry point
 * the layer hands out is never NULL where the driver has the function. When
 * the layer cannot even record a device (out of host memory), creation fails
 * with VK_ERROR_OUT_OF_HOST_MEMORY rather than leaving a device the layer
 * cannot dispatch. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "layer.h"

#define LT_EXPORT __attribute__((visibility("default")))

static void *key_of(const void *handle) { return *(void *const *)handle; }

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
    lt_session_init();
    lt_instance *inst = calloc(1, sizeof *inst);
    if (!inst)
        return VK_ERROR_OUT_OF_HOST_MEMORY;
    VkResult res = create(ci, alloc, out);
    if (res != VK_SUCCESS) {
        free(inst);
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
    if (lt_registry_add_instance(inst) != 0) {
        inst->DestroyInstance(*out, alloc);
        free(inst);
        return VK_ERROR_OUT_OF_HOST_MEMORY;
    }
    return res;
}

static VKAPI_ATTR void VKAPI_CALL lt_DestroyInstance(VkInstance instance, const VkAllocationCallbacks *alloc)
{
    lt_instance *inst = lt_instance_from(instance);
    if (!inst)
        return;
    PFN_vkDestroyInstance destroy = inst->DestroyInstance;
    lt_registry_remove_instance(inst);
    free(inst);
    destroy(instance, alloc);
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
#define DGET2(field, name) t->field = (lt_PFN_vk##field)gdpa(d, name)
    DGET2(MapMemory2, "vkMapMemory2");
    DGET2(UnmapMemory2, "vkUnmapMemory2");
#undef DGET2
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
    DGET(SignalSemaphore);
    DGET(SignalSemaphoreKHR);
    DGET(GetSemaphoreCounterValue);
    DGET(GetSemaphoreCounterValueKHR);
    DGET(SetEvent);
    DGET(GetEventStatus);
    DGET(CreateFence);
    DGET(CreateSemaphore);
    DGET(GetFenceFdKHR);
    DGET(GetSemaphoreFdKHR);
#undef DGET
#define HGET(field) t->field = (void *)gdpa(d, "vk" #field)
    HGET(CopyMemoryToImage);
    HGET(CopyMemoryToImageEXT);
    HGET(CopyImageToMemory);
    HGET(CopyImageToMemoryEXT);
    HGET(CopyImageToImage);
    HGET(CopyImageToImageEXT);
    HGET(TransitionImageLayout);
    HGET(TransitionImageLayoutEXT);
#undef HGET
}

/* The trace header: what was recorded, on what, how. */
static void open_trace(lt_instance *inst, VkPhysicalDevice phys)
{
    VkPhysicalDeviceProperties p;
    inst->GetPhysicalDeviceProperties(phys, &p);
    char driver[320], api[32], drv_version[32], backend[64], pid[24];
    snprintf(driver, sizeof driver, "%s (vendor 0x%04x, device 0x%04x)", p.deviceName, p.vendorID,
             p.deviceID);
    snprintf(api, sizeof api, "%u.%u.%u", VK_API_VERSION_MAJOR(p.apiVersion),
             VK_API_VERSION_MINOR(p.apiVersion), VK_API_VERSION_PATCH(p.apiVersion));
    snprintf(drv_version, sizeof drv_version, "0x%x", p.driverVersion);
    const lt_config *c = lt_cfg();
    int uffd = c->backend != MT_TRACK_SIGNAL && mt_track_backend_available(MT_TRACK_UFFD);
    snprintf(backend, sizeof backend, "%s (asked: %s)", uffd ? "uffd+signal" : "signal",
             mt_track_backend_name((mt_track_backend)c->backend));
    snprintf(pid, sizeof pid, "%d", (int)getpid());
    mt_trace_kv meta[] = {
        {"application", inst->app_name[0] ? inst->app_name : "(unnamed)"},
        {"engine", inst->engine_name[0] ? inst->engine_name : "(none)"},
        {"driver", driver},
        {"driver_version", drv_version},
        {"device_api", api},
        {"memtrack", MT_VERSION_STRING},
        {"mode", lt_mode_name(c->mode)},
        {"verify", c->verify ? "1" : "0"},
        {"track_backends", backend},
        {"pid", pid},
    };
    lt_session_open(meta, sizeof meta / sizeof meta[0]);
}

static VKAPI_ATTR VkResult VKAPI_CALL lt_CreateDevice(VkPhysicalDevice phys, const VkDeviceCreateInfo *ci,
                                                      const VkAllocationCallbacks *alloc, VkDevice *out)
{
    lt_instance *inst = lt_instance_from(phys);
    VkLayerDeviceCreateInfo *link = device_link_info(ci);
    if (!link || !inst)
        return VK_ERROR_INITIALIZATION_FAILED;
    PFN_vkGetInstanceProcAddr next_gipa = link->u.pLayerInfo->pfnNextGetInstanceProcAddr;
    PFN_vkGetDeviceProcAddr next_gdpa = link->u.pLayerInfo->pfnNextGetDeviceProcAddr;
    link->u.pLayerInfo = link->u.pLayerInfo->pNext;
    PFN_vkCreateDevice create = (PFN_vkCreateDevice)next_gipa(inst->handle, "vkCreateDevice");
    if (!create)
        return VK_ERROR_INITIALIZATION_FAILED;
    lt_device *dev = calloc(1, sizeof *dev);
    if (!dev)
        return VK_ERROR_OUT_OF_HOST_MEMORY;
    VkResult res = create(phys, ci, alloc, out);
    if (res != VK_SUCCESS) {
        free(dev);
        return res;
    }
    dev->handle = *out;
    dev->key = key_of(*out);
    dev->inst = inst;
    dev->phys = phys;
    pthread_mutex_init(&dev->lock, NULL);
    fill_device_table(&dev->t, *out, next_gdpa);
    inst->GetPhysicalDeviceMemoryProperties(phys, &dev->memprops);
    VkPhysicalDeviceProperties props;
    inst->GetPhysicalDeviceProperties(phys, &props);
    dev->map_align = props.limits.minMemoryMapAlignment;
    if (lt_session_capturing())
        open_trace(inst, phys);
    dev->capture = lt_tracing();
    dev->window_epoch = lt_window_epoch();
    dev->active = lt_window_open();
    if (lt_registry_add_device(dev) != 0) {
        dev->t.DestroyDevice(*out, alloc);
        pthread_mutex_destroy(&dev->lock);
        free(dev);
        *out = VK_NULL_HANDLE;
        return VK_ERROR_OUT_OF_HOST_MEMORY;
    }
    return res;
}

static VKAPI_ATTR void VKAPI_CALL lt_DestroyDevice(VkDevice device, const VkAllocationCallbacks *alloc)
{
    lt_device *dev = lt_device_from(device);
    if (!dev)
        return;
    size_t left = lt_registry_remove_device(dev);
    if (dev->capture) {
        pthread_mutex_lock(&dev->lock);
        lt_memory_destroy_all(dev);
        pthread_mutex_unlock(&dev->lock);
    }
    PFN_vkDestroyDevice destroy = dev->t.DestroyDevice;
    lt_map_free(&dev->memories);
    lt_map_free(&dev->objects);
    lt_inflight_free(dev);
    if (dev->capture)
        pthread_mutex_destroy(&dev->lock); /* a forked child's copy may be locked: leave it */
    int captured = dev->capture;
    free(dev);
    destroy(device, alloc);
    if (left == 0 && captured)
        lt_session_devices_gone();
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
    H(MapMemory2),
    H(UnmapMemory2),
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
    H(SignalSemaphore),
    H(SignalSemaphoreKHR),
    H(GetSemaphoreCounterValue),
    H(GetSemaphoreCounterValueKHR),
    H(SetEvent),
    H(GetEventStatus),
    H(CopyMemoryToImage),
    H(CopyMemoryToImageEXT),
    H(CopyImageToMemory),
    H(CopyImageToMemoryEXT),
    H(CopyImageToImage),
    H(CopyImageToImageEXT),
    H(TransitionImageLayout),
    H(TransitionImageLayoutEXT),
    H(CreateFence),
    H(CreateSemaphore),
    H(GetFenceFdKHR),
    H(GetSemaphoreFdKHR),
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
    lt_device *dev = lt_device_from(device);
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
    /* Layers above us look vkCreateDevice up with no instance (MangoHud,
     * vkBasalt, Mesa's overlay: `pfnNextGetInstanceProcAddr(NULL,
     * "vkCreateDevice")`), and ours finds its instance from the physical
     * device anyway: answered whatever the instance. Without it MangoHud's
     * vkCreateDevice failed and vkBasalt's called a null pointer. */
    if (strcmp(name, "vkCreateDevice") == 0)
        return (PFN_vkVoidFunction)lt_CreateDevice;
    if (strcmp(name, "vkDestroyInstance") == 0)
        return (PFN_vkVoidFunction)lt_DestroyInstance;
    lt_instance *inst = lt_instance_from(instance);
    if (!inst)
        return NULL;
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
