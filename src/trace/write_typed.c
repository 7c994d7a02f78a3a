/* Typed shorthands over mt_trace_write(), and the content hash. */
#include <errno.h>
#include <string.h>
#include <xxhash.h>

#include "memtrack/trace.h"

#define WRITE(w, type_, field, ...)                                                                \
    do {                                                                                           \
        mt_trace_record r_ = {.type = type_};                                                      \
        r_.u.field = (__typeof__(r_.u.field)){__VA_ARGS__};                                        \
        return mt_trace_write(w, &r_);                                                             \
    } while (0)

int mt_trace_write_memory(mt_trace_writer *w, uint64_t id, uint64_t size, uint32_t type_index,
                          uint32_t property_flags)
{
    WRITE(w, MT_TRACE_MEMORY, memory, id, size, type_index, property_flags);
}

int mt_trace_write_object(mt_trace_writer *w, uint64_t id, uint32_t kind, uint64_t size,
                          uint64_t used_size)
{
    WRITE(w, MT_TRACE_OBJECT, object, id, kind, size, used_size);
}

int mt_trace_write_bind(mt_trace_writer *w, uint64_t object, uint64_t memory, uint64_t offset)
{
    WRITE(w, MT_TRACE_BIND, bind, object, memory, offset);
}

int mt_trace_write_map(mt_trace_writer *w, uint64_t memory, uint64_t offset, uint64_t size)
{
    WRITE(w, MT_TRACE_MAP, map, memory, offset, size);
}

int mt_trace_write_unmap(mt_trace_writer *w, uint64_t memory) { WRITE(w, MT_TRACE_UNMAP, unmap, memory); }

int mt_trace_write_update(mt_trace_writer *w, uint64_t memory, uint64_t object, uint64_t offset,
                          const void *data, size_t length)
{
    WRITE(w, MT_TRACE_UPDATE, update, memory, object, offset, data, length);
}

int mt_trace_write_destroy(mt_trace_writer *w, uint32_t what, uint64_t id)
{
    WRITE(w, MT_TRACE_DESTROY, destroy, what, id);
}

int mt_trace_write_annotation(mt_trace_writer *w, uint64_t id, const char *text)
{
    if (!text)
        return -EINVAL;
    WRITE(w, MT_TRACE_ANNOTATION, annotation, id, text, strlen(text));
}

int mt_trace_write_content_hash(mt_trace_writer *w, uint64_t memory, uint64_t offset,
                                uint64_t size, uint64_t hash)
{
    WRITE(w, MT_TRACE_CONTENT_HASH, content_hash, memory, offset, size, hash);
}

int mt_trace_write_mode(mt_trace_writer *w, uint64_t memory, const char *mode)
{
    if (!mode)
        return -EINVAL;
    WRITE(w, MT_TRACE_MODE, mode, memory, mode, strlen(mode));
}

int mt_trace_write_mismatch(mt_trace_writer *w, uint64_t memory, uint64_t object, uint64_t offset,
                            uint64_t length, uint32_t cause, uint64_t running)
{
    WRITE(w, MT_TRACE_MISMATCH, mismatch, memory, object, offset, length, cause, running);
}

int mt_trace_write_meta(mt_trace_writer *w, const char *key, const char *value)
{
    if (!key || !value)
        return -EINVAL;
    WRITE(w, MT_TRACE_META, meta, key, value, strlen(key), strlen(value));
}

uint64_t mt_trace_hash(const void *data, size_t size) { return XXH3_64bits(data, size); }
