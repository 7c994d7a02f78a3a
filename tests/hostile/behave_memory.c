/* Behaviours: what the application does to its mappings and memories — its
 * own mprotect and madvise, writes through /proc/self/mem, maps at an
 * offset, device writes while unmapped through a buffer it then destroys,
 * external memory (exported, imported from an fd, imported host pointers),
 * and many small mapped allocations. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hv.h"

static uintptr_t page_up(uintptr_t a) { return (a + 4095) & ~(uintptr_t)4095; }

/* ---- the app's own mprotect ------------------------------------------- */

/* The app's own SIGSEGV handler for pages it protected itself, [g_trap_lo,
 * g_trap_hi): it counts the fault and makes the page read-write, so the
 * access goes through. Any other fault is a crash. */
static unsigned char *g_trap_lo, *g_trap_hi;
static volatile sig_atomic_t g_trap_hits;

static void trap_handler(int sig, siginfo_t *si, void *uc)
{
    (void)sig, (void)uc;
    uintptr_t a = (uintptr_t)si->si_addr;
    if (g_trap_lo && a >= (uintptr_t)g_trap_lo && a < (uintptr_t)g_trap_hi) {
        mprotect((void *)(a & ~(uintptr_t)4095), 4096, PROT_READ | PROT_WRITE);
        g_trap_hits++;
        return;
    }
    signal(SIGSEGV, SIG_DFL);
}

/* Makes trap_handler the app's SIGSEGV handler, saving the one before. */
static void trap_install(struct sigaction *old)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = trap_handler;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGSEGV, &sa, old);
}

static int app_mprotect(hv *h, int argc, char **argv)
{
    (void)argc, (void)argv;
    int rc = hv_init(h, NULL);
    if (rc)
        return rc;
    hv_mem src, rb;
    hv_alloc(h, &src, 1u << 20, HV_SRC);
    hv_alloc(h, &rb, 1u << 20, HV_DST);
    unsigned char *lo = (unsigned char *)page_up((uintptr_t)src.ptr);
    size_t span = (1u << 20) - 8192;
    VkDeviceSize base = (VkDeviceSize)(lo - src.ptr);
    int bad = 0;
    for (int f = 0; f < h->frames && !bad; f++) {
        /* Read-only, then writable again, then written. */
        if (mprotect(lo, span, PROT_READ) != 0 || mprotect(lo, span, PROT_READ | PROT_WRITE) != 0) {
            fprintf(stderr, "%s: mprotect on the mapping: %s (skipped)\n", hv_argv0, strerror(errno));
            hv_free(h, &src);
            hv_free(h, &rb);
            hv_fini(h);
            return HV_SKIP;
        }
        for (int k = 0; k < 30; k++)
            hv_write(&src, base + (VkDeviceSize)k * 30000 + (VkDeviceSize)f, 500, (uint64_t)(f * 31 + k));
        /* Writable already, made writable again (no-op for the app): still tracked. */
        mprotect(lo + 65536, 65536, PROT_READ | PROT_WRITE);
        hv_write(&src, base + 65536 + 100, 3000, 900 + (uint64_t)f);
        /* A page the app makes read-only on purpose: its own handler must get
         * the write fault, once, and the write must then go through. */
        struct sigaction old;
        trap_install(&old);
        unsigned char *ro = lo + 4096 * (size_t)(10 + f);
        g_trap_lo = ro;
        g_trap_hi = ro + 4096;
        int hits = g_trap_hits;
        mprotect(ro, 4096, PROT_READ);
        hv_write(&src, (VkDeviceSize)(ro - src.ptr) + 8, 64, 4242 + (uint64_t)f);
        sigaction(SIGSEGV, &old, NULL);
        g_trap_lo = g_trap_hi = NULL;
        if (g_trap_hits != hits + 1) {
            fprintf(stderr, "%s: the app's read-only page faulted %d times, expected 1\n", hv_argv0,
                    (int)(g_trap_hits - hits));
            bad = 1;
        }
        bad |= hv_gpu_check(h, &src, &rb, "app-mprotect: GPU copy");
    }
    hv_free(h, &src);
    hv_free(h, &rb);
    hv_fini(h);
    return bad;
}

/* ---- pages the app guards against any access --------------------------- */

/* The app makes part of its mapping PROT_NONE (a guard of its own, as a
 * layer below ours or a runtime may) while submits read the rest. Any fault
 * there is one the app did not make: a capture reading the guarded pages
 * ran the app's handler. The handler counts it and lets the access through,
 * so that the run reports it instead of dying (trap_handler). */
static int app_guard_pages(hv *h, int argc, char **argv)
{
    (void)argc, (void)argv;
    int rc = hv_init(h, NULL);
    if (rc)
        return rc;
    hv_mem src, rb;
    hv_alloc(h, &src, 1u << 20, HV_SRC);
    hv_alloc(h, &rb, 1u << 20, HV_DST);
    unsigned char *lo = (unsigned char *)page_up((uintptr_t)src.ptr) + 64 * 4096;
    size_t span = 16 * 4096;
    VkDeviceSize glo = (VkDeviceSize)(lo - src.ptr), ghi = glo + span;
    struct sigaction old;
    trap_install(&old);
    /* The submit reads around the guarded pages, never them. */
    VkBufferCopy around[2] = {{.srcOffset = 0, .dstOffset = 0, .size = glo},
                              {.srcOffset = ghi, .dstOffset = ghi, .size = src.size - ghi}};
    int bad = 0;
    for (int f = 0; f < h->frames && !bad; f++) {
        for (int k = 0; k < 12; k++) /* some of them into the pages guarded next */
            hv_write(&src, (VkDeviceSize)k * 80000 + (VkDeviceSize)f * 7, 3000, 700 + (uint64_t)(f * 12 + k));
        hv_write(&src, glo + 4096 * (VkDeviceSize)(f % 16) + 100, 2000, 800 + (uint64_t)f);
        int hits = g_trap_hits;
        g_trap_lo = lo;
        g_trap_hi = lo + span;
        if (mprotect(lo, span, PROT_NONE) != 0) {
            fprintf(stderr, "%s: mprotect(PROT_NONE) on the mapping: %s (skipped)\n", hv_argv0, strerror(errno));
            sigaction(SIGSEGV, &old, NULL);
            hv_free(h, &src);
            hv_free(h, &rb);
            hv_fini(h);
            return HV_SKIP;
        }
        hv_begin(h);
        vkCmdCopyBuffer(h->cmd, src.buf, rb.buf, 2, around);
        hv_end(h);
        hv_submit_wait(h);
        bad |= hv_compare(rb.ptr, src.model, (size_t)glo, "app-guard-pages: GPU copy before the guard");
        bad |= hv_compare(rb.ptr + ghi, src.model + ghi, (size_t)(src.size - ghi),
                          "app-guard-pages: GPU copy after the guard");
        mprotect(lo, span, PROT_READ | PROT_WRITE);
        g_trap_lo = g_trap_hi = NULL;
        memcpy(rb.model, rb.ptr, (size_t)rb.size);
        if (g_trap_hits != hits) {
            fprintf(stderr, "%s: app-guard-pages: the app's handler saw %d faults on pages it guarded and "
                    "never touched\n", hv_argv0, (int)(g_trap_hits - hits));
            bad = 1;
        }
    }
    sigaction(SIGSEGV, &old, NULL);
    bad |= hv_compare(src.ptr, src.model, (size_t)src.size, "app-guard-pages: the app reads back its writes");
    bad |= hv_gpu_check(h, &src, &rb, "app-guard-pages: GPU copy of everything");
    hv_free(h, &src);
    hv_free(h, &rb);
    hv_fini(h);
    return bad;
}

