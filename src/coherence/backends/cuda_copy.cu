// The copy kernel of the CUDA backend: copies a list of tiles (src offset,
// dst offset, length <= 64 KiB) from one base address to another, one
// thread block per tile. Uploads pass the device address of pinned,
// mapped host memory as `src` (the GPU reads the dirty pages over PCIe in
// one launch: no per-page copy call); downloads pass it as `dst`.
//
// Built without the CUDA toolkit, to PTX, by scripts/gen_cuda_ptx.sh
// (clang's NVPTX back end, or nvcc where installed); the PTX is embedded in
// cuda_copy_ptx.h and JIT-compiled by the driver at run time. No CUDA
// headers: the NVVM special-register builtins stand in for threadIdx etc.
typedef unsigned long long u64;
typedef struct {
    u64 src, dst, len;
} mt_tile;
typedef unsigned int mt_v4 __attribute__((ext_vector_type(4))); // one 16-byte access

extern "C" __attribute__((global)) void mt_coh_copy_tiles(const mt_tile *tiles, u64 n,
                                                         const unsigned char *src,
                                                         unsigned char *dst)
{
    u64 b = __nvvm_read_ptx_sreg_ctaid_x();
    if (b >= n)
        return;
    u64 t = __nvvm_read_ptx_sreg_tid_x(), nt = __nvvm_read_ptx_sreg_ntid_x();
    mt_tile x = tiles[b];
    const unsigned char *s = src + x.src;
    unsigned char *d = dst + x.dst;
    if ((((u64)s | (u64)d | x.len) & 15) == 0) {
        // 16-byte accesses, four in flight per thread: a long tile keeps
        // enough reads outstanding to cover the PCIe round trip.
        const mt_v4 *s4 = (const mt_v4 *)s;
        mt_v4 *d4 = (mt_v4 *)d;
        u64 n4 = x.len >> 4, i = t;
        for (; i + 3 * nt < n4; i += 4 * nt) {
            mt_v4 a = s4[i], c = s4[i + nt], e = s4[i + 2 * nt], f = s4[i + 3 * nt];
            d4[i] = a;
            d4[i + nt] = c;
            d4[i + 2 * nt] = e;
            d4[i + 3 * nt] = f;
        }
        for (; i < n4; i += nt)
            d4[i] = s4[i];
    } else {
        for (u64 i = t; i < x.len; i += nt)
            d[i] = s[i];
    }
}
