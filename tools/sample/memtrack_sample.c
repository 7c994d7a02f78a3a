/* memtrack-sample: a headless Vulkan application that exercises what a
 * capture layer must get right, and checks on the GPU that it did.
 *
 * Several threads write into large HOST_VISIBLE|HOST_COHERENT memories that
 * hold many buffers at non-page-aligned offsets (neighbours share pages);
 * some memories stay mapped, others are mapped and unmapped every frame.
 * Each frame the GPU copies every region written that frame into a readback
 * buffer, and the app compares it with its own model of what it wrote: if a
 * layer (shadow mode) failed to pass a write on to the driver, or to bring
 * the GPU's copy back to the app, the check fails.
 *
 * Workloads: sparse (a few small writes in 128 MiB), dense (most of 32 MiB
 * rewritten), mixed (both), many-small (many small buffers, map/unmap),
 * churn (per frame, two fresh 4 MiB memories allocated, written whole and
 * freed once the GPU is done: a video decoder's frames).
 *
 * usage: memtrack-sample [--workload W] [--frames N] [--threads T] [--seed S]
 *                        [--stats FILE] [--save-frame N FILE] [--churn-keep F]
 * Environment: MEMTRACK_SAMPLE_MEMORY=device-local takes a device-local
 * host-visible memory type (exit 3 where there is none).
 * Exit: 0 ok, 1 a check failed, 2 usage, 3 Vulkan unavailable. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <vulkan/vulkan.h>

#define MAX_ARENAS 16
#define MAX_BUFS 64

typedef struct buf {
    VkBuffer b;
    VkDeviceSize off, size; /* within the arena */
} buf;

typedef struct arena {
    VkDeviceMemory mem;
    VkDeviceSize size;
    unsigned char *ptr;   /* mapped pointer, NULL while unmapped */
    unsigned char *model; /* what the app believes the memory holds */
    int persistent;       /* else mapped and unmapped every frame */
    buf bufs[MAX_BUFS];
    int nbufs;
} arena;

typedef struct write_op {
    int arena, buffer;
    VkDeviceSize off, len; /* within the buffer */
    VkDeviceSize dst;      /* offset in the readback buffer */
} write_op;

typedef struct workload {
    const char *name;
    int sparse_arenas;  /* 32 MiB, 8 buffers each, 64 x 256 B writes per frame in all */
    int dense_arenas;   /* 8 MiB, 2 buffers each, ~90% rewritten per frame */
    int small_arenas;   /* 1 MiB, 48 small buffers, half persistent */
    int churn;          /* 4 MiB memories allocated, written whole and freed per frame */
} workload;

static const workload g_workloads[] = {
    {"sparse", 4, 0, 0, 0},
    {"dense", 0, 4, 0, 0},
    {"mixed", 2, 1, 0, 0},
    {"many-small", 0, 0, 8, 0},
    {"churn", 0, 0, 0, 2},
};

