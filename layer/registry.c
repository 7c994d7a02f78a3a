/* Instances and devices by dispatch key.
 *
 * Dispatchable handles start with the loader's dispatch pointer, which is the
 * same for an instance and its physical devices, and for a device and its
 * queues and command buffers: it is the key. No fixed cap: a hash map under
 * a read-write lock (lookups on every hook are reads). The lock is never
 * taken while a device lock is held. */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>

#include "layer.h"

static pthread_rwlock_t g_lock = PTHREAD_RWLOCK_INITIALIZER;
static lt_map g_instances, g_devices;

static uint64_t key_of(const void *handle) { return (uint64_t)(uintptr_t) * (void *const *)handle; }

lt_instance *lt_instance_from(const void *handle)
{
    if (!handle)
        return NULL;
    pthread_rwlock_rdlock(&g_lock);
    lt_instance *r = lt_map_get(&g_instances, key_of(handle));
    pthread_rwlock_unlock(&g_lock);
    return r;
}

lt_device *lt_device_from(const void *handle)
{
    if (!handle)
        return NULL;
    pthread_rwlock_rdlock(&g_lock);
    lt_device *r = lt_map_get(&g_devices, key_of(handle));
    pthread_rwlock_unlock(&g_lock);
    return r;
}

int lt_registry_add_instance(lt_instance *inst)
{
    pthread_rwlock_wrlock(&g_lock);
    int rc = lt_map_put(&g_instances, (uint64_t)(uintptr_t)inst->key, inst);
    pthread_rwlock_unlock(&g_lock);
    return rc;
}

int lt_registry_add_device(lt_device *dev)
{
    pthread_rwlock_wrlock(&g_lock);
    int rc = lt_map_put(&g_devices, (uint64_t)(uintptr_t)dev->key, dev);
    pthread_rwlock_unlock(&g_lock);
    return rc;
}

void lt_registry_remove_instance(lt_instance *inst)
{
    pthread_rwlock_wrlock(&g_lock);
    if (lt_map_get(&g_instances, (uint64_t)(uintptr_t)inst->key) == inst)
        lt_map_del(&g_instances, (uint64_t)(uintptr_t)inst->key);
    pthread_rwlock_unlock(&g_lock);
}

size_t lt_registry_remove_device(lt_device *dev)
{
    pthread_rwlock_wrlock(&g_lock);
    if (lt_map_get(&g_devices, (uint64_t)(uintptr_t)dev->key) == dev)
        lt_map_del(&g_devices, (uint64_t)(uintptr_t)dev->key);
    size_t left = g_devices.live;
    pthread_rwlock_unlock(&g_lock);
    return left;
}

static void stop_capturing(void *val, void *arg)
{
    (void)arg;
    ((lt_device *)val)->capture = 0;
}

void lt_registry_after_fork(void)
{
    /* Only the forking thread exists in the child: a lock another thread
     * held at the fork would never be released. The parent's devices are
     * the parent's: in the child they pass everything through. Their locks
     * may be held for the same reason, which is why passing through takes
     * none. */
    pthread_rwlock_t fresh = PTHREAD_RWLOCK_INITIALIZER;
    memcpy(&g_lock, &fresh, sizeof fresh);
    lt_map_each(&g_devices, stop_capturing, NULL);
}
