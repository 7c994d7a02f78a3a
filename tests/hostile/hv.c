/* memtrack-hostile: Vulkan setup and the GPU check every behaviour uses. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "hv.h"
#include "../hang_dump.h"

const char *hv_argv0 = "memtrack-hostile";

void hv_die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", hv_argv0);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(3);
}

uint64_t hv_rnd(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int has_ext(VkPhysicalDevice p, const char *name)
{
    uint32_t n = 0;
    vkEnumerateDeviceExtensionProperties(p, NULL, &n, NULL);
    VkExtensionProperties *e = calloc(n ? n : 1, sizeof *e);
    if (!e)
        return 0;
    vkEnumerateDeviceExtensionProperties(p, NULL, &n, e);
    int found = 0;
    for (uint32_t i = 0; i < n && !found; i++)
        found = strcmp(e[i].extensionName, name) == 0;
    free(e);
    return found;
}

int hv_init(hv *h, const hv_opts *o)
{
    int frames = h->frames;
    memset(h, 0, sizeof *h);
    h->frames = frames ? frames : 4;
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                             .pApplicationName = "memtrack-hostile",
                             .apiVersion = VK_API_VERSION_1_2};
    VkInstanceCreateInfo ici = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                                .pApplicationInfo = &app};
    if (vkCreateInstance(&ici, NULL, &h->inst) != VK_SUCCESS) {
        fprintf(stderr, "%s: no Vulkan instance\n", hv_argv0);
        return 3;
    }
    uint32_t n = 1;
    VkResult r = vkEnumeratePhysicalDevices(h->inst, &n, &h->phys);
    if ((r != VK_SUCCESS && r != VK_INCOMPLETE) || n == 0) {
        fprintf(stderr, "%s: no Vulkan device\n", hv_argv0);
        return 3;
    }
    vkGetPhysicalDeviceProperties(h->phys, &h->props);
    for (uint32_t i = 0; o && i < o->ndevice_exts; i++)
        if (!has_ext(h->phys, o->device_exts[i])) {
            fprintf(stderr, "%s: the device lacks %s\n", hv_argv0, o->device_exts[i]);
            return HV_SKIP;
        }
    uint32_t nf = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(h->phys, &nf, NULL);
    VkQueueFamilyProperties qf[16];
    nf = nf > 16 ? 16 : nf;
    vkGetPhysicalDeviceQueueFamilyProperties(h->phys, &nf, qf);
    h->family = UINT32_MAX;
    for (uint32_t i = 0; i < nf && h->family == UINT32_MAX; i++)
        if (qf[i].queueFlags & (VK_QUEUE_GRAPHICS_BIT | VK_QUEUE_COMPUTE_BIT))
            h->family = i;
    VkPhysicalDeviceMemoryProperties mp;
    vkGetPhysicalDeviceMemoryProperties(h->phys, &mp);
    uint32_t want = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    /* HV_MEMORY=device-local: memory the device keeps in its own memory and
     * the host maps through the PCI BAR (resizable BAR), where engines put
     * what they upload every frame; skipped where no such type exists. */
    const char *which = getenv("HV_MEMORY");
    int devlocal = which && strcmp(which, "device-local") == 0;
    if (devlocal)
        want |= VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
    h->host_type = UINT32_MAX;
    for (uint32_t i = 0; i < mp.memoryTypeCount && h->host_type == UINT32_MAX; i++)
        if ((mp.memoryTypes[i].propertyFlags & want) == want)
            h->host_type = i;
    if (devlocal && h->host_type == UINT32_MAX) {
        fprintf(stderr, "%s: no device-local host-visible memory type\n", hv_argv0);
        return HV_SKIP;
    }
    if (getenv("HV_VERBOSE") && h->host_type != UINT32_MAX)
        fprintf(stderr, "%s: memory type %u (flags 0x%x, heap %u of %llu MiB)\n", hv_argv0, h->host_type,
                mp.memoryTypes[h->host_type].propertyFlags, mp.memoryTypes[h->host_type].heapIndex,
                (unsigned long long)(mp.memoryHeaps[mp.memoryTypes[h->host_type].heapIndex].size >> 20));
    if (h->family == UINT32_MAX || h->host_type == UINT32_MAX) {
        fprintf(stderr, "%s: no usable queue or coherent memory type\n", hv_argv0);
        return 3;
    }
    return hv_init_device(h, o);
}