/* ---- the app's own madvise -------------------------------------------- */

static int app_madvise(hv *h, int argc, char **argv)
{
    (void)argc, (void)argv;
    int rc = hv_init(h, NULL);
    if (rc)
        return rc;
    hv_mem src, rb;
    hv_alloc(h, &src, 1u << 20, HV_SRC);
    hv_alloc(h, &rb, 1u << 20, HV_DST);
    unsigned char *lo = (unsigned char *)page_up((uintptr_t)src.ptr);
    VkDeviceSize base = (VkDeviceSize)(lo - src.ptr);
    int bad = 0, advised = 0;
    static const int advice[] = {MADV_DONTNEED, MADV_FREE, MADV_DONTNEED};
    for (int f = 0; f < h->frames && !bad; f++) {
        hv_write(&src, base, 256 * 1024, 50 + (uint64_t)f);
        bad |= hv_gpu_check(h, &src, &rb, "app-madvise: GPU copy before");
        /* Drop 64 pages. Whatever the kernel does to them (private memory
         * reads back as zeros, shared memory keeps its content, MADV_FREE
         * may do either), the app now reads that content and relies on the
         * device seeing the same. */
        unsigned char *p = lo + 4096 * (size_t)(f % 4);
        if (madvise(p, 64 * 4096, advice[f % 3]) == 0) {
            advised++;
            memcpy(src.model + (p - src.ptr), p, 64 * 4096);
        }
        hv_write(&src, base + 300000, 1000, 7 + (uint64_t)f);
        bad |= hv_gpu_check(h, &src, &rb, "app-madvise: GPU copy after madvise");
    }
    hv_free(h, &src);
    hv_free(h, &rb);
    hv_fini(h);
    if (!advised && !bad) {
        fprintf(stderr, "%s: the kernel refused madvise on this mapping (skipped)\n", hv_argv0);
        return HV_SKIP;
    }
    return bad;
}

/* ---- /proc/self/mem ------------------------------------------------------ */

static int proc_self_mem(hv *h, int argc, char **argv)
{
    (void)argc, (void)argv;
    int rc = hv_init(h, NULL);
    if (rc)
        return rc;
    hv_mem src, rb;
    hv_alloc(h, &src, 1u << 20, HV_SRC);
    hv_alloc(h, &rb, 1u << 20, HV_DST);
    int fd = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "%s: /proc/self/mem: %s (skipped)\n", hv_argv0, strerror(errno));
        return HV_SKIP;
    }
    unsigned char buf[20000];
    int bad = 0;
    for (int f = 0; f < h->frames && !bad; f++) {
        VkDeviceSize off = 1000 + (VkDeviceSize)f * 50001;
        hv_pattern(buf, sizeof buf, 600 + (uint64_t)f);
        if (pwrite(fd, buf, sizeof buf, (off_t)(uintptr_t)(src.ptr + off)) != (ssize_t)sizeof buf) {
            fprintf(stderr, "%s: pwrite to /proc/self/mem: %s\n", hv_argv0, strerror(errno));
            bad = 1;
            break;
        }
        memcpy(src.model + off, buf, sizeof buf);
        lseek(fd, (off_t)(uintptr_t)(src.ptr + off + 100000), SEEK_SET);
        if (write(fd, buf, 5000) != 5000)
            bad = 1;
        memcpy(src.model + off + 100000, buf, 5000);
        bad |= hv_compare(src.ptr, src.model, (size_t)src.size, "proc-self-mem: the app's own view");
        bad |= hv_gpu_check(h, &src, &rb, "proc-self-mem: GPU copy");
    }
    close(fd);
    hv_free(h, &src);
    hv_free(h, &rb);
    hv_fini(h);
    return bad;
}

/* ---- a map at an offset ---------------------------------------------------- */

static int map_offset(hv *h, int argc, char **argv)
{
    (void)argc, (void)argv;
    int rc = hv_init(h, NULL);
    if (rc)
        return rc;
    hv_mem src, rb;
    hv_alloc(h, &src, 1u << 20, HV_SRC);
    hv_alloc(h, &rb, 1u << 20, HV_DST);
    hv_unmap(h, &src);
    int bad = 0;
    size_t align = h->props.limits.minMemoryMapAlignment;
    for (int f = 0; f < h->frames && !bad; f++) {
        VkDeviceSize off = 100 + (VkDeviceSize)f * 4000, size = 300000;
        void *p;
        HV_VK(vkMapMemory(h->dev, src.mem, off, size, 0, &p));
        if (((uintptr_t)p - off) % align != 0) {
            fprintf(stderr, "%s: vkMapMemory at offset %llu returned %p: (ptr - offset) is not "
                            "aligned to minMemoryMapAlignment (%zu)\n",
                    hv_argv0, (unsigned long long)off, p, align);
            bad = 1;
        }
        unsigned char *q = p;
        bad |= hv_compare(q, src.model + off, (size_t)size, "map-offset: content at map time");
        hv_pattern(src.model + off + 17, 200000, 31 + (uint64_t)f);
        memcpy(q + 17, src.model + off + 17, 200000);
        vkUnmapMemory(h->dev, src.mem);
        bad |= hv_gpu_check(h, &src, &rb, "map-offset: GPU copy");
    }
    hv_free(h, &src);
    hv_free(h, &rb);
    hv_fini(h);
    return bad;
}

/* ---- the usual upload: map, write, unmap, then submit ---------------------- */

/* Nothing of the staging memory is mapped at any submit: its content is
 * only ever seen by the capture at the unmap. */
static int upload_unmapped(hv *h, int argc, char **argv)
{
    (void)argc, (void)argv;
    int rc = hv_init(h, NULL);
    if (rc)
        return rc;
    hv_mem src, rb;
    hv_alloc(h, &src, 1u << 20, HV_SRC);
    hv_alloc(h, &rb, 1u << 20, HV_DST);
    int bad = 0;
    for (int f = 0; f < h->frames && !bad; f++) {
        if (!src.ptr)
            hv_map(h, &src);
        VkDeviceSize at = 4096 * (VkDeviceSize)(1 + 7 * f) + 123, len = 20000 + 1000 * (VkDeviceSize)f;
        hv_write(&src, at, len, 40 + (uint64_t)f);
        hv_unmap(h, &src);
        bad |= hv_gpu_check(h, &src, &rb, "upload-unmapped: GPU copy of the unmapped staging memory");
    }
    hv_free(h, &src);
    hv_free(h, &rb);
    hv_fini(h);
    return bad;
}

