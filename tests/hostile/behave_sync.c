/* Behaviours: host/device synchronisation other than fences — an event the
 * device sets and the host polls, an event the host sets to release device
 * work that reads what the host wrote after the submit, timeline
 * semaphores signalled and polled from the host, and a fence exported and
 * waited on outside the device that signals it. */
#define _GNU_SOURCE
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hv.h"

static void host_to_transfer_barrier(VkCommandBuffer cmd, VkEvent ev)
{
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                          .srcAccessMask = VK_ACCESS_HOST_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT};
    vkCmdWaitEvents(cmd, 1, &ev, VK_PIPELINE_STAGE_HOST_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT, 1, &mb,
                    0, NULL, 0, NULL);
}

static void copy_all(hv *h, hv_mem *src, hv_mem *dst)
{
    VkBufferCopy c = {0, 0, src->size};
    vkCmdCopyBuffer(h->cmd, src->buf, dst->buf, 1, &c);
}

static void transfer_to_host_barrier(VkCommandBuffer cmd)
{
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                          .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_HOST_READ_BIT};
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb,
                         0, NULL, 0, NULL);
}

static void submit(hv *h, const void *pnext, VkFence fence)
{
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .pNext = pnext,
                       .commandBufferCount = 1, .pCommandBuffers = &h->cmd};
    HV_VK(vkQueueSubmit(h->queue, 1, &si, fence));
}

static void sleep_us(long us)
{
    struct timespec ts = {0, us * 1000};
    nanosleep(&ts, NULL);
}

/* The device copies, then sets an event; the host polls vkGetEventStatus,
 * never waits on a fence, and reads the copy as soon as the event is set. */
static int event_poll(hv *h, int argc, char **argv)
{
    (void)argc, (void)argv;
    int rc = hv_init(h, NULL);
    if (rc)
        return rc;
    hv_mem src, rb;
    hv_alloc(h, &src, 1u << 20, HV_SRC);
    hv_alloc(h, &rb, 1u << 20, HV_DST);
    VkEventCreateInfo eci = {.sType = VK_STRUCTURE_TYPE_EVENT_CREATE_INFO};
    VkEvent ev;
    HV_VK(vkCreateEvent(h->dev, &eci, NULL, &ev));
    int bad = 0;
    for (int f = 0; f < h->frames && !bad; f++) {
        HV_VK(vkResetEvent(h->dev, ev));
        hv_write(&src, 0, 100000 + (VkDeviceSize)f * 1000, 300 + (uint64_t)f);
        hv_begin(h);
        copy_all(h, &src, &rb);
        transfer_to_host_barrier(h->cmd);
        vkCmdSetEvent(h->cmd, ev, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT);
        HV_VK(vkEndCommandBuffer(h->cmd));
        submit(h, NULL, h->fence);
        int polls = 0;
        while (vkGetEventStatus(h->dev, ev) != VK_EVENT_SET && polls < 1000000) {
            polls++;
            sleep_us(50);
        }
        /* Read before any fence wait: the event is the app's only sync. */
        bad |= hv_compare(rb.ptr, src.model, (size_t)src.size, "event-poll: data read after the event");
        HV_VK(vkWaitForFences(h->dev, 1, &h->fence, VK_TRUE, UINT64_MAX));
        HV_VK(vkResetFences(h->dev, 1, &h->fence));
        memcpy(rb.model, src.model, (size_t)src.size);
    }
    vkDestroyEvent(h->dev, ev, NULL);
    hv_free(h, &src);
    hv_free(h, &rb);
    hv_fini(h);
    return bad;
}

/* The device waits for an event the host sets after the submit; the host
 * writes the data after the submit, then vkSetEvent releases the copy. */
