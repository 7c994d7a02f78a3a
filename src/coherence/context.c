/* The context: creation and shutdown, clients, queues, flush and finish,
 * counters. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

int mt_coh_create(const mt_coh_opts *opts, mt_coh **out)
{
    mt_coh_opts o = {0};
    if (opts)
        o = *opts;
    if (!out)
        return -EINVAL;
    long ps = (long)mti_page_size();
    if (!o.granularity)
        o.granularity = 4096;
    if (!o.track_chunk)
        o.track_chunk = 16u << 20;
    if (!o.pipeline_bytes)
        o.pipeline_bytes = 32u << 20;
    if (!o.batch)
        o.batch = 32;
    if (o.granularity < 16 || (o.granularity & (o.granularity - 1)) ||
        o.track_chunk % (uint64_t)ps || (o.flags & ~(uint32_t)MT_COH_WHOLE_BUFFER) ||
        (unsigned)o.track_backend > MT_TRACK_UFFD || o.collect_helper > 64)
        return -EINVAL;
    mt_coh *c = calloc(1, sizeof *c);
    if (!c)
        return -ENOMEM;
    c->o = o;
    c->token = mti_coh_process_token();
    c->pid = getpid();
    c->gran = o.granularity;
    c->page = (uint64_t)ps;
    c->hostmem_mask = COH_BIT(MT_COH_HOST);
    pthread_mutex_init(&c->lock, NULL);
    pthread_mutex_init(&c->fix_lock, NULL);
    int rc = mti_coh_pool_create(c);
    if (!rc)
        rc = mti_coh_loc_create(&c->loc[MT_COH_HOST]);
    if (!rc)
        rc = mti_coh_workers_start(c);
    if (rc) {
        mti_coh_loc_destroy(c->loc[MT_COH_HOST]);
        if (c->pool)
            mti_coh_pool_close(c);
        pthread_mutex_destroy(&c->lock);
        pthread_mutex_destroy(&c->fix_lock);
        free(c);
        return rc;
    }
    *out = c;
    return 0;
}

static void client_release(mt_coh *c, mt_coh_client *cl)
{
    while (cl->maps) {
        coh_map *m = cl->maps;
        cl->maps = m->cnext;
        mti_coh_map_end(c, m);
        free(m);
    }
    while (cl->queues) {
        mt_coh_queue *q = cl->queues;
        cl->queues = q->next;
        mti_coh_cmd_unref(q->last);
        free(q);
    }
    while (cl->views)
        mti_coh_view_free(c, cl->views);
    while (cl->svms) {
        coh_svm *s = cl->svms;
        cl->svms = s->next;
        s->freed = 1;
        if (s->kind == MT_COH_SVM_COARSE || s->views == 0)
            mti_coh_svm_release(c, s);
    }
    if (cl->prev)
        cl->prev->next = cl->next;
    else
        c->clients = cl->next;
    if (cl->next)
        cl->next->prev = cl->prev;
}

void mt_coh_destroy(mt_coh *c)
{
    if (!c || mti_coh_forked_slow(c))
        return;
    pthread_mutex_lock(&c->lock);
    c->closing = 1;
    mti_coh_doorbell_all(c);
    pthread_mutex_unlock(&c->lock);
    /* Engines stop: what has not started fails with MT_ECANCELED (and so do
     * its dependents), what runs is waited for. After this every command is
     * complete. */
    for (uint32_t i = 1; i <= c->ndev; i++)
        mti_coh_device_destroy(c->dev[i]);
    pthread_mutex_lock(&c->lock);
    mti_coh_fixups_run(c);
    while (c->clients) {
        mt_coh_client *cl = c->clients;
        client_release(c, cl);
        free(cl);
    }
    pthread_mutex_unlock(&c->lock);
    mti_coh_workers_stop(c);
    /* Timelines run the releases still deferred, then the devices go. */
    for (uint32_t i = 0; i <= c->ndev; i++)
        mti_coh_loc_destroy(c->loc[i]);
    for (uint32_t i = 1; i <= c->ndev; i++)
        mti_coh_device_free(c->dev[i]);
    mt_tracker_destroy(c->tracker);
    mti_coh_pool_close(c);
    free(c->slots);
    free(c->roots);
    pthread_mutex_destroy(&c->lock);
    pthread_mutex_destroy(&c->fix_lock);
    free(c);
}

int mt_coh_client_create(mt_coh *c, mt_coh_client **out)
{
    if (!c || !out)
        return -EINVAL;
    if (mti_coh_forked(c))
        return MT_EFORKED;
    mt_coh_client *cl = calloc(1, sizeof *cl);
    if (!cl)
        return -ENOMEM;
    cl->ctx = c;
    pthread_mutex_lock(&c->lock);
    if (c->closing) {
        pthread_mutex_unlock(&c->lock);
        free(cl);
        return MT_ECANCELED;
    }
    cl->next = c->clients;
    if (c->clients)
        c->clients->prev = cl;
    c->clients = cl;
    pthread_mutex_unlock(&c->lock);
    *out = cl;
    return 0;
}