static struct {
    VkInstance inst;
    VkPhysicalDevice phys;
    VkDevice dev;
    VkQueue queue;
    uint32_t family, mem_type;
    VkCommandPool pool;
    VkCommandBuffer cmd;
    VkFence fence;
    arena ar[MAX_ARENAS];
    int nar;
    arena rb; /* readback: the GPU writes it */
    write_op *ops;
    size_t nops, capops;
    int threads;
    uint64_t seed;
    pthread_barrier_t start, done;
    int frame, quit;
} S;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t rnd(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

#define VK(call)                                                                                   \
    do {                                                                                           \
        VkResult r_ = (call);                                                                      \
        if (r_ != VK_SUCCESS) {                                                                    \
            fprintf(stderr, "memtrack-sample: %s failed (%d)\n", #call, r_);                        \
            exit(3);                                                                               \
        }                                                                                          \
    } while (0)

static void setup_vulkan(void)
{
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                             .pApplicationName = "memtrack-sample",
                             .apiVersion = VK_API_VERSION_1_1};
    VkInstanceCreateInfo ici = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, .pApplicationInfo = &app};
    VK(vkCreateInstance(&ici, NULL, &S.inst));
    uint32_t n = 1;
    VkResult r = vkEnumeratePhysicalDevices(S.inst, &n, &S.phys);
    if ((r != VK_SUCCESS && r != VK_INCOMPLETE) || n == 0) {
        fprintf(stderr, "memtrack-sample: no Vulkan device\n");
        exit(3);
    }
    uint32_t nf = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(S.phys, &nf, NULL);
    VkQueueFamilyProperties qf[16];
    nf = nf > 16 ? 16 : nf;
    vkGetPhysicalDeviceQueueFamilyProperties(S.phys, &nf, qf);
    S.family = UINT32_MAX;
    for (uint32_t i = 0; i < nf && S.family == UINT32_MAX; i++)
        if (qf[i].queueFlags & (VK_QUEUE_GRAPHICS_BIT | VK_QUEUE_COMPUTE_BIT | VK_QUEUE_TRANSFER_BIT))
            S.family = i;
    VkPhysicalDeviceMemoryProperties mp;
    vkGetPhysicalDeviceMemoryProperties(S.phys, &mp);
    uint32_t want = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    /* MEMTRACK_SAMPLE_MEMORY=device-local: the device's own memory mapped
     * through the PCI BAR (write-combined on a discrete GPU), as engines
     * use it for uploads. */
    const char *which = getenv("MEMTRACK_SAMPLE_MEMORY");
    if (which && strcmp(which, "device-local") == 0)
        want |= VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
    S.mem_type = UINT32_MAX;
    for (uint32_t i = 0; i < mp.memoryTypeCount && S.mem_type == UINT32_MAX; i++)
        if ((mp.memoryTypes[i].propertyFlags & want) == want)
            S.mem_type = i;
    if (S.family == UINT32_MAX || S.mem_type == UINT32_MAX) {
        fprintf(stderr, "memtrack-sample: no usable queue or coherent memory type\n");
        exit(3);
    }
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                   .queueFamilyIndex = S.family, .queueCount = 1,
                                   .pQueuePriorities = &prio};
    VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                              .queueCreateInfoCount = 1, .pQueueCreateInfos = &qci};
    VK(vkCreateDevice(S.phys, &dci, NULL, &S.dev));
    vkGetDeviceQueue(S.dev, S.family, 0, &S.queue);
    VkCommandPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                   .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                   .queueFamilyIndex = S.family};
    VK(vkCreateCommandPool(S.dev, &pci, NULL, &S.pool));
    VkCommandBufferAllocateInfo cai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                       .commandPool = S.pool, .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                       .commandBufferCount = 1};
    VK(vkAllocateCommandBuffers(S.dev, &cai, &S.cmd));
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VK(vkCreateFence(S.dev, &fci, NULL, &S.fence));
}

/* Allocates an arena and maps it (zero-filled by the app). Memory first,
 * buffers later: the capture layer numbers memories in allocation order, so
 * arena 0 is memory 1 in a trace (tests rely on it). */
static void alloc_arena(arena *a, VkDeviceSize size, int persistent)
{
    VkMemoryAllocateInfo mai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                                .allocationSize = size, .memoryTypeIndex = S.mem_type};
    VK(vkAllocateMemory(S.dev, &mai, NULL, &a->mem));
    a->size = size;
    a->persistent = persistent;
    a->model = calloc(1, size);
    if (!a->model)
        exit(3);
    void *p;
    VK(vkMapMemory(S.dev, a->mem, 0, VK_WHOLE_SIZE, 0, &p));
    a->ptr = p;
    memset(a->ptr, 0, size);
    if (!persistent) {
        vkUnmapMemory(S.dev, a->mem);
        a->ptr = NULL;
    }
}

/* Packs buffers of the given sizes into the arena at the smallest legal
 * alignment, from a non-page-aligned start: neighbours share pages. */