/* ---- device writes while unmapped, through a buffer destroyed since -------- */

static int gpu_write_unmapped(hv *h, int argc, char **argv)
{
    (void)argc, (void)argv;
    int rc = hv_init(h, NULL);
    if (rc)
        return rc;
    hv_mem src, rb;
    hv_alloc(h, &src, 1u << 20, HV_SRC);
    hv_alloc(h, &rb, 1u << 20, HV_DST);
    int bad = 0;
    for (int f = 0; f < h->frames && !bad; f++) {
        hv_write(&src, 5000, 10000, 3 + (uint64_t)f);
        hv_unmap(h, &src);
        /* A transient buffer the device writes through, over part of src. */
        VkBufferCreateInfo bci = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = 65536,
                                  .usage = VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                                  .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
        VkBuffer tmp;
        HV_VK(vkCreateBuffer(h->dev, &bci, NULL, &tmp));
        VkDeviceSize at = 131072 + (VkDeviceSize)f * 65536;
        HV_VK(vkBindBufferMemory(h->dev, tmp, src.mem, at));
        hv_begin(h);
        uint32_t value = 0x5a5a0000u | (uint32_t)f;
        vkCmdFillBuffer(h->cmd, tmp, 0, 65536, value);
        hv_end(h);
        hv_submit_wait(h);
        vkDestroyBuffer(h->dev, tmp, NULL);
        for (size_t i = 0; i < 65536; i += 4)
            memcpy(src.model + at + i, &value, 4);
        hv_map(h, &src);
        bad |= hv_compare(src.ptr, src.model, (size_t)src.size, "gpu-write-unmapped: the app's view");
        hv_write(&src, at + 100, 50, 99);
        bad |= hv_gpu_check(h, &src, &rb, "gpu-write-unmapped: GPU copy");
    }
    hv_free(h, &src);
    hv_free(h, &rb);
    hv_fini(h);
    return bad;
}

/* ---- many small mapped allocations (the driver's heap) ------------------- */

typedef struct small_job {
    hv_mem *m;
    int n, first, step, frame;
} small_job;

static void *small_writer(void *arg)
{
    small_job *j = arg;
    for (int i = j->first; i < j->n; i += j->step)
        for (VkDeviceSize off = 0; off + 100 < j->m[i].size; off += 1500)
            hv_write(&j->m[i], off + (VkDeviceSize)j->frame, 100, (uint64_t)(i * 1000 + j->frame) + off);
    return NULL;
}

static int heap_small(hv *h, int argc, char **argv)
{
    (void)argc, (void)argv;
    int rc = hv_init(h, NULL);
    if (rc)
        return rc;
    enum { N = 20 };
    hv_mem m[N], rb;
    for (int i = 0; i < N; i++)
        hv_alloc(h, &m[i], 12000 + (VkDeviceSize)i * 937, HV_SRC);
    hv_alloc(h, &rb, 64 * 1024, HV_DST);
    int bad = 0;
    for (int f = 0; f < h->frames && !bad; f++) {
        pthread_t th[3];
        small_job jobs[3];
        for (int t = 0; t < 3; t++) {
            jobs[t] = (small_job){m, N, t, 3, f};
            pthread_create(&th[t], NULL, small_writer, &jobs[t]);
        }
        for (int t = 0; t < 3; t++)
            pthread_join(th[t], NULL);
        for (int i = 0; i < N && !bad; i++)
            bad |= hv_gpu_check(h, &m[i], &rb, "heap-small: GPU copy");
    }
    for (int i = 0; i < N; i++)
        hv_free(h, &m[i]);
    hv_free(h, &rb);
    hv_fini(h);
    return bad;
}

/* ---- memory imported from a host pointer (VK_EXT_external_memory_host) ----- */

/* Imports [host, host+size) as src (a buffer bound over all of it). */
static void import_host(hv *h, hv_mem *src, unsigned char *host, size_t size)
{
    PFN_vkGetMemoryHostPointerPropertiesEXT props_of =
        (PFN_vkGetMemoryHostPointerPropertiesEXT)vkGetDeviceProcAddr(h->dev, "vkGetMemoryHostPointerPropertiesEXT");
    VkMemoryHostPointerPropertiesEXT hp = {.sType = VK_STRUCTURE_TYPE_MEMORY_HOST_POINTER_PROPERTIES_EXT};
    HV_VK(props_of(h->dev, VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT, host, &hp));
    uint32_t type = UINT32_MAX;
    for (uint32_t i = 0; i < 32 && type == UINT32_MAX; i++)
        if (hp.memoryTypeBits & (1u << i))
            type = i;
    if (type == UINT32_MAX)
        hv_die("no memory type for a host pointer");
    VkExternalMemoryBufferCreateInfo ebci = {.sType = VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO,
                                             .handleTypes = VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT};
    VkBufferCreateInfo bci = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .pNext = &ebci,
                              .size = size, .usage = HV_SRC, .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
    src->size = size;
    src->ptr = host;
    HV_VK(vkCreateBuffer(h->dev, &bci, NULL, &src->buf));
    VkImportMemoryHostPointerInfoEXT imp = {.sType = VK_STRUCTURE_TYPE_IMPORT_MEMORY_HOST_POINTER_INFO_EXT,
                                            .handleType = VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT,
                                            .pHostPointer = host};
    VkMemoryAllocateInfo mai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .pNext = &imp,
                                .allocationSize = size, .memoryTypeIndex = type};
    HV_VK(vkAllocateMemory(h->dev, &mai, NULL, &src->mem));
    HV_VK(vkBindBufferMemory(h->dev, src->buf, src->mem, 0));
}

/* A device with host-pointer imports, and `size` bytes of host memory. */
static int g_host_hugetlb; /* host_pointer's memory from MAP_HUGETLB */

static int host_init(hv *h)
{
    static const char *const exts[] = {"VK_KHR_external_memory", "VK_EXT_external_memory_host"};
    hv_opts o = {exts, 2, 0, NULL};
    return hv_init(h, &o);
}

static int host_setup(hv *h, size_t size, unsigned char **host)
{
    int rc = host_init(h);
    if (rc)
        return rc;
    *host = MAP_FAILED;
    if (g_host_hugetlb) {
        *host = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
        if (*host == MAP_FAILED)
            fprintf(stderr, "%s: no huge pages reserved here (%s): ordinary memory instead\n", hv_argv0,
                    strerror(errno));
    }
    if (*host == MAP_FAILED)
        *host = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (*host == MAP_FAILED)
        hv_die("mmap of host memory failed");
    return 0;
}

static void unimport_host(hv *h, hv_mem *src)
{
    vkDestroyBuffer(h->dev, src->buf, NULL);
    vkFreeMemory(h->dev, src->mem, NULL);
}