void mt_coh_client_destroy(mt_coh_client *cl)
{
    if (!cl || mti_coh_forked_slow(cl->ctx))
        return;
    mt_coh *c = cl->ctx;
    pthread_mutex_lock(&c->lock);
    mti_coh_fixups_run(c);
    client_release(c, cl);
    pthread_mutex_unlock(&c->lock);
    free(cl);
}

int mt_coh_queue_create(mt_coh_client *cl, uint32_t device, mt_coh_queue **out)
{
    if (!cl || !out)
        return -EINVAL;
    mt_coh *c = cl->ctx;
    if (mti_coh_forked(c))
        return MT_EFORKED;
    mt_coh_queue *q = calloc(1, sizeof *q);
    if (!q)
        return -ENOMEM;
    pthread_mutex_lock(&c->lock);
    int rc = device == 0 || device > c->ndev ? -ENOENT : 0;
    if (!rc)
        rc = atomic_load_explicit(&c->dev[device]->lost, memory_order_acquire);
    if (rc) {
        pthread_mutex_unlock(&c->lock);
        free(q);
        return rc;
    }
    q->client = cl;
    q->dev = c->dev[device];
    q->next = cl->queues;
    cl->queues = q;
    pthread_mutex_unlock(&c->lock);
    *out = q;
    return 0;
}

void mt_coh_queue_destroy(mt_coh_queue *q)
{
    if (!q || mti_coh_forked_slow(q->client->ctx))
        return;
    mt_coh_client *cl = q->client;
    mt_coh *c = cl->ctx;
    pthread_mutex_lock(&c->lock);
    for (mt_coh_queue **p = &cl->queues; *p; p = &(*p)->next)
        if (*p == q) {
            *p = q->next;
            break;
        }
    mti_coh_cmd_unref(q->last);
    pthread_mutex_unlock(&c->lock);
    free(q);
}

int mt_coh_flush(mt_coh_queue *q)
{
    if (!q)
        return -EINVAL;
    mt_coh *c = q->client->ctx;
    if (mti_coh_forked(c))
        return MT_EFORKED;
    pthread_mutex_lock(&c->lock);
    mti_coh_doorbell_all(c);
    pthread_mutex_unlock(&c->lock);
    return 0;
}

int mt_coh_finish(mt_coh_queue *q)
{
    if (!q)
        return -EINVAL;
    mt_coh *c = q->client->ctx;
    if (mti_coh_forked_slow(c))
        return MT_EFORKED;
    pthread_mutex_lock(&c->lock);
    coh_cmd *last = q->last;
    if (last)
        mti_coh_cmd_ref(last);
    mti_coh_doorbell_all(c);
    pthread_mutex_unlock(&c->lock);
    if (!last)
        return 0;
    int rc = mt_coh_event_wait((mt_coh_event *)last, -1);
    mti_coh_cmd_unref(last);
    return rc;
}

int mt_coh_stats_get(mt_coh *c, mt_coh_stats *out)
{
    if (!c || !out)
        return -EINVAL;
    if (mti_coh_forked(c))
        return MT_EFORKED;
    pthread_mutex_lock(&c->lock);
    out->enqueues = c->st_enqueues;
    out->rejected = c->st_rejected;
    out->migrations = c->st_migrations;
    out->bytes_h2d = c->st_copied[MT_COH_OP_UPLOAD];
    out->bytes_d2h = c->st_copied[MT_COH_OP_DOWNLOAD];
    out->bytes_d2d = c->st_copied[MT_COH_OP_PEER];
    out->bytes_relay = c->st_relay;
    out->evictions = c->st_evictions;
    out->host_dirty_bytes = c->st_dirty;
    pthread_mutex_unlock(&c->lock);
    out->failed = atomic_load_explicit(&c->st_failed, memory_order_relaxed);
    return 0;
}

int mt_coh_track_status(mt_coh *c)
{
    if (!c)
        return -EINVAL;
    return atomic_load_explicit(&c->track_whole_chunks, memory_order_relaxed) ? 0 : 1;
}

int mt_coh_collect_helper_status(mt_coh *c)
{
    if (!c)
        return -EINVAL;
    if (mti_coh_forked(c))
        return MT_EFORKED;
    pthread_mutex_lock(&c->lock); /* the tracker is created under it */
    mt_tracker *t = c->tracker;
    pthread_mutex_unlock(&c->lock);
    return t ? mt_tracker_helper_status(t) : 0;
}
