/* Decode an encoded XLine's events straight from its protobuf bytes: the C build of
 * `xline_decode` (same contract as its numba and Python readers; see that module).
 *
 *   count_events(line) -> number of events, or -1 for malformed bytes
 *   decode(line, slot_of, metadata_id, offset_ps, duration_ps, occurrences, kind, value, length)
 *       -> the line's (timestamp_ns, duration_ps), or None for malformed bytes
 *
 * The arrays are any writable C-contiguous buffers (numpy arrays): int64 slot_of[ids],
 * int64 metadata_id/offset_ps/duration_ps/occurrences[n], uint8 kind[n*s], int64 value[n*s], int32 length[n*s].
 * Every read is checked against the end of the bytes; the GIL is released while decoding.
 * Field numbers (upstream xplane.proto):
 *   XLine:  2 name, 3 timestamp_ns, 4 events, 9 duration_ps, 11 display_name
 *   XEvent: 1 metadata_id, 2 offset_ps, 3 duration_ps, 4 stats, 5 num_occurrences
 *   XStat:  1 metadata_id, 2 double, 3 uint64, 4 int64, 5 str, 6 bytes, 7 ref
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "../wire/_protowire.h"

enum { ABSENT = 0, INT64 = 1, UINT64 = 2, DOUBLE = 3, STRING = 4, BYTES = 5, REF = 6 };

typedef struct {
    const uint8_t *buf;
    Py_ssize_t len;
    const int64_t *slot_of;
    Py_ssize_t ids;
    int64_t *mid, *off, *dur, *occ, *value;
    uint8_t *kind;
    int32_t *length;
    Py_ssize_t n, slots;
} Out;

/* Whether bytes are UTF-8 as protobuf's parser requires of a string field (no overlong forms, no
 * surrogates, nothing past U+10FFFF): the Python reader refuses a line holding any other. */
static int utf8(const uint8_t *s, Py_ssize_t n) {
    Py_ssize_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) { i++; continue; }
        int more = c >= 0xC2 && c <= 0xDF ? 1 : c >= 0xE0 && c <= 0xEF ? 2 : c >= 0xF0 && c <= 0xF4 ? 3 : -1;
        if (more < 0 || n - i <= more) return 0;
        uint8_t lo = 0x80, hi = 0xBF, d = s[i + 1];
        if (c == 0xE0) lo = 0xA0;
        else if (c == 0xED) hi = 0x9F;
        else if (c == 0xF0) lo = 0x90;
        else if (c == 0xF4) hi = 0x8F;
        if (d < lo || d > hi) return 0;
        for (int k = 2; k <= more; k++)
            if (s[i + k] < 0x80 || s[i + k] > 0xBF) return 0;
        i += more + 1;
    }
    return 1;
}

/* A stat's value as the Python reader takes it from the message (events.PlaneStats.value): a
 * non-zero ref, else a non-empty string, else a non-zero int64, uint64, double, else non-empty
 * bytes; a stat with none of them is there, valued 0 (INT64 0). Each field's last value on the wire
 * is its value, as protobuf reads it. */
