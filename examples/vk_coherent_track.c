/* mt-vk-coherent: track a real Vulkan HOST_VISIBLE|HOST_COHERENT mapping.
 *
 * Allocates and maps coherent memory on the first Vulkan device, adds the
 * mapping to a tracker with the `auto` backend, and reports which backend the
 * kernel accepted (NVIDIA's device mappings refuse userfaultfd, so `auto`
 * falls back to the signal backend for them), the first-write cost per page,
 * and whether every written page was reported. For comparison the same is
 * done on anonymous memory. Usage: mt-vk-coherent [MiB] */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <vulkan/vulkan.h>

#include "memtrack/memtrack.h"

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* Tracks [mem, mem+bytes) with `backend`, writes every other page and checks
 * the report. Returns 0 when every written page was reported exactly. */
static int measure(const char *what, unsigned char *mem, size_t bytes, mt_track_backend backend)
{
    size_t ps = (size_t)sysconf(_SC_PAGESIZE), np = bytes / ps;
    for (size_t p = 0; p < np; p++)
        mem[p * ps] = 0; /* populate before arming */
    mt_tracker_opts o = {.backend = backend};
    mt_tracker *t;
    int rc = mt_tracker_create(&o, &t);
    if (rc) {
        printf("%-28s %-7s unavailable: %s\n", what, mt_track_backend_name(backend), mt_strerror(rc));
        return 0;
    }
    mt_range_id id;
    rc = mt_tracker_add(t, mem, bytes, NULL, &id);
    if (rc) {
        printf("%-28s %-7s add failed: %s\n", what, mt_track_backend_name(backend), mt_strerror(rc));
        mt_tracker_destroy(t);
        return backend == MT_TRACK_AUTO;
    }
    double t0 = now_ns();
    for (size_t p = 0; p < np; p += 2)
        mem[p * ps + 3] = (unsigned char)p;
    double t1 = now_ns();
    mt_dirty_run runs[256];
    size_t reported = 0, exact = 1;
    long n;
    do {
        n = mt_tracker_collect(t, id, runs, 256);
        for (long i = 0; i < n; i++) {
            exact &= runs[i].length == ps && (runs[i].offset / ps) % 2 == 0;
            reported += runs[i].length / ps;
        }
    } while (n == 256);
    mt_range_stats st;
    mt_tracker_stats(t, id, &st);
    printf("%-28s %-7s -> %-6s fallback=%-22s first-write %8.0f ns/page, %zu/%zu pages reported%s\n",
           what, mt_track_backend_name(backend), mt_track_backend_name(st.backend),
           st.fallback_reason ? mt_strerror(st.fallback_reason) : "-",
           (t1 - t0) / (double)((np + 1) / 2), reported, (np + 1) / 2, exact ? " exactly" : " (NOT exact)");
    mt_tracker_destroy(t);
    return !(exact && reported == (np + 1) / 2);
}

int main(int argc, char **argv)
{
    size_t mib = argc > 1 ? strtoul(argv[1], NULL, 0) : 64;
    size_t bytes = mib << 20;
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                             .pApplicationName = "mt-vk-coherent",
                             .apiVersion = VK_API_VERSION_1_1};
    VkInstanceCreateInfo ici = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, .pApplicationInfo = &app};
    VkInstance inst;
    if (vkCreateInstance(&ici, NULL, &inst) != VK_SUCCESS) {
        fprintf(stderr, "mt-vk-coherent: no Vulkan instance\n");
        return 2;
    }
    uint32_t ndev = 1;
    VkPhysicalDevice pd;
    if (vkEnumeratePhysicalDevices(inst, &ndev, &pd) < 0 || ndev == 0) {
        fprintf(stderr, "mt-vk-coherent: no Vulkan device\n");
        return 2;
    }
    VkPhysicalDeviceProperties props;
    vkGetPhysicalDeviceProperties(pd, &props);
    VkPhysicalDeviceMemoryProperties mp;
    vkGetPhysicalDeviceMemoryProperties(pd, &mp);
    printf("device: %s (driver 0x%x)\nmemory types:\n", props.deviceName, props.driverVersion);
    uint32_t want = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    int types[VK_MAX_MEMORY_TYPES], ntypes = 0;
    for (uint32_t i = 0; i < mp.memoryTypeCount; i++) {
        VkMemoryPropertyFlags f = mp.memoryTypes[i].propertyFlags;
        printf("  %u: heap %u flags 0x%x%s%s%s%s\n", i, mp.memoryTypes[i].heapIndex, f,
               f & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT ? " DEVICE_LOCAL" : "",
               f & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT ? " HOST_VISIBLE" : "",
               f & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT ? " HOST_COHERENT" : "",
               f & VK_MEMORY_PROPERTY_HOST_CACHED_BIT ? " HOST_CACHED" : "");
        if ((f & want) == want)
            types[ntypes++] = (int)i;
    }
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                   .queueFamilyIndex = 0, .queueCount = 1, .pQueuePriorities = &prio};
    VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, .queueCreateInfoCount = 1,
                              .pQueueCreateInfos = &qci};
    VkDevice dev;
    if (vkCreateDevice(pd, &dci, NULL, &dev) != VK_SUCCESS)
        return 2;
    int bad = 0;
    for (int k = 0; k < ntypes; k++) {
        VkMemoryAllocateInfo mai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                                    .allocationSize = bytes, .memoryTypeIndex = (uint32_t)types[k]};
        VkDeviceMemory mem;
        if (vkAllocateMemory(dev, &mai, NULL, &mem) != VK_SUCCESS) {
            printf("type %d: allocation of %zu MiB failed\n", types[k], mib);
            continue;
        }
        void *p;
        if (vkMapMemory(dev, mem, 0, VK_WHOLE_SIZE, 0, &p) != VK_SUCCESS)
            return 2;
        char what[64];
        snprintf(what, sizeof what, "vulkan coherent type %d", types[k]);
        bad |= measure(what, p, bytes, MT_TRACK_AUTO);
        bad |= measure(what, p, bytes, MT_TRACK_SIGNAL);
        vkUnmapMemory(dev, mem);
        vkFreeMemory(dev, mem, NULL);
    }
    unsigned char *anon = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    bad |= measure("anonymous memory", anon, bytes, MT_TRACK_AUTO);
    bad |= measure("anonymous memory", anon, bytes, MT_TRACK_SIGNAL);
    munmap(anon, bytes);
    vkDestroyDevice(dev, NULL);
    vkDestroyInstance(inst, NULL);
    printf("%s\n", bad ? "FAILED: a written page was not reported" : "all written pages reported");
    return bad;
}
