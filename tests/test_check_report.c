/* check: the report format, exactly, for each kind of failed check and each
 * way an address relates to the allocations; truncation behaves like
 * snprintf. */
#include "mt_test.h"
#include "memtrack/check.h"

static void expect(const mt_check_record *rec, const mt_check_site *site, const char *dem,
                   const mt_check_where *w, uint64_t more, const char *want)
{
    char buf[2048];
    size_t n = mt_check_format(buf, sizeof buf, rec, site, dem, w, more);
    if (strcmp(buf, want) != 0) {
        fprintf(stderr, "got:\n%s\nwant:\n%s\n", buf, want);
        MT_CHECK(0);
    }
    MT_CHECK_UINT_EQ(n, strlen(want));
}

int main(void)
{
    mt_check_site st = {.id = 7, .access = MT_CHECK_STORE, .space = MT_CHECK_GLOBAL, .size = 4,
                        .function = "_Z5writePfi", .text = "st.global.f32 [%rd4], %f1", .ptx_line = 31,
                        .file = "app.cu", .src_line = 12};
    mt_check_site ld = st;
    ld.access = MT_CHECK_LOAD;
    ld.size = 1;
    ld.text = "ld.global.u8 %rs1, [%rd2]";
    ld.file = NULL;
    ld.src_line = 0;
    mt_check_record rec = {.addr = 0x7f0000001000, .site = 7, .kind = MT_CHECK_NOACCESS,
                           .block = {3, 0, 0}, .thread = {255, 1, 0}};
    mt_check_where after = {3, 0x7f0000000000, 0x1000, 2, "cuMemAlloc"};

    expect(&rec, &st, "write(float*, int)", &after, 31,
           "memtrack check: out-of-bounds global write of 4 bytes at 0x7f0000001000\n"
           "    in write(float*, int) [_Z5writePfi], block (3,0,0), thread (255,1,0)\n"
           "    at app.cu:12 (PTX line 31: st.global.f32 [%rd4], %f1)\n"
           "    address is 0 bytes after the end of a 4096-byte allocation at 0x7f0000000000 (cuMemAlloc #2)\n"
           "    the access was not performed (redirected to a sink)\n"
           "    ... and 31 more threads at this instruction with the same error\n");

    mt_check_where before = {2, 0x7f0000001001, 16, 5, "cuMemAllocAsync"};
    expect(&rec, &ld, NULL, &before, 1,
           "memtrack check: out-of-bounds global read of 1 byte at 0x7f0000001000\n"
           "    in _Z5writePfi, block (3,0,0), thread (255,1,0)\n"
           "    at PTX line 31: ld.global.u8 %rs1, [%rd2]\n"
           "    address is 1 byte before a 16-byte allocation at 0x7f0000001001 (cuMemAllocAsync #5)\n"
           "    the access was not performed (read from a safe address instead)\n"
           "    ... and 1 more thread at this instruction with the same error\n");

    mt_check_where freed = {4, 0x7f0000000800, 0x2000, 9, "cuMemAlloc"};
    expect(&rec, &st, "", &freed, 0,
           "memtrack check: out-of-bounds global write of 4 bytes at 0x7f0000001000\n"
           "    in _Z5writePfi, block (3,0,0), thread (255,1,0)\n"
           "    at app.cu:12 (PTX line 31: st.global.f32 [%rd4], %f1)\n"
           "    address is 2048 bytes into a 8192-byte allocation at 0x7f0000000800 (cuMemAlloc #9) that was "
           "freed: use after free\n"
           "    the access was not performed (redirected to a sink)\n");

    mt_check_where none = {0};
    expect(&rec, &st, NULL, &none, 0,
           "memtrack check: out-of-bounds global write of 4 bytes at 0x7f0000001000\n"
           "    in _Z5writePfi, block (3,0,0), thread (255,1,0)\n"
           "    at app.cu:12 (PTX line 31: st.global.f32 [%rd4], %f1)\n"
           "    address is not inside or next to any live allocation\n"
           "    the access was not performed (redirected to a sink)\n");

    mt_check_record un = rec;
    un.kind = MT_CHECK_UNINIT;
    mt_check_site ld4 = ld;
    ld4.size = 4;
    mt_check_where inside = {1, 0x7f0000000000, 0x2000, 1, "cuMemAlloc"};
    expect(&un, &ld4, NULL, &inside, 0,
           "memtrack check: read of 4 bytes at 0x7f0000001000 uses uninitialised memory\n"
           "    in _Z5writePfi, block (3,0,0), thread (255,1,0)\n"
           "    at PTX line 31: ld.global.u8 %rs1, [%rd2]\n"
           "    address is 4096 bytes into a 8192-byte allocation at 0x7f0000000000 (cuMemAlloc #1)\n");

    mt_check_record mis = rec;
    mis.kind = MT_CHECK_MISALIGNED;
    mis.addr = 0x7f0000001002;
    expect(&mis, &st, NULL, &after, 0,
           "memtrack check: misaligned write of 4 bytes at 0x7f0000001002 (the address must be a multiple of 4)\n"
           "    in _Z5writePfi, block (3,0,0), thread (255,1,0)\n"
           "    at app.cu:12 (PTX line 31: st.global.f32 [%rd4], %f1)\n"
           "    the access was not performed (redirected to a sink)\n");

    mt_check_record loc = rec;
    loc.kind = MT_CHECK_LOCAL_BOUND;
    loc.addr = 0x1400000;
    mt_check_site lst = st;
    lst.space = MT_CHECK_LOCAL;
    expect(&loc, &lst, NULL, NULL, 0,
           "memtrack check: local-memory write of 4 bytes at 0x1400000 past the top of the thread's local memory\n"
           "    in _Z5writePfi, block (3,0,0), thread (255,1,0)\n"
           "    at app.cu:12 (PTX line 31: st.global.f32 [%rd4], %f1)\n"
           "    the access was not performed (redirected to a sink)\n");

    mt_check_site pf = ld;
    pf.access = MT_CHECK_PREFETCH;
    pf.space = MT_CHECK_GENERIC;
    pf.text = "prefetch.L2 [%rd1]";
    expect(&rec, &pf, NULL, &after, 0,
           "memtrack check: out-of-bounds global prefetch of 1 byte at 0x7f0000001000 (checked at its 1 KiB "
           "boundary)\n"
           "    in _Z5writePfi, block (3,0,0), thread (255,1,0)\n"
           "    at PTX line 31: prefetch.L2 [%rd1]\n"
           "    address is 0 bytes after the end of a 4096-byte allocation at 0x7f0000000000 (cuMemAlloc #2)\n"
           "    the access was not performed (read from a safe address instead)\n");

    /* A site the runtime does not know (a module it lost track of). */
    expect(&rec, NULL, NULL, NULL, 0,
           "memtrack check: out-of-bounds global access of 0 bytes at 0x7f0000001000\n"
           "    in ?, block (3,0,0), thread (255,1,0)\n"
           "    at unknown check site 7\n"
           "    the access was not performed (redirected to a sink)\n");

    /* Truncation: NUL-terminated, full length returned. */
    char small[16];
    size_t full = mt_check_format(small, sizeof small, &rec, &st, NULL, &after, 0);
    MT_CHECK(full > sizeof small);
    MT_CHECK_UINT_EQ(strlen(small), sizeof small - 1);
    MT_CHECK(strncmp(small, "memtrack check:", 15) == 0);
    MT_CHECK_UINT_EQ(mt_check_format(NULL, 0, &rec, &st, NULL, &after, 0), full);

    MT_CHECK(strcmp(mt_check_kind_name(MT_CHECK_UNINIT), "uninitialised") == 0);
    MT_CHECK(strcmp(mt_check_kind_name(99), "unknown") == 0);
    MT_CHECK(strcmp(mt_strerror(MT_ECHECK_NOACCESS), "address not addressable") == 0);
    MT_CHECK(strcmp(mt_strerror(MT_ECHECK_UNINIT), "read of uninitialised memory") == 0);
    printf("test_check_report: ok\n");
    return 0;
}
