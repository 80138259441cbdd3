/* Decode an encoded XLine's events straight from its protobuf bytes: the C build of
 * `xline_decode` (same contract as its numba and Python readers; see that module).
 *
 *   count_events(line) -> number of events, or -1 for malformed bytes
 *   decode(line, slot_of, metadata_id, offset_ps, duration_ps, kind, value, length)
 *       -> the line's timestamp_ns, or -1 for malformed bytes
 *
 * The arrays are any writable C-contiguous buffers (numpy arrays): int64 slot_of[ids],
 * int64 metadata_id/offset_ps/duration_ps[n], uint8 kind[n*s], int64 value[n*s], int32 length[n*s].
 * Every read is checked against the end of the bytes; the GIL is released while decoding.
 * Field numbers (upstream xplane.proto):
 *   XLine:  3 timestamp_ns, 4 events        XEvent: 1 metadata_id, 2 offset_ps, 3 duration_ps, 4 stats
 *   XStat:  1 metadata_id, 2 double, 3 uint64, 4 int64, 5 str, 6 bytes, 7 ref
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_protowire.h"

enum { ABSENT = 0, INT64 = 1, UINT64 = 2, DOUBLE = 3, STRING = 4, BYTES = 5, REF = 6 };

typedef struct {
    const uint8_t *buf;
    Py_ssize_t len;
    const int64_t *slot_of;
    Py_ssize_t ids;
    int64_t *mid, *off, *dur, *value;
    uint8_t *kind;
    int32_t *length;
    Py_ssize_t n, slots;
} Out;

static int read_stat(const Out *o, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t i) {
    int64_t id = -1, v = 0, size = 0;
    int k = ABSENT;
    while (pos < end) {
        uint64_t tag = varint(o->buf, &pos, end);
        int field = (int)(tag >> 3), wire = (int)(tag & 7);
        if (pos > end) return 0;
        if (field == 1 && wire == 0) {
            id = (int64_t)varint(o->buf, &pos, end);
        } else if (field == 2 && wire == 1) {
            if (end - pos < 8) return 0;
            uint64_t bits = 0;
            for (int b = 0; b < 8; b++) bits |= (uint64_t)o->buf[pos + b] << (8 * b);
            v = (int64_t)bits, k = DOUBLE, pos += 8;
        } else if (wire == 0 && (field == 3 || field == 4 || field == 7)) {
            v = (int64_t)varint(o->buf, &pos, end);
            k = field == 3 ? UINT64 : (field == 4 ? INT64 : REF);
        } else if (wire == 2 && (field == 5 || field == 6)) {
            uint64_t n = varint(o->buf, &pos, end);
            if (pos > end || n > (uint64_t)(end - pos)) return 0;
            v = pos, size = (int64_t)n, k = field == 5 ? STRING : BYTES;
            pos += (Py_ssize_t)n;
        } else {
            pos = skip(o->buf, pos, end, wire);
        }
    }
    if (pos != end) return 0;
    if (id >= 0 && id < o->ids && o->slot_of[id] >= 0 && o->slot_of[id] < o->slots) {
        Py_ssize_t at = i * o->slots + (Py_ssize_t)o->slot_of[id];
        o->kind[at] = (uint8_t)k;
        o->value[at] = v;
        o->length[at] = (k == STRING || k == BYTES) ? (int32_t)size : 0;
    }
    return 1;
}

static int read_event(const Out *o, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t i) {
    while (pos < end) {
        uint64_t tag = varint(o->buf, &pos, end);
        int field = (int)(tag >> 3), wire = (int)(tag & 7);
        if (pos > end) return 0;
        if (wire == 0 && field <= 3) {
            int64_t v = (int64_t)varint(o->buf, &pos, end);
            if (field == 1) o->mid[i] = v;
            else if (field == 2) o->off[i] = v;
            else if (field == 3) o->dur[i] = v;
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
        pos = skip(buf, pos, end, (int)(tag & 7));
    }
    return pos == end ? n : -1;
}

static int64_t decode(const Out *o) {
    Py_ssize_t pos = 0, end = o->len, i = 0;
    int64_t ts = 0;
    while (pos < end) {
        uint64_t tag = varint(o->buf, &pos, end);
        if (pos >= end) return -1;
        if (tag == 24) {
            ts = (int64_t)varint(o->buf, &pos, end);
        } else if (tag == 34) {
            uint64_t size = varint(o->buf, &pos, end);
            if (pos > end || size > (uint64_t)(end - pos) || i >= o->n) return -1;
            if (!read_event(o, pos, pos + (Py_ssize_t)size, i)) return -1;
            pos += (Py_ssize_t)size;
            i++;
        } else {
            pos = skip(o->buf, pos, end, (int)(tag & 7));
        }
    }
    return pos == end && i == o->n ? ts : -1;
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
    PyObject *objs[8];
    static const Py_ssize_t sizes[8] = {1, 8, 8, 8, 8, 1, 8, 4};
    static const char *names[8] = {"line", "slot_of", "metadata_id", "offset_ps", "duration_ps", "kind", "value",
                                   "length"};
    Py_buffer views[8];
    int got = 0;
    if (!PyArg_ParseTuple(args, "OOOOOOOO:decode", &objs[0], &objs[1], &objs[2], &objs[3], &objs[4], &objs[5],
                          &objs[6], &objs[7]))
        return NULL;
    for (; got < 8; got++)
        if (!get(objs[got], &views[got], sizes[got], got >= 2, names[got])) break;
    PyObject *result = NULL;
    if (got == 8) {
        Py_ssize_t n = views[2].len / 8;
        Py_ssize_t slots = n ? views[5].len / n : 0;
        if (views[3].len / 8 != n || views[4].len / 8 != n || views[5].len != n * slots ||
            views[6].len / 8 != n * slots || views[7].len / 4 != n * slots) {
            PyErr_SetString(PyExc_ValueError, "decode: the output arrays disagree on the number of events or slots");
        } else {
            Out o = {views[0].buf, views[0].len, views[1].buf, views[1].len / 8, views[2].buf, views[3].buf,
                     views[4].buf, views[6].buf, views[5].buf, views[7].buf, n, slots};
            int64_t ts;
            Py_BEGIN_ALLOW_THREADS
            ts = decode(&o);
            Py_END_ALLOW_THREADS
            result = PyLong_FromLongLong(ts);
        }
    }
    while (got > 0) PyBuffer_Release(&views[--got]);
    return result;
}

static PyMethodDef methods[] = {
    {"count_events", py_count_events, METH_O, "Events in an encoded XLine, or -1 for malformed bytes."},
    {"decode", py_decode, METH_VARARGS, "Fill the arrays from an encoded XLine; its timestamp_ns, or -1."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_xline", "XLine events decoded in C.", -1, methods};

PyMODINIT_FUNC PyInit__xline(void) { return PyModule_Create(&module); }