static void add_buffers(arena *a, int n, VkDeviceSize (*size_of)(int, uint64_t *), uint64_t *rng,
                        VkBufferUsageFlags usage)
{
    VkDeviceSize off = 192;
    for (int i = 0; i < n && a->nbufs < MAX_BUFS; i++) {
        VkBufferCreateInfo bci = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                                  .size = size_of(i, rng), .usage = usage,
                                  .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
        buf *b = &a->bufs[a->nbufs];
        VK(vkCreateBuffer(S.dev, &bci, NULL, &b->b));
        VkMemoryRequirements req;
        vkGetBufferMemoryRequirements(S.dev, b->b, &req);
        off = (off + req.alignment - 1) / req.alignment * req.alignment;
        if (off + bci.size > a->size) {
            vkDestroyBuffer(S.dev, b->b, NULL);
            break;
        }
        VK(vkBindBufferMemory(S.dev, b->b, a->mem, off));
        b->off = off;
        b->size = bci.size;
        off += bci.size;
        a->nbufs++;
    }
}

static VkDeviceSize size_sparse(int i, uint64_t *r) { (void)i; (void)r; return (4u << 20) - 1000; }
static VkDeviceSize size_dense(int i, uint64_t *r) { (void)i; (void)r; return (4u << 20) - 300; }
static VkDeviceSize size_small(int i, uint64_t *r) { (void)i; return 3000 + rnd(r) % 10000; }

static void push_op(write_op op)
{
    if (S.nops == S.capops) {
        S.capops = S.capops ? S.capops * 2 : 1024;
        S.ops = realloc(S.ops, S.capops * sizeof *S.ops);
        if (!S.ops)
            exit(3);
    }
    S.ops[S.nops++] = op;
}

/* This frame's writes: never overlapping, each inside one buffer. */
static void plan_frame(const workload *w, int frame)
{
    uint64_t r = S.seed * 1000003u + (uint64_t)frame;
    S.nops = 0;
    int a = 0;
    for (int k = 0; k < w->sparse_arenas; k++, a++) {
        /* 16 writes of 256 B per arena on distinct 4 KiB slots. */
        uint64_t used[16] = {0};
        for (int j = 0; j < 16; j++) {
            int bi = (int)(rnd(&r) % (uint64_t)S.ar[a].nbufs);
            VkDeviceSize slot = rnd(&r) % (S.ar[a].bufs[bi].size / 4096);
            uint64_t key = (uint64_t)bi << 32 | slot;
            int dup = 0;
            for (int q = 0; q < j; q++)
                dup |= used[q] == key;
            if (dup)
                continue;
            used[j] = key;
            push_op((write_op){a, bi, slot * 4096 + (rnd(&r) % 15) * 256, 256, 0});
        }
    }
    for (int k = 0; k < w->dense_arenas; k++, a++)
        for (int bi = 0; bi < S.ar[a].nbufs; bi++) {
            /* ~90%: 64 KiB chunks, every tenth skipped. */
            VkDeviceSize size = S.ar[a].bufs[bi].size;
            for (VkDeviceSize off = 0, c = 0; off < size; off += 65536, c++)
                if (c % 10 != (VkDeviceSize)frame % 10)
                    push_op((write_op){a, bi, off, off + 65536 <= size ? 65536 : size - off, 0});
        }
    for (int k = 0; k < w->small_arenas; k++, a++)
        for (int bi = 0; bi < S.ar[a].nbufs; bi++) {
            if (rnd(&r) % 2)
                continue;
            VkDeviceSize size = S.ar[a].bufs[bi].size;
            VkDeviceSize len = 64 + rnd(&r) % 2048;
            if (len > size)
                len = size;
            push_op((write_op){a, bi, rnd(&r) % (size - len + 1), len, 0});
        }
    VkDeviceSize dst = 0;
    for (size_t i = 0; i < S.nops; i++) {
        S.ops[i].dst = dst;
        dst += (S.ops[i].len + 15) & ~(VkDeviceSize)15;
    }
}