static int event_host_set(hv *h, int argc, char **argv)
{
    (void)argc, (void)argv;
    int rc = hv_init(h, NULL);
    if (rc)
        return rc;
    hv_mem src, rb;
    hv_alloc(h, &src, 1u << 20, HV_SRC);
    hv_alloc(h, &rb, 1u << 20, HV_DST);
    VkEventCreateInfo eci = {.sType = VK_STRUCTURE_TYPE_EVENT_CREATE_INFO};
    VkEvent ev;
    HV_VK(vkCreateEvent(h->dev, &eci, NULL, &ev));
    int bad = 0;
    for (int f = 0; f < h->frames && !bad; f++) {
        HV_VK(vkResetEvent(h->dev, ev));
        hv_begin(h);
        host_to_transfer_barrier(h->cmd, ev);
        copy_all(h, &src, &rb);
        transfer_to_host_barrier(h->cmd);
        HV_VK(vkEndCommandBuffer(h->cmd));
        submit(h, NULL, h->fence);
        sleep_us(2000);
        hv_write(&src, 4096 * (VkDeviceSize)f, 200000, 500 + (uint64_t)f);
        HV_VK(vkSetEvent(h->dev, ev));
        HV_VK(vkWaitForFences(h->dev, 1, &h->fence, VK_TRUE, UINT64_MAX));
        HV_VK(vkResetFences(h->dev, 1, &h->fence));
        bad |= hv_compare(rb.ptr, src.model, (size_t)src.size,
                          "event-host-set: the device's copy of data written before vkSetEvent");
        memcpy(rb.model, src.model, (size_t)src.size);
    }
    vkDestroyEvent(h->dev, ev, NULL);
    hv_free(h, &src);
    hv_free(h, &rb);
    hv_fini(h);
    return bad;
}

/* Timeline: the submit waits for value 2k+1 (signalled by the host after it
 * wrote the data) and signals 2k+2 after its copy; the host polls the
 * counter (even frames) or waits with vkWaitSemaphores (odd frames). */
static int timeline(hv *h, int argc, char **argv)
{
    (void)argc, (void)argv;
    hv_opts o = {NULL, 0, 1, NULL};
    int rc = hv_init(h, &o);
    if (rc)
        return rc;
    hv_mem src, rb;
    hv_alloc(h, &src, 1u << 20, HV_SRC);
    hv_alloc(h, &rb, 1u << 20, HV_DST);
    VkSemaphoreTypeCreateInfo tci = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
                                     .semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE, .initialValue = 0};
    VkSemaphoreCreateInfo sci = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, .pNext = &tci};
    VkSemaphore sem;
    HV_VK(vkCreateSemaphore(h->dev, &sci, NULL, &sem));
    int bad = 0;
    for (int f = 0; f < h->frames && !bad; f++) {
        uint64_t go = 2 * (uint64_t)f + 1, done = go + 1;
        hv_begin(h);
        copy_all(h, &src, &rb);
        transfer_to_host_barrier(h->cmd);
        HV_VK(vkEndCommandBuffer(h->cmd));
        VkPipelineStageFlags stage = VK_PIPELINE_STAGE_TRANSFER_BIT;
        VkTimelineSemaphoreSubmitInfo ts = {.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
                                            .waitSemaphoreValueCount = 1, .pWaitSemaphoreValues = &go,
                                            .signalSemaphoreValueCount = 1, .pSignalSemaphoreValues = &done};
        VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .pNext = &ts,
                           .waitSemaphoreCount = 1, .pWaitSemaphores = &sem, .pWaitDstStageMask = &stage,
                           .commandBufferCount = 1, .pCommandBuffers = &h->cmd,
                           .signalSemaphoreCount = 1, .pSignalSemaphores = &sem};
        HV_VK(vkQueueSubmit(h->queue, 1, &si, VK_NULL_HANDLE));
        hv_write(&src, 8192 * (VkDeviceSize)f + 7, 150000, 700 + (uint64_t)f);
        VkSemaphoreSignalInfo sig = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_SIGNAL_INFO,
                                     .semaphore = sem, .value = go};
        HV_VK(vkSignalSemaphore(h->dev, &sig));
        if (f % 2 == 0) {
            uint64_t v = 0;
            int polls = 0;
            while (v < done && polls++ < 1000000) {
                HV_VK(vkGetSemaphoreCounterValue(h->dev, sem, &v));
                if (v < done)
                    sleep_us(50);
            }
        } else {
            VkSemaphoreWaitInfo wi = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO,
                                      .semaphoreCount = 1, .pSemaphores = &sem, .pValues = &done};
            HV_VK(vkWaitSemaphores(h->dev, &wi, UINT64_MAX));
        }
        bad |= hv_compare(rb.ptr, src.model, (size_t)src.size,
                          f % 2 ? "timeline: data after vkWaitSemaphores"
                                : "timeline: data after polling the counter");
        memcpy(rb.model, src.model, (size_t)src.size);
    }
    vkDeviceWaitIdle(h->dev);
    vkDestroySemaphore(h->dev, sem, NULL);
    hv_free(h, &src);
    hv_free(h, &rb);
    hv_fini(h);
    return bad;
}

