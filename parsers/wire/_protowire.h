/* Protobuf wire-format reading shared by the C readers (_xline.c, _hloscan.c): every read is
 * checked against the end of the bytes, and a malformed one moves the position past it. */
#ifndef AUDIT_PROTOWIRE_H
#define AUDIT_PROTOWIRE_H

#include <Python.h>
#include <stdint.h>

/* The varint at *pos, which must end before `end`; on failure *pos is set past `end`. */
static inline uint64_t varint(const uint8_t *buf, Py_ssize_t *pos, Py_ssize_t end) {
    uint64_t result = 0;
    for (int shift = 0; shift < 64 && *pos < end; shift += 7) {
        uint8_t b = buf[(*pos)++];
        result |= (uint64_t)(b & 127) << shift;
        if (b < 128) return result;
    }
    *pos = end + 1;
    return 0;
}

/* The position after a field of wire type `wire` whose value starts at `pos`; past `end` when
 * malformed (groups included). */
static inline Py_ssize_t skip(const uint8_t *buf, Py_ssize_t pos, Py_ssize_t end, int wire) {
    uint64_t size;
    switch (wire) {
    case 0: varint(buf, &pos, end); return pos;
    case 1: return end - pos >= 8 ? pos + 8 : end + 1;
    case 2:
        size = varint(buf, &pos, end);
        return pos <= end && size <= (uint64_t)(end - pos) ? pos + (Py_ssize_t)size : end + 1;
    case 5: return end - pos >= 4 ? pos + 4 : end + 1;
    default: return end + 1;
    }
}

#endif