int hv_init_device(hv *h, const hv_opts *o)
{
    VkPhysicalDeviceVulkan12Features f12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
    if (o && o->timeline) {
        VkPhysicalDeviceVulkan12Features have = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
        VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &have};
        vkGetPhysicalDeviceFeatures2(h->phys, &f2);
        if (!have.timelineSemaphore || h->props.apiVersion < VK_API_VERSION_1_2) {
            fprintf(stderr, "%s: the device lacks timeline semaphores\n", hv_argv0);
            return HV_SKIP;
        }
        f12.timelineSemaphore = VK_TRUE;
    }
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                   .queueFamilyIndex = h->family, .queueCount = 1,
                                   .pQueuePriorities = &prio};
    /* The behaviour's own feature structures, then 1.2's where asked. */
    void *chain = o && o->timeline ? (void *)&f12 : NULL;
    /* Appended after the behaviour's own chain, which is kept (and left as
     * it was after the device is created: hv_init may run again on it). */
    VkBaseOutStructure *last = NULL;
    if (o && o->features) {
        last = o->features;
        while (last->pNext)
            last = last->pNext;
        last->pNext = chain;
        chain = o->features;
    }
    VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                              .pNext = chain,
                              .queueCreateInfoCount = 1, .pQueueCreateInfos = &qci,
                              .enabledExtensionCount = o ? o->ndevice_exts : 0,
                              .ppEnabledExtensionNames = o ? o->device_exts : NULL};
    HV_VK(vkCreateDevice(h->phys, &dci, NULL, &h->dev));
    if (last)
        last->pNext = NULL;
    vkGetDeviceQueue(h->dev, h->family, 0, &h->queue);
    VkCommandPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                   .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                   .queueFamilyIndex = h->family};
    HV_VK(vkCreateCommandPool(h->dev, &pci, NULL, &h->pool));
    VkCommandBufferAllocateInfo cai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                       .commandPool = h->pool,
                                       .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                       .commandBufferCount = 1};
    HV_VK(vkAllocateCommandBuffers(h->dev, &cai, &h->cmd));
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    HV_VK(vkCreateFence(h->dev, &fci, NULL, &h->fence));
    return 0;
}

void hv_fini_device(hv *h)
{
    if (!h->dev)
        return;
    vkDeviceWaitIdle(h->dev);
    vkDestroyFence(h->dev, h->fence, NULL);
    vkDestroyCommandPool(h->dev, h->pool, NULL);
    vkDestroyDevice(h->dev, NULL);
    h->dev = VK_NULL_HANDLE;
}

void hv_fini(hv *h)
{
    if (!h->dev)
        return;
    hv_fini_device(h);
    vkDestroyInstance(h->inst, NULL);
}

void hv_alloc_ex(hv *h, hv_mem *m, VkDeviceSize size, VkBufferUsageFlags usage, const void *pnext,
                 const void *buf_pnext, int map)
{
    memset(m, 0, sizeof *m);
    VkBufferCreateInfo bci = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .pNext = buf_pnext,
                              .size = size, .usage = usage,
                              .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
    HV_VK(vkCreateBuffer(h->dev, &bci, NULL, &m->buf));
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(h->dev, m->buf, &req);
    VkMemoryAllocateInfo mai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .pNext = pnext,
                                .allocationSize = req.size, .memoryTypeIndex = h->host_type};
    HV_VK(vkAllocateMemory(h->dev, &mai, NULL, &m->mem));
    HV_VK(vkBindBufferMemory(h->dev, m->buf, m->mem, 0));
    m->size = size;
    m->model = calloc(1, size);
    if (!m->model)
        hv_die("out of memory");
    if (map) {
        hv_map(h, m);
        memset(m->ptr, 0, size);
    }
}

void hv_alloc(hv *h, hv_mem *m, VkDeviceSize size, VkBufferUsageFlags usage)
{
    hv_alloc_ex(h, m, size, usage, NULL, NULL, 1);
}

void hv_free(hv *h, hv_mem *m)
{
    if (m->ptr)
        hv_unmap(h, m);
    vkDestroyBuffer(h->dev, m->buf, NULL);
    vkFreeMemory(h->dev, m->mem, NULL);
    free(m->model);
    memset(m, 0, sizeof *m);
}

void hv_map(hv *h, hv_mem *m)
{
    void *p;
    HV_VK(vkMapMemory(h->dev, m->mem, 0, VK_WHOLE_SIZE, 0, &p));
    m->ptr = p;
}