/* A second device on the same GPU that imports the fence's payload and
 * waits on it: what an interop partner does with an opaque descriptor. */
typedef struct fence_peer {
    VkDevice dev;
    VkFence fence;
    PFN_vkImportFenceFdKHR import_fd;
} fence_peer;

static int peer_open(hv *h, fence_peer *p)
{
    static const char *const exts[] = {"VK_KHR_external_fence_fd"};
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                   .queueFamilyIndex = h->family, .queueCount = 1, .pQueuePriorities = &prio};
    VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, .queueCreateInfoCount = 1,
                              .pQueueCreateInfos = &qci, .enabledExtensionCount = 1,
                              .ppEnabledExtensionNames = exts};
    if (vkCreateDevice(h->phys, &dci, NULL, &p->dev) != VK_SUCCESS)
        return -1;
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    HV_VK(vkCreateFence(p->dev, &fci, NULL, &p->fence));
    p->import_fd = (PFN_vkImportFenceFdKHR)vkGetDeviceProcAddr(p->dev, "vkImportFenceFdKHR");
    return p->import_fd ? 0 : -1;
}

/* Waits for the exported payload `fd` (of type `type`) outside the
 * exporting device: a sync file is polled, an opaque descriptor imported
 * into the peer device and waited on there. */
static void wait_outside(fence_peer *p, VkExternalFenceHandleTypeFlagBits type, int fd)
{
    if (type == VK_EXTERNAL_FENCE_HANDLE_TYPE_SYNC_FD_BIT) {
        if (fd < 0)
            return; /* already signalled */
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        while (poll(&pf, 1, -1) < 0)
            ;
        close(fd);
        return;
    }
    VkImportFenceFdInfoKHR ii = {.sType = VK_STRUCTURE_TYPE_IMPORT_FENCE_FD_INFO_KHR, .fence = p->fence,
                                 .flags = VK_FENCE_IMPORT_TEMPORARY_BIT, .handleType = type, .fd = fd};
    HV_VK(p->import_fd(p->dev, &ii)); /* the peer owns fd now */
    HV_VK(vkWaitForFences(p->dev, 1, &p->fence, VK_TRUE, UINT64_MAX));
    HV_VK(vkResetFences(p->dev, 1, &p->fence)); /* ends the temporary import */
}

/* The application learns that its copy finished outside the device that
 * ran it: the submit's fence, created exportable, is exported (as a sync
 * file the host polls where the driver offers one, else as an opaque
 * descriptor a second device imports and waits on), and then it reads what
 * the device wrote, with no wait on the first device in between
 * (compositors and interop code do this). */