static void do_write(const write_op *op, int frame)
{
    arena *a = &S.ar[op->arena];
    VkDeviceSize at = a->bufs[op->buffer].off + op->off;
    uint64_t r = S.seed ^ ((uint64_t)frame << 40) ^ at;
    /* 8 bytes at a time where possible: like real vertex/uniform writes. */
    VkDeviceSize i = 0;
    for (; i + 8 <= op->len; i += 8) {
        uint64_t v = rnd(&r);
        memcpy(a->ptr + at + i, &v, 8);
        memcpy(a->model + at + i, &v, 8);
    }
    for (; i < op->len; i++) {
        unsigned char v = (unsigned char)rnd(&r);
        a->ptr[at + i] = v;
        a->model[at + i] = v;
    }
}

static void *worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    for (;;) {
        pthread_barrier_wait(&S.start);
        if (S.quit)
            return NULL;
        for (size_t i = (size_t)id; i < S.nops; i += (size_t)S.threads)
            do_write(&S.ops[i], S.frame);
        pthread_barrier_wait(&S.done);
    }
}

static void record_copies(void)
{
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    VK(vkResetCommandBuffer(S.cmd, 0));
    VK(vkBeginCommandBuffer(S.cmd, &bi));
    for (size_t i = 0; i < S.nops; i++) {
        const write_op *op = &S.ops[i];
        VkBufferCopy c = {.srcOffset = op->off, .dstOffset = op->dst, .size = op->len};
        vkCmdCopyBuffer(S.cmd, S.ar[op->arena].bufs[op->buffer].b, S.rb.bufs[0].b, 1, &c);
    }
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                          .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_HOST_READ_BIT};
    vkCmdPipelineBarrier(S.cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb,
                         0, NULL, 0, NULL);
    VK(vkEndCommandBuffer(S.cmd));
}

static int check_frame(int frame)
{
    for (size_t i = 0; i < S.nops; i++) {
        const write_op *op = &S.ops[i];
        const arena *a = &S.ar[op->arena];
        const unsigned char *want = a->model + a->bufs[op->buffer].off + op->off;
        const unsigned char *got = S.rb.ptr + op->dst;
        if (memcmp(want, got, op->len) != 0) {
            VkDeviceSize k = 0;
            while (want[k] == got[k])
                k++;
            fprintf(stderr, "memtrack-sample: frame %d: GPU copy of arena %d buffer %d bytes "
                            "[%llu,+%llu) differs at byte %llu (0x%02x, expected 0x%02x)\n",
                    frame, op->arena, op->buffer, (unsigned long long)op->off,
                    (unsigned long long)op->len, (unsigned long long)k, got[k], want[k]);
            return 1;
        }
    }
    return 0;
}

static int usage(void)
{
    fprintf(stderr, "usage: memtrack-sample [--workload sparse|dense|mixed|many-small|churn] [--frames N]\n"
                    "                       [--threads T] [--seed S] [--stats FILE] [--save-frame N FILE]\n"
                    "                       [--churn-keep F]\n");
    return 2;
}