static int host_pointer(hv *h, int argc, char **argv)
{
    (void)argc, (void)argv;
    size_t size = g_host_hugetlb ? 2u << 20 : 1u << 20;
    unsigned char *host;
    int rc = host_setup(h, size, &host);
    if (rc)
        return rc;
    hv_mem src = {0};
    src.model = calloc(1, size);
    import_host(h, &src, host, size);
    hv_mem rb;
    hv_alloc(h, &rb, size, HV_DST);
    int bad = 0;
    for (int f = 0; f < h->frames && !bad; f++) {
        /* Written through the app's own pointer: never mapped. */
        for (int k = 0; k < 20; k++)
            hv_write(&src, (VkDeviceSize)k * 40000 + (VkDeviceSize)f * 3, 2000, (uint64_t)(f * 50 + k));
        bad |= hv_gpu_check(h, &src, &rb, "host-pointer: GPU copy of imported host memory");
    }
    unimport_host(h, &src);
    free(src.model);
    munmap(host, size);
    hv_free(h, &rb);
    hv_fini(h);
    return bad;
}

/* The same host memory imported again and again, each memory freed before
 * the next: every new memory starts with the content its predecessor had
 * (a capture layer that reuses what it knew of a freed memory must not
 * take it for what replay knows of the new one). */
/* The same on hugetlb memory (2 MiB pages), which the signal backend cannot
 * protect page by page: the capture must fall back, not kill the app. */
static int host_pointer_hugetlb(hv *h, int argc, char **argv)
{
    g_host_hugetlb = 1;
    return host_pointer(h, argc, argv);
}

static int host_pointer_reimport(hv *h, int argc, char **argv)
{
    (void)argc, (void)argv;
    size_t size = 1u << 20;
    unsigned char *host;
    int rc = host_setup(h, size, &host);
    if (rc)
        return rc;
    unsigned char *model = calloc(1, size);
    hv_pattern(host, size, 77);
    memcpy(model, host, size);
    hv_mem rb;
    hv_alloc(h, &rb, size, HV_DST);
    int bad = 0;
    for (int f = 0; f < h->frames && !bad; f++) {
        hv_mem src = {.model = model};
        import_host(h, &src, host, size);
        hv_write(&src, (VkDeviceSize)f * 4096 + 5, 100, (uint64_t)f);
        bad |= hv_gpu_check(h, &src, &rb, "host-pointer-reimport: GPU copy of the imported memory");
        unimport_host(h, &src);
    }
    free(model);
    munmap(host, size);
    hv_free(h, &rb);
    hv_fini(h);
    return bad;
}

/* Host memory that is a memfd mapped shared, imported from its pointer and
 * written through a second mapping of the memfd, by write(2) to it and by a
 * forked child: none of these writes touches the imported addresses, so
 * none raises a fault or a tracked write there. The capture must still see
 * them (memtrack scans such memory whole). */
static int host_pointer_shared(hv *h, int argc, char **argv)
{
    (void)argc, (void)argv;
    size_t size = 1u << 20;
    int rc = host_init(h);
    if (rc)
        return rc;
    int fd = memfd_create("hostile-shared", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, (off_t)size) != 0)
        hv_die("memfd failed");
    unsigned char *host = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    unsigned char *alias = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (host == MAP_FAILED || alias == MAP_FAILED)
        hv_die("mmap of the memfd failed");
    hv_mem src = {0};
    src.model = calloc(1, size);
    import_host(h, &src, host, size);
    hv_mem rb;
    hv_alloc(h, &rb, size, HV_DST);
    int bad = 0;
    unsigned char tmp[20000];
    for (int f = 0; f < h->frames && !bad; f++) {
        /* Its own pointer, then the second mapping. */
        hv_write(&src, (VkDeviceSize)f * 3 + 100, 2000, (uint64_t)f);
        hv_pattern(tmp, sizeof tmp, 300 + (uint64_t)f);
        memcpy(alias + 100000 + (size_t)f * 4096, tmp, sizeof tmp);
        memcpy(src.model + 100000 + (size_t)f * 4096, tmp, sizeof tmp);
        bad |= hv_gpu_check(h, &src, &rb, "host-pointer-shared: after a write through another mapping");
        hv_pattern(tmp, sizeof tmp, 500 + (uint64_t)f);
        if (pwrite(fd, tmp, sizeof tmp, 400000 + (off_t)f * 4096) != (ssize_t)sizeof tmp)
            hv_die("pwrite to the memfd failed");
        memcpy(src.model + 400000 + (size_t)f * 4096, tmp, sizeof tmp);
        bad |= hv_gpu_check(h, &src, &rb, "host-pointer-shared: after write(2) to the memfd");
        pid_t pid = fork();
        if (pid == 0) {
            hv_pattern(tmp, sizeof tmp, 700 + (uint64_t)f);
            memcpy(host + 700000 + (size_t)f * 4096, tmp, sizeof tmp);
            _exit(0);
        }
        int st;
        waitpid(pid, &st, 0);
        hv_pattern(tmp, sizeof tmp, 700 + (uint64_t)f);
        memcpy(src.model + 700000 + (size_t)f * 4096, tmp, sizeof tmp);
        bad |= hv_gpu_check(h, &src, &rb, "host-pointer-shared: after a forked child wrote it");
    }
    unimport_host(h, &src);
    free(src.model);
    munmap(alias, size);
    munmap(host, size);
    close(fd);
    hv_free(h, &rb);
    hv_fini(h);
    return bad;
}

/* ---- exported memory, written through another mapping and another process -- */

static int export_memory(hv *h, int argc, char **argv)
{
    (void)argc, (void)argv;
    static const char *const exts[] = {"VK_KHR_external_memory", "VK_KHR_external_memory_fd"};
    hv_opts o = {exts, 2, 0, NULL};
    int rc = hv_init(h, &o);
    if (rc)
        return rc;
    PFN_vkGetMemoryFdKHR get_fd = (PFN_vkGetMemoryFdKHR)vkGetDeviceProcAddr(h->dev, "vkGetMemoryFdKHR");
    const VkExternalMemoryHandleTypeFlagBits ht = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT;
    VkExternalMemoryBufferCreateInfo ebci = {.sType = VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO,
                                             .handleTypes = ht};
    VkExportMemoryAllocateInfo exp = {.sType = VK_STRUCTURE_TYPE_EXPORT_MEMORY_ALLOCATE_INFO,
                                      .handleTypes = ht};
    hv_mem a, b, rb;
    size_t size = 1u << 20;
    hv_alloc_ex(h, &a, size, HV_SRC, &exp, &ebci, 1);
    VkMemoryGetFdInfoKHR gi = {.sType = VK_STRUCTURE_TYPE_MEMORY_GET_FD_INFO_KHR, .memory = a.mem,
                               .handleType = ht};
    int fd = -1;
    HV_VK(get_fd(h->dev, &gi, &fd));
    VkImportMemoryFdInfoKHR imp = {.sType = VK_STRUCTURE_TYPE_IMPORT_MEMORY_FD_INFO_KHR,
                                   .handleType = ht, .fd = fd};
    hv_alloc_ex(h, &b, size, HV_SRC, &imp, &ebci, 1);
    hv_alloc(h, &rb, size, HV_DST);
    int bad = 0;
    for (int f = 0; f < h->frames && !bad; f++) {
        /* Through the importing memory's mapping: the same bytes as a's. */
        hv_pattern(a.model + 1000, 50000, 70 + (uint64_t)f);
        memcpy(b.ptr + 1000, a.model + 1000, 50000);
        bad |= hv_gpu_check(h, &a, &rb, "export-memory: GPU copy after a write through the importer");
        /* Through another process (shared memory stays shared after fork). */
        pid_t pid = fork();
        if (pid == 0) {
            unsigned char tmp[30000];
            hv_pattern(tmp, sizeof tmp, 900 + (uint64_t)f);
            memcpy(a.ptr + 200000, tmp, sizeof tmp);
            _exit(0);
        }
        int st;
        waitpid(pid, &st, 0);
        hv_pattern(a.model + 200000, 30000, 900 + (uint64_t)f);
        if (memcmp(a.ptr + 200000, a.model + 200000, 30000) != 0) {
            /* Not shared memory on this driver: the child's copy was private. */
            memcpy(a.model + 200000, a.ptr + 200000, 30000);
        }
        bad |= hv_gpu_check(h, &a, &rb, "export-memory: GPU copy after another process wrote it");
    }
    hv_free(h, &b);
    hv_free(h, &a);
    hv_free(h, &rb);
    hv_fini(h);
    return bad;
}

