/* Preloaded into vkcube by vkcube-renderdoc.sh: has RenderDoc (loaded as
 * its implicit Vulkan layer) capture one frame chosen by number, so that two
 * runs capture the same frame. RenderDoc's own triggers are a key press or
 * a time, neither repeatable here.
 *
 * It counts the application's presents by interposing vkQueuePresentKHR
 * wherever the application may get it: linked directly, or through
 * vkGetInstanceProcAddr / vkGetDeviceProcAddr (vkcube takes the latter from
 * the former). After present number MT_RD_FRAME - 1 it calls RenderDoc's
 * in-application API (RENDERDOC_GetAPI, version 1.1.2, looked up with
 * dlsym: no RenderDoc header needed) to capture the next frame, with the
 * capture path template from MT_RD_CAPTURE. It says on stderr what it did.
 * The API's function table is used by position: GetAPIVersion is entry 0,
 * SetCaptureFilePathTemplate 11, GetNumCaptures 13, TriggerCapture 15
 * (renderdoc_app.h, stable since 1.0). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vulkan/vulkan.h>

typedef int (*rd_get_api_fn)(int version, void **api);
enum { RD_API_1_1_2 = 10102, RD_SET_PATH = 11, RD_NUM_CAPTURES = 13, RD_TRIGGER = 15 };

static PFN_vkQueuePresentKHR g_next_present;
static _Atomic long g_presents;

static void **renderdoc_api(void)
{
    void *lib = dlopen("librenderdoc.so", RTLD_NOW | RTLD_NOLOAD);
    if (!lib) {
        fprintf(stderr, "renderdoc-trigger: RenderDoc's layer is not loaded\n");
        return NULL;
    }
    rd_get_api_fn get = (rd_get_api_fn)dlsym(lib, "RENDERDOC_GetAPI");
    void **api = NULL;
    if (!get || get(RD_API_1_1_2, (void **)&api) != 1 || !api) {
        fprintf(stderr, "renderdoc-trigger: RenderDoc's API 1.1.2 is not available\n");
        return NULL;
    }
    return api;
}

static VKAPI_ATTR VkResult VKAPI_CALL present(VkQueue queue, const VkPresentInfoKHR *info)
{
    VkResult res = g_next_present(queue, info);
    long n = atomic_fetch_add(&g_presents, 1) + 1;
    const char *want = getenv("MT_RD_FRAME");
    long frame = want ? atol(want) : 0; /* 0: no capture asked */
    if (frame && n == frame - 1) {
        void **api = renderdoc_api();
        if (api) {
            const char *path = getenv("MT_RD_CAPTURE");
            if (path)
                ((void (*)(const char *))api[RD_SET_PATH])(path);
            ((void (*)(void))api[RD_TRIGGER])();
            fprintf(stderr, "renderdoc-trigger: capture of frame %ld asked\n", n + 1);
        }
    }
    if (frame && n == frame + 1) {
        void **api = renderdoc_api();
        if (api)
            fprintf(stderr, "renderdoc-trigger: %u captures\n",
                    ((unsigned (*)(void))api[RD_NUM_CAPTURES])());
    }
    return res;
}

/* The next implementation of `name` (the loader's). */
static void *next_sym(const char *name) { return dlsym(RTLD_NEXT, name); }

VKAPI_ATTR VkResult VKAPI_CALL vkQueuePresentKHR(VkQueue queue, const VkPresentInfoKHR *info)
{
    if (!g_next_present)
        g_next_present = (PFN_vkQueuePresentKHR)next_sym("vkQueuePresentKHR");
    return present(queue, info);
}

VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL vkGetDeviceProcAddr(VkDevice device, const char *name)
{
    static PFN_vkGetDeviceProcAddr next;
    if (!next)
        next = (PFN_vkGetDeviceProcAddr)next_sym("vkGetDeviceProcAddr");
    PFN_vkVoidFunction f = next(device, name);
    if (f && strcmp(name, "vkQueuePresentKHR") == 0) {
        g_next_present = (PFN_vkQueuePresentKHR)f;
        return (PFN_vkVoidFunction)present;
    }
    if (f && strcmp(name, "vkGetDeviceProcAddr") == 0)
        return (PFN_vkVoidFunction)vkGetDeviceProcAddr;
    return f;
}

VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL vkGetInstanceProcAddr(VkInstance instance, const char *name)
{
    static PFN_vkGetInstanceProcAddr next;
    if (!next)
        next = (PFN_vkGetInstanceProcAddr)next_sym("vkGetInstanceProcAddr");
    PFN_vkVoidFunction f = next(instance, name);
    if (f && strcmp(name, "vkGetDeviceProcAddr") == 0)
        return (PFN_vkVoidFunction)vkGetDeviceProcAddr;
    if (f && strcmp(name, "vkGetInstanceProcAddr") == 0)
        return (PFN_vkVoidFunction)vkGetInstanceProcAddr;
    if (f && strcmp(name, "vkQueuePresentKHR") == 0) {
        g_next_present = (PFN_vkQueuePresentKHR)f;
        return (PFN_vkVoidFunction)present;
    }
    return f;
}
