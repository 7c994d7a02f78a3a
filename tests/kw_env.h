/* kw_env.h: the set-up the interposer's kernel-write tests share
 * (test_track_idem, test_track_kwout): 8 tracked pages per backend, a call's
 * output placed across pages 2 and 3, and the check that exactly those two
 * pages are reported once, with errno left alone. */
#ifndef MT_KW_ENV_H
#define MT_KW_ENV_H

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "track_child.h"
#include "track_util.h"

#define NP 8

typedef struct env {
    mt_tracker *t;
    mt_range_id id;
    unsigned char *m;
    size_t ps;
    mt_track_backend be;
} env;

/* Where a call writes: straddling pages 2 and 3; 8-byte aligned from 16
 * bytes on (structures), not below (an int cannot straddle aligned: read it
 * back with memcpy). */
static inline void *spot(env *e, size_t len)
{
    uintptr_t p = (uintptr_t)(e->m + 3 * e->ps - len / 2);
    return (void *)(len >= 16 ? p & ~(uintptr_t)7 : p);
}

/* The pages reported by one collect, as a bitmap in *seen; their count. */
static inline size_t collected(env *e, unsigned char *seen)
{
    memset(seen, 0, NP);
    return tu_collect_into(e->t, e->id, (uintptr_t)e->m, (uintptr_t)e->m, seen, NP);
}

/* After a call whose output straddled pages 2 and 3: exactly those pages,
 * then nothing; errno as the test left it (4321). */
static inline void check_written(env *e, const char *name)
{
    if (errno != 4321)
        fprintf(stderr, "%s: errno %d\n", name, errno);
    MT_CHECK_INT_EQ(errno, 4321);
    unsigned char seen[NP];
    size_t n = collected(e, seen);
    if (n != 2 || !seen[2] || !seen[3])
        fprintf(stderr, "%s: %zu pages reported\n", name, n);
    MT_CHECK(n == 2 && seen[2] && seen[3]);
    MT_CHECK(collected(e, seen) == 0);
}

/* Runs body on 8 fresh tracked pages (nothing reported yet) with each
 * backend; needs the interposer (77 without). */
static inline int kw_env_main(void (*body)(env *), const char *done)
{
    if (!tc_need_interposer())
        return 77;
    mt_track_backend be[2];
    int nb = tu_backends(be);
    for (int i = 0; i < nb; i++) {
        env e = {.ps = tu_page(), .be = be[i]};
        mt_tracker_opts to = {.backend = be[i]};
        MT_CHECK_OK(mt_tracker_create(&to, &e.t));
        e.m = tu_map(NP * e.ps);
        mt_range_opts ro = {.backend = be[i]};
        MT_CHECK_OK(mt_tracker_add(e.t, e.m, NP * e.ps, &ro, &e.id));
        unsigned char seen[NP];
        MT_CHECK(collected(&e, seen) == 0);
        body(&e);
        printf("  %-58s ok\n", mt_track_backend_name(be[i]));
        MT_CHECK_OK(mt_tracker_remove(e.t, e.id));
        mt_tracker_destroy(e.t);
        munmap(e.m, NP * e.ps);
    }
    puts(done);
    return 0;
}

#endif
