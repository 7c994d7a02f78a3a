#define _GNU_SOURCE
/* check: finding the PTX in what cuModuleLoadData/cuLibraryLoadData get.
 *
 * The stored images are the .nv_fatbin sections of ok_saxpy built by nvcc 13
 * on the H100 host (-gencode arch=compute_90,code=[sm_90,compute_90]), once as
 * nvcc leaves it (ELF plain, PTX zstd-compressed) and once with
 * -Xfatbin=-compress-all (everything compressed). Each holds two containers:
 * an empty ELF (no code), then the kernel's ELF and PTX. */
#include <errno.h>

#include "mt_test.h"
#include "memtrack/check.h"

static unsigned char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    MT_CHECK(f != NULL);
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    rewind(f);
    unsigned char *b = malloc(*n + 1);
    MT_CHECK(b && fread(b, 1, *n, f) == *n);
    b[*n] = 0;
    fclose(f);
    return b;
}

int main(int argc, char **argv)
{
    MT_CHECK(argc >= 2);
    char path[4096];
    size_t n_plain, n_comp, n_ptx;
    snprintf(path, sizeof path, "%s/fatbin/ok_saxpy.nv_fatbin", argv[1]);
    unsigned char *plain = slurp(path, &n_plain);
    snprintf(path, sizeof path, "%s/fatbin/ok_saxpy_compress_all.nv_fatbin", argv[1]);
    unsigned char *comp = slurp(path, &n_comp);
    snprintf(path, sizeof path, "%s/ptx/ok_saxpy.ptx", argv[1]);
    unsigned char *ptxfile = slurp(path, &n_ptx);

    char *a = NULL, *b = NULL;
    size_t la = 0, lb = 0;
    /* The whole section: the second container's PTX, decompressed. */
    MT_CHECK_OK(mt_check_find_ptx(plain, n_plain, 90, &a, &la));
    MT_CHECK_OK(mt_check_find_ptx(comp, n_comp, 120, &b, &lb));
    MT_CHECK_UINT_EQ(la, strlen(a));
    MT_CHECK_UINT_EQ(la, lb);
    MT_CHECK_MEM_EQ(a, b, la);
    MT_CHECK(strstr(a, ".version 9.0") && strstr(a, ".target sm_90"));
    MT_CHECK(strstr(a, ".visible .entry _Z5saxpyifPKfPf("));
    /* the same code as `nvcc -ptx` wrote (nvcc strips comments and tabs when
     * it embeds PTX): equal once blanks are dropped, from the entry up to the
     * .file directive (the source path differs between the two builds) */
    char *sa = strstr(a, ".visible .entry"), *sp = strstr((char *)ptxfile, ".visible .entry");
    MT_CHECK(sa && sp);
    for (;;) {
        while (*sa == ' ' || *sa == '\t' || *sa == '\n')
            sa++;
        while (*sp == ' ' || *sp == '\t' || *sp == '\n')
            sp++;
        if (*sp == '/' && sp[1] == '/') { /* a comment only the file has */
            while (*sp && *sp != '\n')
                sp++;
            continue;
        }
        if (strncmp(sa, ".file", 5) == 0 && strncmp(sp, ".file", 5) == 0)
            break;
        MT_CHECK(*sa == *sp);
        MT_CHECK(*sa != 0);
        sa++, sp++;
    }

    /* One container at a time, sized by its own header (size 0). */
    size_t first = 16 + (size_t)(plain[8] | plain[9] << 8 | plain[10] << 16);
    char *c = NULL;
    size_t lc;
    MT_CHECK_ERR(mt_check_find_ptx(plain, first, 90, &c, &lc), -ENODATA); /* the empty ELF */
    size_t second_off = (first + 7) & ~(size_t)7;
    MT_CHECK_OK(mt_check_find_ptx(plain + second_off, 0, 90, &c, &lc));
    MT_CHECK_UINT_EQ(lc, la);
    free(c);
    /* The CUDA runtime's wrapper {magic, version, pointer, ...}. */
    struct { uint32_t magic, version; const void *data; void *unused; } wrap = {0x466243B1u, 1,
                                                                                 plain + second_off, NULL};
    MT_CHECK_OK(mt_check_find_ptx(&wrap, 0, 90, &c, &lc));
    MT_CHECK_UINT_EQ(lc, la);
    free(c);
    /* No PTX for an older GPU: code exists, PTX does not fit. */
    MT_CHECK_ERR(mt_check_find_ptx(plain, n_plain, 80, &c, &lc), -ENOENT);
    MT_CHECK_ERR(mt_check_find_ptx(comp, n_comp, 80, &c, &lc), -ENOENT);
    /* Cut short: the header promises more than there is. */
    MT_CHECK_ERR(mt_check_find_ptx(plain + second_off, 200, 90, &c, &lc), MT_ECORRUPT);
    /* A damaged zstd payload. */
    unsigned char *bad = malloc(n_plain);
    memcpy(bad, plain, n_plain);
    const char *ptxhdr = "(\xb5/\xfd"; /* zstd magic: the PTX payload's first bytes */
    unsigned char *z = memmem(bad + second_off, n_plain - second_off, ptxhdr, 4);
    MT_CHECK(z != NULL);
    z[8] ^= 0x55;
    z[9] ^= 0xaa;
    MT_CHECK_ERR(mt_check_find_ptx(bad, n_plain, 90, &c, &lc), MT_ECORRUPT);
    free(bad);
    /* Plain PTX text passes through; an ELF cubin has no PTX; garbage is corrupt. */
    MT_CHECK_OK(mt_check_find_ptx(ptxfile, n_ptx, 90, &c, &lc));
    MT_CHECK_UINT_EQ(lc, n_ptx);
    free(c);
    MT_CHECK_ERR(mt_check_find_ptx("\x7f" "ELF\2\1\1", 8, 90, &c, &lc), -ENOENT);
    MT_CHECK_ERR(mt_check_find_ptx("\x01\x02\x03\x04garbage", 11, 90, &c, &lc), MT_ECORRUPT);
    MT_CHECK_ERR(mt_check_find_ptx(NULL, 0, 90, &c, &lc), -EINVAL);

    free(a);
    free(b);
    free(plain);
    free(comp);
    free(ptxfile);
    printf("test_check_fatbin: ok (PTX of %zu bytes)\n", la);
    return 0;
}