static int read_stat(const Out *o, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t i) {
    int64_t id = 0; /* protobuf's default: a stat that states no id is stat 0 */
    uint64_t i64 = 0, u64 = 0, ref = 0, dbl = 0;
    Py_ssize_t str_at = 0, str_len = 0, bytes_at = 0, bytes_len = 0;
    while (pos < end) {
        uint64_t tag = varint(o->buf, &pos, end);
        int field = (int)(tag >> 3), wire = (int)(tag & 7);
        if (pos > end) return 0;
        if (field == 1 && wire == 0) {
            id = (int64_t)varint(o->buf, &pos, end);
        } else if (field == 2 && wire == 1) {
            if (end - pos < 8) return 0;
            dbl = 0;
            for (int b = 0; b < 8; b++) dbl |= (uint64_t)o->buf[pos + b] << (8 * b);
            pos += 8;
        } else if (wire == 0 && (field == 3 || field == 4 || field == 7)) {
            uint64_t v = varint(o->buf, &pos, end);
            if (field == 3) u64 = v;
            else if (field == 4) i64 = v;
            else ref = v;
        } else if (wire == 2 && (field == 5 || field == 6)) {
            uint64_t n = varint(o->buf, &pos, end);
            if (pos > end || n > (uint64_t)(end - pos)) return 0;
            if (field == 5 && !utf8(o->buf + pos, (Py_ssize_t)n)) return 0;
            if (field == 5) str_at = pos, str_len = (Py_ssize_t)n;
            else bytes_at = pos, bytes_len = (Py_ssize_t)n;
            pos += (Py_ssize_t)n;
        } else {
            pos = skip(o->buf, pos, end, wire);
        }
    }
    if (pos != end) return 0;
    int k = INT64;
    int64_t v = 0, size = 0;
    if (ref) k = REF, v = (int64_t)ref;
    else if (str_len) k = STRING, v = str_at, size = str_len;
    else if (i64) k = INT64, v = (int64_t)i64;
    else if (u64) k = UINT64, v = (int64_t)u64;
    else if (dbl << 1) k = DOUBLE, v = (int64_t)dbl; /* -0.0 is zero, as Python's truth test has it */
    else if (bytes_len) k = BYTES, v = bytes_at, size = bytes_len;
    if (id >= 0 && id < o->ids && o->slot_of[id] >= 0 && o->slot_of[id] < o->slots) {
        Py_ssize_t at = i * o->slots + (Py_ssize_t)o->slot_of[id];
        o->kind[at] = (uint8_t)k;
        o->value[at] = v;
        o->length[at] = (k == STRING || k == BYTES) ? (int32_t)size : 0;
    }
    return 1;
}

/* A string field of the line (name 2, display_name 11): skipped, but it must be UTF-8. */
static Py_ssize_t skip_string(const uint8_t *buf, Py_ssize_t pos, Py_ssize_t end) {
    uint64_t n = varint(buf, &pos, end);
    if (pos > end || n > (uint64_t)(end - pos) || !utf8(buf + pos, (Py_ssize_t)n)) return end + 1;
    return pos + (Py_ssize_t)n;
}

static int read_event(const Out *o, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t i) {
    while (pos < end) {
        uint64_t tag = varint(o->buf, &pos, end);
        int field = (int)(tag >> 3), wire = (int)(tag & 7);
        if (pos > end) return 0;
        if (wire == 0 && (field <= 3 || field == 5)) {
            int64_t v = (int64_t)varint(o->buf, &pos, end);
            if (field == 1) o->mid[i] = v;
            else if (field == 2) o->off[i] = v;
            else if (field == 3) o->dur[i] = v;
            else if (field == 5) o->occ[i] = v;
        } else if (field == 4 && wire == 2) {
            uint64_t size = varint(o->buf, &pos, end);
            if (pos > end || size > (uint64_t)(end - pos)) return 0;
            if (!read_stat(o, pos, pos + (Py_ssize_t)size, i)) return 0;
            pos += (Py_ssize_t)size;
        } else {
            pos = skip(o->buf, pos, end, wire);
        }
    }
    return pos == end;
}

static int64_t count(const uint8_t *buf, Py_ssize_t end) {
    Py_ssize_t pos = 0;
    int64_t n = 0;
    while (pos < end) {
        uint64_t tag = varint(buf, &pos, end);
        if (pos >= end) return -1;
        if (tag == 34) n++;
        pos = tag == 18 || tag == 90 ? skip_string(buf, pos, end) : skip(buf, pos, end, (int)(tag & 7));
    }
    return pos == end ? n : -1;
}