/* ---- usage given by VK_KHR_maintenance5's 64-bit flags ------------------- */

/* Vulkan 1.4 and VK_KHR_maintenance5: a VkBufferUsageFlags2CreateInfo in
 * the chain replaces VkBufferCreateInfo's usage, which the driver then
 * ignores. The readback buffer says "transfer source" (read-only) in the
 * old field and "transfer destination" in the new one: the device writes
 * it, and the application must read what the device wrote (in shadow mode
 * through its own copy, which only device-writable objects refresh). The
 * definitions are here because Debian 12's headers predate the extension. */
typedef struct usage_flags2_info {
    VkStructureType sType;
    const void *pNext;
    uint64_t usage;
} usage_flags2_info;

typedef struct maintenance5_features {
    VkStructureType sType;
    void *pNext;
    VkBool32 maintenance5;
} maintenance5_features;

static int usage_flags2(hv *h, int argc, char **argv)
{
    (void)argc, (void)argv;
    static const char *const exts[] = {"VK_KHR_maintenance5", "VK_KHR_dynamic_rendering"};
    maintenance5_features m5 = {.sType = (VkStructureType)1000470000, .maintenance5 = VK_TRUE};
    VkPhysicalDeviceDynamicRenderingFeatures dr = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DYNAMIC_RENDERING_FEATURES, .pNext = &m5};
    hv_opts o = {exts, 2, 0, &dr};
    int rc = hv_init(h, &o);
    if (rc)
        return rc;
    usage_flags2_info u2 = {.sType = (VkStructureType)1000470006,
                            .usage = VK_BUFFER_USAGE_TRANSFER_DST_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT};
    hv_mem src, rb;
    hv_alloc(h, &src, 1u << 20, HV_SRC);
    hv_alloc_ex(h, &rb, 1u << 20, VK_BUFFER_USAGE_TRANSFER_SRC_BIT, NULL, &u2, 1);
    int bad = 0;
    for (int f = 0; f < h->frames && !bad; f++) {
        for (int k = 0; k < 6; k++)
            hv_write(&src, (VkDeviceSize)k * 150000 + (VkDeviceSize)f * 13, 5000, 300 + (uint64_t)(f * 6 + k));
        bad |= hv_gpu_check(h, &src, &rb, "usage-flags2: the device's copy into a buffer whose usage is 64-bit");
        /* The application then changes part of what the device wrote. */
        hv_write(&rb, 70000 + (VkDeviceSize)f * 4096, 3000, 700 + (uint64_t)f);
    }
    hv_free(h, &src);
    hv_free(h, &rb);
    hv_fini(h);
    return bad;
}

/* ---- sparse binding --------------------------------------------------------- */

/* A sparse buffer (VK_BUFFER_CREATE_SPARSE_BINDING_BIT) gets its memory from
 * vkQueueBindSparse, not vkBindBufferMemory: its two halves are bound
 * swapped into one host-visible memory the application maps. The device
 * copies into the buffer, the application reads the result through its
 * mapping, then changes part of it, and the device copies the buffer out
 * again: both directions go through memory no ordinary binding names. */
