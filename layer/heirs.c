/* auto's memory of memories: applications that allocate and free memories
 * of the same size and type over and over (a video decoder's frames, an
 * engine's per-frame staging) would make every new memory learn its write
 * density from scratch, in guard: the first captures of each pay a fault
 * per written page before the autopilot moves it to scan or bulk. A freed
 * auto memory leaves what auto learned (its last mode and history) to the
 * next memory allocated with the same size, memory type and external kind.
 * The heir continues the history as if it were the same memory (a memory
 * that lives for one capture would otherwise never gather the captures a
 * decision needs). Only the starting point changes: every mode is exact,
 * and the autopilot goes on judging the new memory on its own captures.
 * dev->lock held. */
#include "layer.h"

static lt_heir *find(lt_device *dev, const lt_memory *m)
{
    for (size_t i = 0; i < LT_HEIRS; i++) {
        lt_heir *h = &dev->heirs[i];
        if (h->used && h->size == m->size && h->type_index == m->type_index && h->external == m->external)
            return h;
    }
    return NULL;
}

void lt_heirs_leave(lt_memory *m)
{
    lt_mode pref = m->auto_pref;
    if (!m->auto_mode || m->pinned || (pref != LT_SCAN && pref != LT_GUARD && pref != LT_COPY))
        return;
    /* Written whole and gone after a capture or two: the next one is
     * copied (autopilot.h, LT_AP_SHORT_LIFE). */
    if (pref == LT_SCAN && m->ap.bulk && m->lives <= LT_AP_SHORT_LIFE)
        pref = LT_COPY;
    lt_device *dev = m->dev;
    lt_heir *h = find(dev, m);
    if (!h) /* the oldest entry makes room */
        h = &dev->heirs[dev->next_heir++ % LT_HEIRS];
    *h = (lt_heir){.used = 1, .size = m->size, .type_index = m->type_index, .external = m->external,
                   .pref = pref, .ap = m->ap};
}

int lt_heirs_take(lt_memory *m)
{
    lt_heir *h = find(m->dev, m);
    if (!h)
        return 0;
    m->auto_pref = h->pref;
    m->ap = h->ap;
    m->inherited = 1;
    return 1;
}