/* Fill the arrays and line[0..2) = (timestamp_ns, duration_ps); 1, or 0 for malformed bytes. */
static int decode(const Out *o, int64_t *line) {
    Py_ssize_t pos = 0, end = o->len, i = 0;
    line[0] = line[1] = 0;
    while (pos < end) {
        uint64_t tag = varint(o->buf, &pos, end);
        if (pos >= end) return 0;
        if (tag == 24 || tag == 72) {
            line[tag == 72] = (int64_t)varint(o->buf, &pos, end);
        } else if (tag == 34) {
            uint64_t size = varint(o->buf, &pos, end);
            if (pos > end || size > (uint64_t)(end - pos) || i >= o->n) return 0;
            if (!read_event(o, pos, pos + (Py_ssize_t)size, i)) return 0;
            pos += (Py_ssize_t)size;
            i++;
        } else {
            pos = tag == 18 || tag == 90 ? skip_string(o->buf, pos, end) : skip(o->buf, pos, end, (int)(tag & 7));
        }
    }
    return pos == end && i == o->n;
}

static PyObject *py_count_events(PyObject *self, PyObject *arg) {
    Py_buffer line;
    if (PyObject_GetBuffer(arg, &line, PyBUF_SIMPLE) < 0) return NULL;
    int64_t n;
    Py_BEGIN_ALLOW_THREADS
    n = count((const uint8_t *)line.buf, line.len);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&line);
    return PyLong_FromLongLong(n);
}

/* A C-contiguous buffer of `itemsize`-byte items, writable or not; its item count in *items. */
static int get(PyObject *obj, Py_buffer *view, Py_ssize_t itemsize, int writable, const char *what) {
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0)) < 0) return 0;
    if (view->itemsize != itemsize) {
        PyErr_Format(PyExc_TypeError, "%s: expected %zd-byte items, got %zd", what, itemsize, view->itemsize);
        PyBuffer_Release(view);
        return 0;
    }
    return 1;
}

static PyObject *py_decode(PyObject *self, PyObject *args) {
    PyObject *objs[9];
    static const Py_ssize_t sizes[9] = {1, 8, 8, 8, 8, 8, 1, 8, 4};
    static const char *names[9] = {"line", "slot_of", "metadata_id", "offset_ps", "duration_ps", "occurrences",
                                   "kind", "value", "length"};
    Py_buffer views[9];
    int got = 0;
    if (!PyArg_ParseTuple(args, "OOOOOOOOO:decode", &objs[0], &objs[1], &objs[2], &objs[3], &objs[4], &objs[5],
                          &objs[6], &objs[7], &objs[8]))
        return NULL;
    for (; got < 9; got++)
        if (!get(objs[got], &views[got], sizes[got], got >= 2, names[got])) break;
    PyObject *result = NULL;
    if (got == 9) {
        Py_ssize_t n = views[2].len / 8;
        Py_ssize_t slots = n ? views[6].len / n : 0;
        if (views[3].len / 8 != n || views[4].len / 8 != n || views[5].len / 8 != n || views[6].len != n * slots ||
            views[7].len / 8 != n * slots || views[8].len / 4 != n * slots) {
            PyErr_SetString(PyExc_ValueError, "decode: the output arrays disagree on the number of events or slots");
        } else {
            Out o = {views[0].buf, views[0].len, views[1].buf, views[1].len / 8, views[2].buf, views[3].buf,
                     views[4].buf, views[5].buf, views[7].buf, views[6].buf, views[8].buf, n, slots};
            int64_t line[2];
            int ok;
            Py_BEGIN_ALLOW_THREADS
            ok = decode(&o, line);
            Py_END_ALLOW_THREADS
            result = ok ? Py_BuildValue("(LL)", (long long)line[0], (long long)line[1]) : Py_NewRef(Py_None);
        }
    }
    while (got > 0) PyBuffer_Release(&views[--got]);
    return result;
}

static PyMethodDef methods[] = {
    {"count_events", py_count_events, METH_O, "Events in an encoded XLine, or -1 for malformed bytes."},
    {"decode", py_decode, METH_VARARGS,
     "Fill the arrays from an encoded XLine; its (timestamp_ns, duration_ps), or None for malformed bytes."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_xline", "XLine events decoded in C.", -1, methods};

PyMODINIT_FUNC PyInit__xline(void) { return PyModule_Create(&module); }