static int sparse_bind(hv *h, int argc, char **argv)
{
    (void)argc, (void)argv;
    int rc = hv_init(h, NULL);
    if (rc)
        return rc;
    VkPhysicalDeviceFeatures have;
    vkGetPhysicalDeviceFeatures(h->phys, &have);
    uint32_t nf = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(h->phys, &nf, NULL);
    VkQueueFamilyProperties qf[16];
    nf = nf > 16 ? 16 : nf;
    vkGetPhysicalDeviceQueueFamilyProperties(h->phys, &nf, qf);
    int queue_ok = h->family < nf && (qf[h->family].queueFlags & VK_QUEUE_SPARSE_BINDING_BIT);
    hv_fini(h);
    if (!have.sparseBinding || !queue_ok) {
        fprintf(stderr, "%s: the device lacks sparse binding\n", hv_argv0);
        return HV_SKIP;
    }
    VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                    .features = {.sparseBinding = VK_TRUE}};
    hv_opts o = {NULL, 0, 0, &f2};
    if ((rc = hv_init(h, &o)) != 0)
        return rc;
    const VkDeviceSize size = 1u << 20;
    VkBufferCreateInfo bci = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                              .flags = VK_BUFFER_CREATE_SPARSE_BINDING_BIT, .size = size,
                              .usage = VK_BUFFER_USAGE_TRANSFER_DST_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT,
                              .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
    VkBuffer sparse;
    HV_VK(vkCreateBuffer(h->dev, &bci, NULL, &sparse));
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(h->dev, sparse, &req);
    VkDeviceSize half = size / 2;
    if (!(req.memoryTypeBits & (1u << h->host_type)) || req.size != size || half % req.alignment) {
        fprintf(stderr, "%s: sparse buffers take no host-visible memory here (types 0x%x, size %llu, "
                "block %llu)\n", hv_argv0, req.memoryTypeBits, (unsigned long long)req.size,
                (unsigned long long)req.alignment);
        vkDestroyBuffer(h->dev, sparse, NULL);
        hv_fini(h);
        return HV_SKIP;
    }
    VkMemoryAllocateInfo mai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .allocationSize = size,
                                .memoryTypeIndex = h->host_type};
    VkDeviceMemory mem;
    HV_VK(vkAllocateMemory(h->dev, &mai, NULL, &mem));
    unsigned char *ptr;
    HV_VK(vkMapMemory(h->dev, mem, 0, VK_WHOLE_SIZE, 0, (void **)&ptr));
    memset(ptr, 0, (size_t)size);
    /* Buffer bytes [0, half) live at memory offset half, and the reverse. */
    VkSparseMemoryBind binds[2] = {{.resourceOffset = 0, .size = half, .memory = mem, .memoryOffset = half},
                                   {.resourceOffset = half, .size = half, .memory = mem, .memoryOffset = 0}};
    VkSparseBufferMemoryBindInfo bbi = {.buffer = sparse, .bindCount = 2, .pBinds = binds};
    VkBindSparseInfo bsi = {.sType = VK_STRUCTURE_TYPE_BIND_SPARSE_INFO, .bufferBindCount = 1,
                            .pBufferBinds = &bbi};
    HV_VK(vkQueueBindSparse(h->queue, 1, &bsi, h->fence));
    HV_VK(vkWaitForFences(h->dev, 1, &h->fence, VK_TRUE, UINT64_MAX));
    HV_VK(vkResetFences(h->dev, 1, &h->fence));
    hv_mem src, out;
    hv_alloc(h, &src, size, HV_SRC);
    hv_alloc(h, &out, size, HV_DST);
    unsigned char *want = calloc(1, (size_t)size); /* the sparse buffer's bytes, in buffer order */
    if (!want)
        hv_die("out of memory");
    int bad = 0;
    for (int f = 0; f < h->frames && !bad; f++) {
        for (int k = 0; k < 6; k++)
            hv_write(&src, (VkDeviceSize)k * 170000 + (VkDeviceSize)f * 29, 6000, 900 + (uint64_t)(f * 6 + k));
        hv_begin(h);
        VkBufferCopy c = {.size = size};
        vkCmdCopyBuffer(h->cmd, src.buf, sparse, 1, &c);
        hv_end(h);
        hv_submit_wait(h);
        memcpy(want, src.model, (size_t)size);
        bad |= hv_compare(ptr + half, want, (size_t)half, "sparse-bind: the device's copy, first half");
        bad |= hv_compare(ptr, want + half, (size_t)half, "sparse-bind: the device's copy, second half");
        /* The application changes both halves through its mapping; the
         * device copies the buffer out and must see that. */
        hv_pattern(want + 4096 + (size_t)f * 512, 3000, 1300 + (uint64_t)f);
        memcpy(ptr + half + 4096 + (size_t)f * 512, want + 4096 + (size_t)f * 512, 3000);
        hv_pattern(want + half + 80000, 5000, 1400 + (uint64_t)f);
        memcpy(ptr + 80000, want + half + 80000, 5000);
        hv_begin(h);
        vkCmdCopyBuffer(h->cmd, sparse, out.buf, 1, &c);
        hv_end(h);
        hv_submit_wait(h);
        memcpy(out.model, want, (size_t)size);
        bad |= hv_compare(out.ptr, want, (size_t)size, "sparse-bind: the device's copy of the app's writes");
    }
    free(want);
    hv_free(h, &src);
    hv_free(h, &out);
    vkDestroyBuffer(h->dev, sparse, NULL);
    vkUnmapMemory(h->dev, mem);
    vkFreeMemory(h->dev, mem, NULL);
    hv_fini(h);
    return bad;
}

/* ---- host image copies (VK_EXT_host_image_copy) ----------------------------- */

/* The driver copies between host memory and a linear image on the host, at
 * once, while the application also reads and writes the image through its
 * mapping: what the application wrote must be what the driver reads, and
 * what the driver wrote what the application reads, with no submit or wait
 * in between. The definitions are here because Debian 12's headers
 * predate the extension. */
#define HIC_USAGE_HOST_TRANSFER 0x00400000u

typedef struct hic_features {
    VkStructureType sType;
    void *pNext;
    VkBool32 host_image_copy;
} hic_features;

typedef struct hic_memory_to_image {
    VkStructureType sType;
    const void *pNext;
    const void *host;
    uint32_t row_length, image_height;
    VkImageSubresourceLayers subresource;
    VkOffset3D offset;
    VkExtent3D extent;
} hic_memory_to_image; /* VkMemoryToImageCopyEXT; VkImageToMemoryCopyEXT is laid out alike */

typedef struct hic_copy_info {
    VkStructureType sType;
    const void *pNext;
    VkFlags flags;
    VkImage image;
    VkImageLayout layout;
    uint32_t nregions;
    const hic_memory_to_image *regions;
} hic_copy_info; /* VkCopyMemoryToImageInfoEXT and VkCopyImageToMemoryInfoEXT */

typedef struct hic_transition {
    VkStructureType sType;
    const void *pNext;
    VkImage image;
    VkImageLayout old_layout, new_layout;
    VkImageSubresourceRange range;
} hic_transition;

typedef VkResult (*hic_copy_fn)(VkDevice, const hic_copy_info *);
typedef VkResult (*hic_transition_fn)(VkDevice, uint32_t, const hic_transition *);

enum { HIC_W = 256, HIC_H = 128, HIC_ROW = HIC_W * 4 };

