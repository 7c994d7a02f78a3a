/* Which device work may still be running: submits the host has not yet seen
 * complete.
 *
 * Every submit gets a serial, per device, and its queue remembers the last
 * one. The host learns that work completed through a fence (waited on, or
 * found signalled), an idle wait (queue or device), or a timeline semaphore
 * value (waited on, or read with vkGetSemaphoreCounterValue) that a submit
 * signals: each moves its queue's `completed` serial forward, since a queue
 * completes its submits in order. Anything the layer cannot attribute (a
 * wait for any of several fences, binary semaphores, events) moves nothing:
 * the answer errs towards "still running", which only changes how a verify
 * mismatch in device-writable bytes is labelled, never what is captured.
 *
 * All state is under dev->lock. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "layer.h"

/* A timeline semaphore value a submit will signal. */
typedef struct lt_signal {
    uint64_t value, serial;
    lt_queue *queue;
} lt_signal;

#define SIGNALS_KEPT 16 /* per semaphore: more pending values than this are rare */

typedef struct lt_timeline {
    lt_signal pending[SIGNALS_KEPT];
    unsigned n;
} lt_timeline;

typedef struct lt_fence {
    uint64_t serial;
    lt_queue *queue;
} lt_fence;

lt_queue *lt_queue_of(lt_device *dev, VkQueue q)
{
    return lt_map_get(&dev->queues, (uint64_t)(uintptr_t)q);
}

static void note_signal(lt_device *dev, lt_queue *q, uint64_t serial, VkSemaphore sem, uint64_t value)
{
    if (!sem || !value)
        return; /* a binary semaphore (value ignored) or nothing to learn */
    lt_timeline *t = lt_map_get(&dev->timelines, (uint64_t)sem);
    if (!t) {
        t = calloc(1, sizeof *t);
        if (!t || lt_map_put(&dev->timelines, (uint64_t)sem, t) != 0) {
            free(t);
            return;
        }
    }
    if (t->n == SIGNALS_KEPT) { /* forget the oldest: it stays "running" */
        memmove(t->pending, t->pending + 1, (SIGNALS_KEPT - 1) * sizeof t->pending[0]);
        t->n--;
    }
    t->pending[t->n++] = (lt_signal){value, serial, q};
}

static void note_fence(lt_device *dev, lt_queue *q, uint64_t serial, VkFence fence)
{
    if (!fence)
        return;
    lt_fence *f = lt_map_get(&dev->fences, (uint64_t)fence);
    if (!f) {
        f = calloc(1, sizeof *f);
        if (!f || lt_map_put(&dev->fences, (uint64_t)fence, f) != 0) {
            free(f);
            return;
        }
    }
    f->serial = serial;
    f->queue = q;
}

static void completed(lt_queue *q, uint64_t serial)
{
    if (q && serial > q->completed)
        q->completed = serial;
}

void lt_inflight_submit(lt_device *dev, VkQueue queue, uint32_t n, const VkSubmitInfo *s, VkFence fence)
{
    lt_queue *q = lt_queue_of(dev, queue);
    if (!q)
        return;
    uint64_t serial = q->last_submit = ++dev->submit_serial;
    for (uint32_t i = 0; i < n; i++) {
        const VkTimelineSemaphoreSubmitInfo *ts = NULL;
        for (const VkBaseInStructure *p = s[i].pNext; p; p = p->pNext)
            if (p->sType == VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO)
                ts = (const VkTimelineSemaphoreSubmitInfo *)p;
        for (uint32_t k = 0; ts && k < s[i].signalSemaphoreCount && k < ts->signalSemaphoreValueCount; k++)
            note_signal(dev, q, serial, s[i].pSignalSemaphores[k], ts->pSignalSemaphoreValues[k]);
    }
    note_fence(dev, q, serial, fence);
}

void lt_inflight_submit2(lt_device *dev, VkQueue queue, uint32_t n, const VkSubmitInfo2 *s, VkFence fence)
{
    lt_queue *q = lt_queue_of(dev, queue);
    if (!q)
        return;
    uint64_t serial = q->last_submit = ++dev->submit_serial;
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t k = 0; k < s[i].signalSemaphoreInfoCount; k++)
            note_signal(dev, q, serial, s[i].pSignalSemaphoreInfos[k].semaphore,
                        s[i].pSignalSemaphoreInfos[k].value);
    note_fence(dev, q, serial, fence);
}

void lt_inflight_fences_done(lt_device *dev, uint32_t n, const VkFence *fences, int all)
{
    if (!all && n != 1)
        return; /* "any of these": which one is unknown */
    for (uint32_t i = 0; i < n; i++) {
        lt_fence *f = lt_map_get(&dev->fences, (uint64_t)fences[i]);
        if (f)
            completed(f->queue, f->serial);
    }
}

void lt_inflight_timeline_reached(lt_device *dev, VkSemaphore sem, uint64_t value)
{
    lt_timeline *t = lt_map_get(&dev->timelines, (uint64_t)sem);
    if (!t)
        return;
    unsigned o = 0;
    for (unsigned i = 0; i < t->n; i++) {
        if (t->pending[i].value <= value)
            completed(t->pending[i].queue, t->pending[i].serial);
        else
            t->pending[o++] = t->pending[i];
    }
    t->n = o;
}

void lt_inflight_queue_idle(lt_device *dev, VkQueue queue)
{
    lt_queue *q = lt_queue_of(dev, queue);
    if (q)
        q->completed = q->last_submit;
}

static void idle_one(void *val, void *arg)
{
    (void)arg;
    lt_queue *q = val;
    q->completed = q->last_submit;
}

void lt_inflight_device_idle(lt_device *dev) { lt_map_each(&dev->queues, idle_one, NULL); }

static void count_running(void *val, void *arg)
{
    const lt_queue *q = val;
    *(uint64_t *)arg += q->last_submit > q->completed;
}

uint64_t lt_inflight_running(lt_device *dev)
{
    uint64_t n = 0;
    lt_map_each(&dev->queues, count_running, &n);
    return n;
}

static void free_one(void *val, void *arg)
{
    (void)arg;
    free(val);
}

void lt_inflight_free(lt_device *dev)
{
    lt_map_each(&dev->queues, free_one, NULL);
    lt_map_each(&dev->fences, free_one, NULL);
    lt_map_each(&dev->timelines, free_one, NULL);
    lt_map_free(&dev->queues);
    lt_map_free(&dev->fences);
    lt_map_free(&dev->timelines);
}