static int fence_export(hv *h, int argc, char **argv)
{
    (void)argc, (void)argv;
    static const char *const exts[] = {"VK_KHR_external_fence_fd"};
    hv_opts o = {exts, 1, 0, NULL};
    int rc = hv_init(h, &o);
    if (rc)
        return rc;
    PFN_vkGetFenceFdKHR get_fd = (PFN_vkGetFenceFdKHR)vkGetDeviceProcAddr(h->dev, "vkGetFenceFdKHR");
    VkExternalFenceHandleTypeFlagBits type = 0;
    const VkExternalFenceHandleTypeFlagBits types[] = {VK_EXTERNAL_FENCE_HANDLE_TYPE_SYNC_FD_BIT,
                                                       VK_EXTERNAL_FENCE_HANDLE_TYPE_OPAQUE_FD_BIT};
    for (int i = 0; i < 2 && !type; i++) {
        VkPhysicalDeviceExternalFenceInfo efi = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_FENCE_INFO,
                                                 .handleType = types[i]};
        VkExternalFenceProperties efp = {.sType = VK_STRUCTURE_TYPE_EXTERNAL_FENCE_PROPERTIES};
        vkGetPhysicalDeviceExternalFenceProperties(h->phys, &efi, &efp);
        VkExternalFenceFeatureFlags need = VK_EXTERNAL_FENCE_FEATURE_EXPORTABLE_BIT;
        if (types[i] == VK_EXTERNAL_FENCE_HANDLE_TYPE_OPAQUE_FD_BIT)
            need |= VK_EXTERNAL_FENCE_FEATURE_IMPORTABLE_BIT;
        if ((efp.externalFenceFeatures & need) == need)
            type = types[i];
    }
    fence_peer peer = {0};
    if (!type || !get_fd || (type == VK_EXTERNAL_FENCE_HANDLE_TYPE_OPAQUE_FD_BIT && peer_open(h, &peer))) {
        fprintf(stderr, "%s: the device exports no fence payload it can import\n", hv_argv0);
        if (peer.dev)
            vkDestroyDevice(peer.dev, NULL);
        hv_fini(h);
        return HV_SKIP;
    }
    if (getenv("HV_VERBOSE"))
        fprintf(stderr, "%s: fence-export: %s\n", hv_argv0,
                type == VK_EXTERNAL_FENCE_HANDLE_TYPE_SYNC_FD_BIT ? "sync file, polled" : "opaque, a peer waits");
    VkExportFenceCreateInfo exp = {.sType = VK_STRUCTURE_TYPE_EXPORT_FENCE_CREATE_INFO, .handleTypes = type};
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO, .pNext = &exp};
    VkFence fence;
    HV_VK(vkCreateFence(h->dev, &fci, NULL, &fence));
    hv_mem src, dst;
    hv_alloc(h, &src, 1u << 20, HV_SRC);
    hv_alloc(h, &dst, 1u << 20, HV_DST);
    int bad = 0;
    for (int f = 0; f < h->frames && !bad; f++) {
        for (int k = 0; k < 5; k++)
            hv_write(&src, (VkDeviceSize)k * 200000 + (VkDeviceSize)f * 17, 7000, 3000 + (uint64_t)(f * 5 + k));
        hv_begin(h);
        copy_all(h, &src, &dst);
        hv_end(h);
        submit(h, NULL, fence);
        VkFenceGetFdInfoKHR gi = {.sType = VK_STRUCTURE_TYPE_FENCE_GET_FD_INFO_KHR, .fence = fence,
                                  .handleType = type};
        int fd = -1;
        HV_VK(get_fd(h->dev, &gi, &fd));
        wait_outside(&peer, type, fd);
        bad |= hv_compare(dst.ptr, src.model, (size_t)src.size, "fence-export: the device's copy, read after "
                          "waiting on the exported fence outside its device");
        memcpy(dst.model, src.model, (size_t)src.size);
        /* The work is done (the exported payload said so): the fence is
         * no longer in use. */
        HV_VK(vkResetFences(h->dev, 1, &fence));
    }
    vkDestroyFence(h->dev, fence, NULL);
    hv_free(h, &src);
    hv_free(h, &dst);
    if (peer.dev) {
        vkDestroyFence(peer.dev, peer.fence, NULL);
        vkDestroyDevice(peer.dev, NULL);
    }
    hv_fini(h);
    return bad;
}