void hv_unmap(hv *h, hv_mem *m)
{
    vkUnmapMemory(h->dev, m->mem);
    m->ptr = NULL;
}

void hv_pattern(unsigned char *buf, size_t len, uint64_t seed)
{
    uint64_t s = seed;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t v = hv_rnd(&s);
        memcpy(buf + i, &v, 8);
    }
    for (; i < len; i++)
        buf[i] = (unsigned char)hv_rnd(&s);
}

void hv_write(hv_mem *m, VkDeviceSize off, VkDeviceSize len, uint64_t seed)
{
    hv_pattern(m->model + off, (size_t)len, seed);
    memcpy(m->ptr + off, m->model + off, (size_t)len);
}

void hv_begin(hv *h)
{
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    HV_VK(vkResetCommandBuffer(h->cmd, 0));
    HV_VK(vkBeginCommandBuffer(h->cmd, &bi));
}

void hv_end(hv *h)
{
    /* Device writes visible to host reads after the fence. */
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                          .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_HOST_READ_BIT};
    vkCmdPipelineBarrier(h->cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1,
                         &mb, 0, NULL, 0, NULL);
    HV_VK(vkEndCommandBuffer(h->cmd));
}

void hv_submit_wait(hv *h)
{
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1,
                       .pCommandBuffers = &h->cmd};
    HV_VK(vkQueueSubmit(h->queue, 1, &si, h->fence));
    HV_VK(vkWaitForFences(h->dev, 1, &h->fence, VK_TRUE, UINT64_MAX));
    HV_VK(vkResetFences(h->dev, 1, &h->fence));
}

int hv_compare(const unsigned char *got, const unsigned char *want, size_t len, const char *what)
{
    if (memcmp(got, want, len) == 0)
        return 0;
    size_t k = 0;
    while (got[k] == want[k])
        k++;
    fprintf(stderr, "%s: %s: byte %zu of %zu is 0x%02x, expected 0x%02x\n", hv_argv0, what, k, len,
            got[k], want[k]);
    return 1;
}

int hv_gpu_check(hv *h, hv_mem *src, hv_mem *dst, const char *what)
{
    hv_begin(h);
    VkBufferCopy c = {.srcOffset = 0, .dstOffset = 0, .size = src->size};
    vkCmdCopyBuffer(h->cmd, src->buf, dst->buf, 1, &c);
    hv_end(h);
    hv_submit_wait(h);
    /* The device wrote dst: that is now what the app believes dst holds. */
    memcpy(dst->model, src->model, (size_t)src->size);
    return hv_compare(dst->ptr, src->model, (size_t)src->size, what);
}

int hv_frames_of_work(hv *h, uint64_t seed, const char *what)
{
    hv_mem src, rb;
    hv_alloc(h, &src, 1u << 20, HV_SRC);
    hv_alloc(h, &rb, 1u << 20, HV_DST);
    int bad = 0;
    for (int f = 0; f < h->frames && !bad; f++) {
        for (int k = 0; k < 8; k++)
            hv_write(&src, (VkDeviceSize)k * 100000 + (VkDeviceSize)f * 11, 4000, seed + (uint64_t)(f * 8 + k));
        bad |= hv_gpu_check(h, &src, &rb, what);
    }
    hv_free(h, &src);
    hv_free(h, &rb);
    return bad;
}

void hv_sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

int hv_status_is(int st, int code, const char *what)
{
    if (WIFEXITED(st) && WEXITSTATUS(st) == code)
        return 0;
    fprintf(stderr, "%s: %s: child %s %d, expected exit %d\n", hv_argv0, what,
            WIFEXITED(st) ? "exited with" : "died of signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st),
            code);
    return 1;
}

int hv_wait_status(int pid, int code, const char *what)
{
    for (int i = 0; i < 3000; i++) {
        int st;
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid)
            return hv_status_is(st, code, what);
        if (r < 0) {
            fprintf(stderr, "%s: %s: waitpid: %s\n", hv_argv0, what, strerror(errno));
            return 1;
        }
        hv_sleep_ms(10);
    }
    fprintf(stderr, "%s: %s: child still running after 30 s (hung)\n", hv_argv0, what);
    /* HV_HANG_DUMP=1: where every thread of the hung child is (gdb). */
    if (getenv("HV_HANG_DUMP"))
        mt_hang_dump(pid, hv_argv0);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return 1;
}