static int host_image_copy(hv *h, int argc, char **argv)
{
    (void)argc, (void)argv;
    static const char *const exts[] = {"VK_EXT_host_image_copy", "VK_KHR_copy_commands2",
                                       "VK_KHR_format_feature_flags2"};
    hic_features hf = {.sType = (VkStructureType)1000270000, .host_image_copy = VK_TRUE};
    hv_opts o = {exts, 3, 0, &hf};
    int rc = hv_init(h, &o);
    if (rc)
        return rc;
    const VkFormat fmt = VK_FORMAT_R8G8B8A8_UINT;
    const VkImageUsageFlags usage =
        HIC_USAGE_HOST_TRANSFER | VK_IMAGE_USAGE_TRANSFER_SRC_BIT | VK_IMAGE_USAGE_TRANSFER_DST_BIT;
    VkImageFormatProperties ifp;
    hic_copy_fn to_image = (hic_copy_fn)vkGetDeviceProcAddr(h->dev, "vkCopyMemoryToImageEXT");
    hic_copy_fn to_memory = (hic_copy_fn)vkGetDeviceProcAddr(h->dev, "vkCopyImageToMemoryEXT");
    hic_transition_fn transition = (hic_transition_fn)vkGetDeviceProcAddr(h->dev, "vkTransitionImageLayoutEXT");
    if (vkGetPhysicalDeviceImageFormatProperties(h->phys, fmt, VK_IMAGE_TYPE_2D, VK_IMAGE_TILING_LINEAR, usage,
                                                 0, &ifp) != VK_SUCCESS || !to_image || !to_memory || !transition) {
        fprintf(stderr, "%s: no host copies of linear RGBA8 images here\n", hv_argv0);
        hv_fini(h);
        return HV_SKIP;
    }
    VkImageCreateInfo ici = {.sType = VK_STRUCTURE_TYPE_IMAGE_CREATE_INFO, .imageType = VK_IMAGE_TYPE_2D,
                             .format = fmt, .extent = {HIC_W, HIC_H, 1}, .mipLevels = 1, .arrayLayers = 1,
                             .samples = VK_SAMPLE_COUNT_1_BIT, .tiling = VK_IMAGE_TILING_LINEAR,
                             .usage = usage, .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
                             .initialLayout = VK_IMAGE_LAYOUT_UNDEFINED};
    VkImage img;
    HV_VK(vkCreateImage(h->dev, &ici, NULL, &img));
    VkMemoryRequirements req;
    vkGetImageMemoryRequirements(h->dev, img, &req);
    if (!(req.memoryTypeBits & (1u << h->host_type))) {
        fprintf(stderr, "%s: linear images take no host-visible memory here\n", hv_argv0);
        vkDestroyImage(h->dev, img, NULL);
        hv_fini(h);
        return HV_SKIP;
    }
    VkMemoryAllocateInfo mai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .allocationSize = req.size,
                                .memoryTypeIndex = h->host_type};
    VkDeviceMemory mem;
    HV_VK(vkAllocateMemory(h->dev, &mai, NULL, &mem));
    HV_VK(vkBindImageMemory(h->dev, img, mem, 0));
    unsigned char *ptr;
    HV_VK(vkMapMemory(h->dev, mem, 0, VK_WHOLE_SIZE, 0, (void **)&ptr));
    VkImageSubresource sub = {.aspectMask = VK_IMAGE_ASPECT_COLOR_BIT};
    VkSubresourceLayout lay;
    vkGetImageSubresourceLayout(h->dev, img, &sub, &lay);
    hic_transition tr = {.sType = (VkStructureType)1000270006, .image = img,
                         .old_layout = VK_IMAGE_LAYOUT_UNDEFINED, .new_layout = VK_IMAGE_LAYOUT_GENERAL,
                         .range = {VK_IMAGE_ASPECT_COLOR_BIT, 0, 1, 0, 1}};
    HV_VK(transition(h->dev, 1, &tr));
    unsigned char *want = calloc(HIC_H, HIC_ROW), *got = calloc(HIC_H, HIC_ROW), *src = calloc(HIC_H, HIC_ROW);
    if (!want || !got || !src)
        hv_die("out of memory");
    /* The whole image from the host: a known start. */
    hv_pattern(want, (size_t)HIC_H * HIC_ROW, 2000);
    hic_memory_to_image whole = {.sType = (VkStructureType)1000270002, .host = want,
                                 .subresource = {VK_IMAGE_ASPECT_COLOR_BIT, 0, 0, 1},
                                 .extent = {HIC_W, HIC_H, 1}};
    hic_copy_info in = {.sType = (VkStructureType)1000270005, .image = img, .layout = VK_IMAGE_LAYOUT_GENERAL,
                        .nregions = 1, .regions = &whole};
    HV_VK(to_image(h->dev, &in));
    hv_mem out;
    hv_alloc(h, &out, (VkDeviceSize)HIC_H * HIC_ROW, HV_DST);
    int bad = 0;
    for (int f = 0; f < h->frames && !bad; f++) {
        /* 1. The application writes rows through its mapping; the driver
         * copies the image out on the host and must find them. */
        for (int y = f * 8 % HIC_H, y1 = y + 8; y < y1; y++) {
            hv_pattern(want + (size_t)y * HIC_ROW, HIC_ROW, 2100 + (uint64_t)y);
            memcpy(ptr + lay.offset + (size_t)y * lay.rowPitch, want + (size_t)y * HIC_ROW, HIC_ROW);
        }
        hic_memory_to_image all = whole;
        all.sType = (VkStructureType)1000270003;
        all.host = got;
        hic_copy_info outi = {.sType = (VkStructureType)1000270004, .image = img,
                              .layout = VK_IMAGE_LAYOUT_GENERAL, .nregions = 1, .regions = &all};
        HV_VK(to_memory(h->dev, &outi));
        bad |= hv_compare(got, want, (size_t)HIC_H * HIC_ROW,
                          "host-image-copy: the driver's host copy of rows the app wrote");
        /* 2. The driver writes a rectangle on the host; the application
         * reads it through its mapping. */
        int x0 = 16 + f * 4 % 128, y0 = 40 + f % 64, w = 64, hgt = 20;
        hv_pattern(src, (size_t)w * 4 * hgt, 2200 + (uint64_t)f);
        for (int y = 0; y < hgt; y++)
            memcpy(want + (size_t)(y0 + y) * HIC_ROW + (size_t)x0 * 4, src + (size_t)y * w * 4, (size_t)w * 4);
        hic_memory_to_image rect = {.sType = (VkStructureType)1000270002, .host = src,
                                    .subresource = {VK_IMAGE_ASPECT_COLOR_BIT, 0, 0, 1},
                                    .offset = {x0, y0, 0}, .extent = {(uint32_t)w, (uint32_t)hgt, 1}};
        in.regions = &rect;
        HV_VK(to_image(h->dev, &in));
        for (int y = 0; y < HIC_H && !bad; y++)
            bad |= hv_compare(ptr + lay.offset + (size_t)y * lay.rowPitch, want + (size_t)y * HIC_ROW, HIC_ROW,
                              "host-image-copy: the app's read of what the driver's host copy wrote");
        /* 3. The device copies the image out: it sees both. */
        hv_begin(h);
        VkBufferImageCopy bic = {.imageSubresource = {VK_IMAGE_ASPECT_COLOR_BIT, 0, 0, 1},
                                 .imageExtent = {HIC_W, HIC_H, 1}};
        vkCmdCopyImageToBuffer(h->cmd, img, VK_IMAGE_LAYOUT_GENERAL, out.buf, 1, &bic);
        hv_end(h);
        hv_submit_wait(h);
        memcpy(out.model, want, (size_t)HIC_H * HIC_ROW);
        bad |= hv_compare(out.ptr, want, (size_t)HIC_H * HIC_ROW, "host-image-copy: the device's copy of the image");
    }
    free(want);
    free(got);
    free(src);
    hv_free(h, &out);
    vkDestroyImage(h->dev, img, NULL);
    vkUnmapMemory(h->dev, mem);
    vkFreeMemory(h->dev, mem, NULL);
    hv_fini(h);
    return bad;
}

/* ---- placed maps (VK_EXT_map_memory_placed) -------------------------------- */

/* The application reserves address space and has the driver map the memory
 * exactly there (vkMapMemory2 with VkMemoryMapPlacedInfoEXT), and unmaps
 * with VK_MEMORY_UNMAP_RESERVE_BIT_EXT, which leaves the addresses reserved
 * for the next placed map (emulators map guest memory this way). Every
 * frame maps at the same address, writes, submits (mapped or not) and
 * unmaps, reserving or not. The definitions are here because Debian 12's
 * headers predate both extensions. */
typedef struct placed_map_info {
    VkStructureType sType;
    const void *pNext;
    VkMemoryMapFlags flags;
    VkDeviceMemory memory;
    VkDeviceSize offset;
    VkDeviceSize size;
} placed_map_info;

typedef struct placed_unmap_info {
    VkStructureType sType;
    const void *pNext;
    VkFlags flags;
    VkDeviceMemory memory;
} placed_unmap_info;