/* A crash handler's markers: each frame's command buffer writes a marker
 * into a mapped buffer before its copy and another after it. When a wait
 * reports the device lost, the application reads the markers and the
 * copy's destination through its mappings, to see how far the device got,
 * and stops. A real loss cannot be caused here: under `memtrack record`,
 * MEMTRACK_TEST_LOSE_DEVICE=k makes the k-th wait report one after the
 * work completed, so the markers and the copy must show that frame done.
 * Without it every wait succeeds and each frame is checked as usual. */
static int device_lost(hv *h, int argc, char **argv)
{
    (void)argc, (void)argv;
    int rc = hv_init(h, NULL);
    if (rc)
        return rc;
    hv_mem src, dst, marks;
    hv_alloc(h, &src, 1u << 20, HV_SRC);
    hv_alloc(h, &dst, 1u << 20, HV_DST);
    hv_alloc(h, &marks, 4096, HV_DST);
    int bad = 0, lost = 0;
    for (int f = 0; f < h->frames && !bad && !lost; f++) {
        for (int k = 0; k < 4; k++)
            hv_write(&src, (VkDeviceSize)k * 250000 + (VkDeviceSize)f * 13, 6000, 4000 + (uint64_t)(f * 4 + k));
        uint32_t before = 0x1000u + (uint32_t)f, after = 0x2000u + (uint32_t)f;
        hv_begin(h);
        vkCmdFillBuffer(h->cmd, marks.buf, 0, 4, before);
        copy_all(h, &src, &dst);
        VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                              .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
                              .dstAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT};
        vkCmdPipelineBarrier(h->cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &mb,
                             0, NULL, 0, NULL);
        vkCmdFillBuffer(h->cmd, marks.buf, 4, 4, after);
        hv_end(h);
        submit(h, NULL, h->fence);
        VkResult r = vkWaitForFences(h->dev, 1, &h->fence, VK_TRUE, UINT64_MAX);
        if (r == VK_ERROR_DEVICE_LOST) {
            lost = 1;
            fprintf(stderr, "%s: device-lost: the device was reported lost at frame %d\n", hv_argv0, f + 1);
        } else if (r != VK_SUCCESS) {
            hv_die("vkWaitForFences failed (%d)", (int)r);
        } else {
            HV_VK(vkResetFences(h->dev, 1, &h->fence));
        }
        uint32_t got[2];
        memcpy(got, marks.ptr, sizeof got);
        if (got[0] != before || got[1] != after) {
            fprintf(stderr, "%s: device-lost: markers 0x%x 0x%x, expected 0x%x 0x%x%s\n", hv_argv0, got[0],
                    got[1], before, after, lost ? " (read after the loss)" : "");
            bad = 1;
        }
        bad |= hv_compare(dst.ptr, src.model, (size_t)src.size,
                          lost ? "device-lost: the copy, read after the loss" : "device-lost: the copy");
        memcpy(dst.model, src.model, (size_t)src.size);
    }
    /* The real device is fine (a reported loss was the test's): tear down
     * as usual. */
    hv_free(h, &src);
    hv_free(h, &dst);
    hv_free(h, &marks);
    hv_fini(h);
    return bad;
}

const hv_behaviour hv_sync_behaviours[] = {
    {"event-poll", "the device sets an event, the host polls vkGetEventStatus and reads", event_poll},
    {"event-host-set", "vkSetEvent releases device work reading data written after the submit",
     event_host_set},
    {"timeline", "timeline semaphores: host signal, counter polling, vkWaitSemaphores", timeline},
    {"fence-export", "the submit's fence exported (a sync file polled, or an opaque descriptor a second "
     "device waits on), then the host reads (where the device exports fences)", fence_export},
    {"device-lost", "markers and a copy read through the mappings after a wait reports the device lost "
     "(MEMTRACK_TEST_LOSE_DEVICE=k reports it at the k-th wait)", device_lost},
    {NULL, NULL, NULL},
};