int main(int argc, char **argv)
{
    const workload *w = &g_workloads[0];
    int frames = 60, save_frame = -1, churn_keep = -1;
    const char *stats = NULL, *save_path = NULL;
    S.threads = 4;
    S.seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *next = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(argv[i], "--workload") == 0 && next) {
            w = NULL;
            for (size_t k = 0; k < sizeof g_workloads / sizeof g_workloads[0]; k++)
                if (strcmp(next, g_workloads[k].name) == 0)
                    w = &g_workloads[k];
            if (!w)
                return usage();
            i++;
        } else if (strcmp(argv[i], "--frames") == 0 && next)
            frames = atoi(argv[++i]);
        else if (strcmp(argv[i], "--threads") == 0 && next)
            S.threads = atoi(argv[++i]);
        else if (strcmp(argv[i], "--seed") == 0 && next)
            S.seed = strtoull(argv[++i], NULL, 0);
        else if (strcmp(argv[i], "--stats") == 0 && next)
            stats = argv[++i];
        else if (strcmp(argv[i], "--churn-keep") == 0 && next)
            churn_keep = atoi(argv[++i]);
        else if (strcmp(argv[i], "--save-frame") == 0 && i + 2 < argc) {
            save_frame = atoi(argv[++i]);
            save_path = argv[++i];
        } else
            return usage();
    }
    if (frames < 1 || S.threads < 1 || S.threads > 32)
        return usage();

    setup_vulkan();
    uint64_t r = S.seed;
    VkBufferUsageFlags src = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_VERTEX_BUFFER_BIT;
    for (int k = 0; k < w->sparse_arenas; k++)
        alloc_arena(&S.ar[S.nar++], 32u << 20, 1);
    for (int k = 0; k < w->dense_arenas; k++)
        alloc_arena(&S.ar[S.nar++], 8u << 20, 1);
    for (int k = 0; k < w->small_arenas; k++)
        alloc_arena(&S.ar[S.nar++], 1u << 20, k < w->small_arenas / 2);
    int a = 0;
    for (int k = 0; k < w->sparse_arenas; k++)
        add_buffers(&S.ar[a++], 8, size_sparse, &r, src);
    for (int k = 0; k < w->dense_arenas; k++)
        add_buffers(&S.ar[a++], 2, size_dense, &r, src);
    for (int k = 0; k < w->small_arenas; k++)
        add_buffers(&S.ar[a++], 48, size_small, &r, src);
    /* Readback: large enough for the biggest frame. */
    VkDeviceSize rb_size = 0;
    for (int f = 0; f < frames; f++) {
        plan_frame(w, f);
        if (S.nops && S.ops[S.nops - 1].dst + S.ops[S.nops - 1].len + 16 > rb_size)
            rb_size = S.ops[S.nops - 1].dst + S.ops[S.nops - 1].len + 16;
    }
    if (rb_size == 0) /* churn: no copies, but a buffer must not be empty */
        rb_size = 256;
    alloc_arena(&S.rb, rb_size + 4096, 1);
    VkBufferCreateInfo bci = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = rb_size,
                              .usage = VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                              .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
    VK(vkCreateBuffer(S.dev, &bci, NULL, &S.rb.bufs[0].b));
    VK(vkBindBufferMemory(S.dev, S.rb.bufs[0].b, S.rb.mem, 0));
    S.rb.bufs[0].size = rb_size;
    S.rb.nbufs = 1;

    pthread_t th[32];
    pthread_barrier_init(&S.start, NULL, (unsigned)S.threads + 1);
    pthread_barrier_init(&S.done, NULL, (unsigned)S.threads + 1);
    for (int i = 0; i < S.threads; i++)
        pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i);

    uint64_t t_loop = now_ns(), t_write = 0, t_submit = 0, bytes = 0, gpu_bytes = 0;
    VkDeviceMemory kept = VK_NULL_HANDLE; /* --churn-keep */
    void *kept_ptr = NULL;
    int bad = 0;
    for (int f = 0; f < frames && !bad; f++) {
        plan_frame(w, f);
        for (int k = 0; k < S.nar; k++)
            if (!S.ar[k].persistent) {
                void *p;
                VK(vkMapMemory(S.dev, S.ar[k].mem, 0, VK_WHOLE_SIZE, 0, &p));
                S.ar[k].ptr = p;
            }
        uint64_t t0 = now_ns();
        S.frame = f;
        pthread_barrier_wait(&S.start);
        pthread_barrier_wait(&S.done);
        t_write += now_ns() - t0;
        for (size_t i = 0; i < S.nops; i++)
            bytes += S.ops[i].len;
        /* The GPU writes the same amount into the mapped readback buffer. */
        gpu_bytes += S.nops ? S.ops[S.nops - 1].dst + S.ops[S.nops - 1].len : 0;
        for (int k = 0; k < S.nar; k++)
            if (!S.ar[k].persistent) {
                vkUnmapMemory(S.dev, S.ar[k].mem);
                S.ar[k].ptr = NULL;
            }
        if (f == save_frame && save_path) {
            FILE *fp = fopen(save_path, "wb");
            if (!fp || fwrite(S.ar[0].model, 1, S.ar[0].size, fp) != S.ar[0].size)
                bad = 1;
            if (fp)
                fclose(fp);
        }
        /* churn: fresh memories, written whole, handed to this submit. */
        VkDeviceMemory churned[4];
        void *churn_ptr[4];
        /* --churn-keep F: frame F's first churned memory is not freed but
         * stays mapped, 64 KiB of it rewritten per frame (a memory that
         * outlives the ones like it before). */
        if (kept_ptr)
            for (size_t q = 0; q < (64u << 10) / 8; q++)
                ((uint64_t *)kept_ptr)[q] = (uint64_t)f * 0x2545f4914f6cdd1dull + q;
        for (int j = 0; j < w->churn && j < 4; j++) {
            VkMemoryAllocateInfo mai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                                        .allocationSize = 4u << 20, .memoryTypeIndex = S.mem_type};
            VK(vkAllocateMemory(S.dev, &mai, NULL, &churned[j]));
            void *p;
            VK(vkMapMemory(S.dev, churned[j], 0, VK_WHOLE_SIZE, 0, &p));
            churn_ptr[j] = p;
            for (size_t q = 0; q < (4u << 20) / 8; q++)
                ((uint64_t *)p)[q] = (uint64_t)f * 0x9e3779b97f4a7c15ull + q * 0x2545f4914f6cdd1dull + (uint64_t)j;
            bytes += 4u << 20;
        }
        record_copies();
        VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1,
                           .pCommandBuffers = &S.cmd};
        uint64_t t1 = now_ns();
        VK(vkQueueSubmit(S.queue, 1, &si, S.fence));
        t_submit += now_ns() - t1;
        VK(vkWaitForFences(S.dev, 1, &S.fence, VK_TRUE, UINT64_MAX));
        VK(vkResetFences(S.dev, 1, &S.fence));
        bad |= check_frame(f);
        for (int j = 0; j < w->churn && j < 4; j++) {
            if (j == 0 && f == churn_keep) { /* stays mapped */
                kept = churned[0];
                kept_ptr = churn_ptr[0];
                continue;
            }
            vkFreeMemory(S.dev, churned[j], NULL); /* frees the mapping too */
        }
    }
    uint64_t loop = now_ns() - t_loop;
    if (kept)
        vkFreeMemory(S.dev, kept, NULL);
    S.quit = 1;
    pthread_barrier_wait(&S.start);
    for (int i = 0; i < S.threads; i++)
        pthread_join(th[i], NULL);

    if (stats) {
        FILE *fp = fopen(stats, "w");
        if (fp) {
            fprintf(fp, "{\"workload\":\"%s\",\"frames\":%d,\"threads\":%d,\"loop_ns\":%llu,"
                        "\"write_ns\":%llu,\"submit_ns\":%llu,\"bytes_written\":%llu,"
                        "\"gpu_bytes_written\":%llu,\"check\":\"%s\"}\n",
                    w->name, frames, S.threads, (unsigned long long)loop, (unsigned long long)t_write,
                    (unsigned long long)t_submit, (unsigned long long)bytes,
                    (unsigned long long)gpu_bytes, bad ? "FAILED" : "ok");
            fclose(fp);
        }
    }
    printf("memtrack-sample: %s, %d frames, %d threads, %llu bytes written, %.1f ms/frame: %s\n",
           w->name, frames, S.threads, (unsigned long long)bytes, loop / 1e6 / frames,
           bad ? "GPU copy check FAILED" : "GPU copies match");

    for (int k = 0; k <= S.nar; k++) {
        arena *ar = k < S.nar ? &S.ar[k] : &S.rb;
        for (int i = 0; i < ar->nbufs; i++)
            vkDestroyBuffer(S.dev, ar->bufs[i].b, NULL);
        if (ar->ptr)
            vkUnmapMemory(S.dev, ar->mem);
        vkFreeMemory(S.dev, ar->mem, NULL);
        free(ar->model);
    }
    vkDestroyFence(S.dev, S.fence, NULL);
    vkDestroyCommandPool(S.dev, S.pool, NULL);
    vkDestroyDevice(S.dev, NULL);
    vkDestroyInstance(S.inst, NULL);
    free(S.ops);
    return bad;
}