typedef struct placed_address {
    VkStructureType sType;
    const void *pNext;
    void *address;
} placed_address;

typedef struct placed_features {
    VkStructureType sType;
    void *pNext;
    VkBool32 map_placed, map_range_placed, unmap_reserve;
} placed_features;

typedef struct placed_props {
    VkStructureType sType;
    void *pNext;
    VkDeviceSize alignment;
} placed_props;

typedef VkResult (*placed_map_fn)(VkDevice, const placed_map_info *, void **);
typedef VkResult (*placed_unmap_fn)(VkDevice, const placed_unmap_info *);

/* Whether the page at p is mapped at all (a reservation is PROT_NONE). */
static int is_mapped(void *p)
{
    unsigned char v;
    return mincore(p, 1, &v) == 0 || errno != ENOMEM;
}

static int map_placed(hv *h, int argc, char **argv)
{
    (void)argc, (void)argv;
    static const char *const exts[] = {"VK_KHR_map_memory2", "VK_EXT_map_memory_placed"};
    placed_features pf = {.sType = (VkStructureType)1000272000, .map_placed = VK_TRUE,
                          .unmap_reserve = VK_TRUE};
    hv_opts o = {exts, 2, 0, &pf};
    int rc = hv_init(h, &o);
    if (rc)
        return rc;
    placed_props pp = {.sType = (VkStructureType)1000272001};
    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &pp};
    vkGetPhysicalDeviceProperties2(h->phys, &p2);
    placed_map_fn map2 = (placed_map_fn)vkGetDeviceProcAddr(h->dev, "vkMapMemory2KHR");
    placed_unmap_fn unmap2 = (placed_unmap_fn)vkGetDeviceProcAddr(h->dev, "vkUnmapMemory2KHR");
    if (!map2 || !unmap2)
        hv_die("map-placed: no vkMapMemory2KHR/vkUnmapMemory2KHR");
    size_t align = pp.alignment > 4096 ? (size_t)pp.alignment : 4096;
    size_t size = (1u << 20) > align ? (1u << 20) : align; /* a whole map: a multiple of it */
    size = (size + align - 1) / align * align;
    unsigned char *resv = mmap(NULL, size + align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (resv == MAP_FAILED)
        hv_die("map-placed: cannot reserve address space");
    unsigned char *at = (unsigned char *)(((uintptr_t)resv + align - 1) / align * align);
    hv_mem src, rb;
    hv_alloc_ex(h, &src, size, HV_SRC, NULL, NULL, 0);
    hv_alloc(h, &rb, size, HV_DST);
    int bad = 0;
    for (int f = 0; f < h->frames && !bad; f++) {
        placed_address pa = {.sType = (VkStructureType)1000272002, .address = at};
        placed_map_info mi = {.sType = (VkStructureType)1000271000, .pNext = &pa, .flags = 0x1,
                              .memory = src.mem, .size = VK_WHOLE_SIZE};
        void *p = NULL;
        HV_VK(map2(h->dev, &mi, &p));
        if (p != at) {
            fprintf(stderr, "%s: map-placed: mapped at %p, not at the placed address %p\n", hv_argv0, p, at);
            bad = 1;
            break;
        }
        src.ptr = p;
        /* What the memory held is still there (first: zeros, as the model). */
        if (f == 0)
            memset(src.ptr, 0, size);
        else
            bad |= hv_compare(src.ptr, src.model, size, "map-placed: content after a placed map");
        for (int k = 0; k < 5; k++)
            hv_write(&src, (VkDeviceSize)k * (size / 5) + (VkDeviceSize)f * 64, 3000, 500 + (uint64_t)(f * 5 + k));
        int mapped_submit = f % 2;
        if (mapped_submit)
            bad |= hv_gpu_check(h, &src, &rb, "map-placed: GPU copy while mapped");
        int reserve = (f / 2) % 2 == 0;
        placed_unmap_info ui = {.sType = (VkStructureType)1000271001, .flags = reserve ? 0x1u : 0,
                                .memory = src.mem};
        HV_VK(unmap2(h->dev, &ui));
        src.ptr = NULL;
        if (reserve && !is_mapped(at)) {
            fprintf(stderr, "%s: map-placed: the unmap with VK_MEMORY_UNMAP_RESERVE_BIT_EXT left "
                            "the addresses unreserved\n", hv_argv0);
            bad = 1;
        }
        if (!reserve && mmap(at, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1,
                             0) != at)
            hv_die("map-placed: cannot reserve the addresses again");
        if (!mapped_submit)
            bad |= hv_gpu_check(h, &src, &rb, "map-placed: GPU copy after the unmap");
    }
    hv_free(h, &src);
    hv_free(h, &rb);
    munmap(resv, size + align);
    hv_fini(h);
    return bad;
}

const hv_behaviour hv_memory_behaviours[] = {
    {"app-mprotect", "the app's own mprotect on its mapping (and a page it keeps read-only)",
     app_mprotect},
    {"app-guard-pages", "pages of its mapping the app makes PROT_NONE (its own guard) while submits read "
     "the rest", app_guard_pages},
    {"app-madvise", "the app's own madvise(MADV_DONTNEED/MADV_FREE) on its mapping", app_madvise},
    {"proc-self-mem", "writes through /proc/self/mem", proc_self_mem},
    {"map-offset", "maps at an offset: minMemoryMapAlignment kept, content right", map_offset},
    {"upload-unmapped", "map, write, unmap, submit: nothing mapped at any submit", upload_unmapped},
    {"gpu-write-unmapped", "the device writes while unmapped through a buffer destroyed since",
     gpu_write_unmapped},
    {"heap-small", "20 mapped allocations of 12-30 KB written by 3 threads", heap_small},
    {"host-pointer", "memory imported from a host pointer, written through it", host_pointer},
    {"host-pointer-hugetlb", "the same with MAP_HUGETLB memory (where huge pages are reserved)",
     host_pointer_hugetlb},
    {"host-pointer-shared", "imported host memory (a memfd) written through another mapping, write(2) and "
     "a forked child", host_pointer_shared},
    {"host-pointer-reimport", "the same host memory imported anew each frame, the last import freed first",
     host_pointer_reimport},
    {"usage-flags2", "the device writes a buffer whose usage comes from VK_KHR_maintenance5's 64-bit flags "
     "(where the device has it)", usage_flags2},
    {"map-placed", "VK_EXT_map_memory_placed: maps at an address it reserved, unmaps keeping it reserved "
     "or not (where the device has it)", map_placed},
    {"sparse-bind", "a sparse buffer bound with vkQueueBindSparse to mapped memory, its halves swapped; "
     "the device and the app write it (where the device can)", sparse_bind},
    {"host-image-copy", "the driver copies to and from a mapped linear image on the host "
     "(VK_EXT_host_image_copy) while the app writes and reads it (where the device has it)", host_image_copy},
    {"export-memory", "exported memory written through an importer and by another process",
     export_memory},
    {NULL, NULL, NULL},
};
