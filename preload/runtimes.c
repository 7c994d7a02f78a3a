/* Language runtimes that make their own system calls. Go's runtime issues
 * read(), pread() and the rest with its own system call instruction, never
 * through libc, so no wrapper here can bracket a kernel write into tracked
 * memory: with the signal backend such a read into a protected page fails
 * with EFAULT in the application (a Go program's os.File.Read into a
 * mapping returns an error). The only exact answer is the one io_uring gets
 * (async.c): report an unbracketed writer, and track stops protecting
 * signal-backend memory (every collect reports every page; uffd ranges keep
 * tracking, the kernel's writes fault there as the application's do).
 *
 * Go code is recognised by the build-id note its linker puts into every ELF
 * object it links (name "Go", type 4, ELF_NOTE_GOBUILDID_TAG; also with
 * external linking, which cgo, and so any Go program using Vulkan, needs),
 * looked for in the loaded objects' PT_NOTE segments when a tracker
 * attaches: a Go executable, or a Go library (c-shared) loaded by then. One
 * dlopen()ed later is not seen (docs/track.md, "Remaining limits"). */
#define _GNU_SOURCE
#include <link.h>
#include <string.h>

#include "preload.h"

#define GO_NOTE_TYPE 4

/* Walks the notes of one PT_NOTE segment (aligned to 4 or 8). */
static int go_note_in(const char *p, size_t size, size_t align)
{
    size_t a = align == 8 ? 8 : 4, off = 0;
    while (size - off >= sizeof(ElfW(Nhdr))) {
        const ElfW(Nhdr) *n = (const void *)(p + off);
        size_t name = off + sizeof *n;
        size_t desc = name + (((size_t)n->n_namesz + a - 1) & ~(a - 1));
        size_t next = desc + (((size_t)n->n_descsz + a - 1) & ~(a - 1));
        if (next > size || next <= off)
            return 0; /* malformed: stop */
        if (n->n_type == GO_NOTE_TYPE && n->n_namesz == 4 && memcmp(p + name, "Go\0", 4) == 0)
            return 1;
        off = next;
    }
    return 0;
}

/* Is [vaddr, vaddr+size) inside one of the object's loaded segments? A
 * PT_NOTE need not be (the ELF format allows notes only in the file):
 * such a note is not in memory to read. */
static int loaded(const struct dl_phdr_info *info, ElfW(Addr) vaddr, ElfW(Xword) size)
{
    for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD && ph->p_vaddr <= vaddr && size <= ph->p_memsz &&
            vaddr - ph->p_vaddr <= ph->p_memsz - size)
            return 1;
    }
    return 0;
}

static int visit(struct dl_phdr_info *info, size_t size, void *found)
{
    (void)size;
    for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_NOTE && loaded(info, ph->p_vaddr, ph->p_memsz) &&
            go_note_in((const char *)(info->dlpi_addr + ph->p_vaddr), ph->p_memsz, ph->p_align)) {
            *(int *)found = 1;
            return 1;
        }
    }
    return 0;
}

void mtp_runtimes_check(void)
{
    int go = 0;
    dl_iterate_phdr(visit, &go);
    if (go)
        mtp_async_note(MT_PRELOAD_ASYNC_RAW);
}
