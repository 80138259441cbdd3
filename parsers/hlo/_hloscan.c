/* Split a serialized HloComputationProto's instructions into what differs between copies of one
 * instruction and what they share: the C build of the proto reader's per-instruction split (same
 * contract as its Python path; see parsers/hlo/proto.py).
 *
 *   instructions(computation) -> (names, ids, operand_ids, called_ids, rests), or None
 *   computations(module, wrapped) -> [that of each computation, in order], or None: of a serialized
 *       HloModuleProto, or of the module of an HloProto (`wrapped`)
 *
 * names: str, ids: int, operand_ids and called_ids: tuples of int, one of each per instruction;
 * rests: bytes, the instruction's encoding less those fields and its control predecessors. None
 * for bytes that are malformed, use groups, or hold a name that is not UTF-8 (the Python path
 * then reads the computation). Every read is checked against the end of the bytes.
 * Field numbers (upstream hlo.proto):
 *   HloProto: 1 hlo_module           HloModuleProto: 3 computations
 *   HloComputationProto: 2 instructions
 *   HloInstructionProto: 1 name, 35 id, 36 operand_ids, 37 control_predecessor_ids,
 *                        38 called_computation_ids
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "../wire/_protowire.h"

/* Append the int64s of one repeated-integer field (packed or not) to `out`; -1 when malformed. */
static int integers(const uint8_t *buf, Py_ssize_t pos, Py_ssize_t end, int wire, PyObject *out) {
    Py_ssize_t stop = end;
    if (wire == 2) {
        uint64_t size = varint(buf, &pos, end);
        if (pos > end || size > (uint64_t)(end - pos)) return -1;
        stop = pos + (Py_ssize_t)size;
    } else if (wire != 0) {
        return -1;
    }
    do {
        int64_t v = (int64_t)varint(buf, &pos, stop);
        if (pos > stop) return -1;
        PyObject *n = PyLong_FromLongLong(v);
        if (n == NULL || PyList_Append(out, n) < 0) { Py_XDECREF(n); return -1; }
        Py_DECREF(n);
    } while (wire == 2 && pos < stop);
    return 0;
}

typedef struct { PyObject *names, *ids, *operands, *called, *rests; } Lists;

/* One instruction's fields, its bytes in [pos, end): its name and id (`kept`: what the model keeps),
 * else its operands, callees and rest (`rest` a buffer as long as its bytes). -1 on error. */
static int instruction(const uint8_t *buf, Py_ssize_t pos, Py_ssize_t end, uint8_t *rest, Lists *out, int kept_part) {
    PyObject *name = NULL, *operands = NULL, *called = NULL, *t;
    int64_t id = 0;
    Py_ssize_t kept = 0;
    int ok = 1;
    if (!kept_part) {
        operands = PyList_New(0);
        called = PyList_New(0);
        ok = operands != NULL && called != NULL;
    }
    while (ok && pos < end) {
        Py_ssize_t start = pos;
        uint64_t tag = varint(buf, &pos, end);
        int field = (int)(tag >> 3), wire = (int)(tag & 7);
        Py_ssize_t value = pos, next = pos > end ? end + 1 : skip(buf, pos, end, wire);
        if (next > end) { ok = 0; break; }
        if (field == 1 && wire == 2 && kept_part) {
            Py_ssize_t at = value;
            uint64_t size = varint(buf, &at, end);
            Py_XDECREF(name);
            name = PyUnicode_DecodeUTF8((const char *)buf + at, (Py_ssize_t)size, NULL);
            ok = name != NULL;
        } else if (field == 35 && wire == 0) {
            id = (int64_t)varint(buf, &value, end);
        } else if (field == 1 && wire == 2) {
        } else if (field == 36) {
            ok = kept_part || integers(buf, value, next, wire, operands) == 0;
        } else if (field == 38) {
            ok = kept_part || integers(buf, value, next, wire, called) == 0;
        } else if (field != 37 && !kept_part) {
            memcpy(rest + kept, buf + start, (size_t)(next - start));
            kept += next - start;
        }
        pos = next;
    }
    if (ok && kept_part) {
        if (name == NULL) name = PyUnicode_FromStringAndSize("", 0);
        ok = name != NULL && PyList_Append(out->names, name) == 0;
        t = ok ? PyLong_FromLongLong(id) : NULL;
        ok = t != NULL && PyList_Append(out->ids, t) == 0; Py_XDECREF(t);
    } else if (ok) {
        t = PyList_AsTuple(operands);
        ok = t != NULL && PyList_Append(out->operands, t) == 0; Py_XDECREF(t);
        t = ok ? PyList_AsTuple(called) : NULL;
        ok = t != NULL && PyList_Append(out->called, t) == 0; Py_XDECREF(t);
        t = ok ? PyBytes_FromStringAndSize((const char *)rest, kept) : NULL;
        ok = t != NULL && PyList_Append(out->rests, t) == 0; Py_XDECREF(t);
    }
    Py_XDECREF(name);
    Py_XDECREF(operands);
    Py_XDECREF(called);
    return ok ? 0 : -1;
}

/* The split of the computation in [pos, end) of `buf`: a new 5-tuple, or NULL (an exception set
 * when it is one Python must see, none for bytes the Python path reads instead). */
static PyObject *split(const uint8_t *buf, Py_ssize_t pos, Py_ssize_t end) {
    Lists out = {PyList_New(0), PyList_New(0), PyList_New(0), PyList_New(0), PyList_New(0)};
    uint8_t *rest = PyMem_Malloc(end > pos ? (size_t)(end - pos) : 1);
    int ok = out.names && out.ids && out.operands && out.called && out.rests && rest;
    /* What the model keeps first, then what it drops: made together, the dropped objects would
     * leave the kept ones scattered over memory the allocator cannot give back (200 MB of 500). */
    for (int kept_part = 1; kept_part >= 0; kept_part--) {
        Py_ssize_t at = pos;
        while (ok && at < end) {
            uint64_t tag = varint(buf, &at, end);
            int field = (int)(tag >> 3), wire = (int)(tag & 7);
            Py_ssize_t value = at, next = at > end ? end + 1 : skip(buf, at, end, wire);
            if (next > end) { ok = 0; break; }
            if (field == 2 && wire == 2) {
                varint(buf, &value, end);  /* the length, checked by skip */
                ok = instruction(buf, value, next, rest, &out, kept_part) == 0;
            }
            at = next;
        }
    }
    PyMem_Free(rest);
    PyObject *result = ok ? PyTuple_Pack(5, out.names, out.ids, out.operands, out.called, out.rests) : NULL;
    Py_XDECREF(out.names);
    Py_XDECREF(out.ids);
    Py_XDECREF(out.operands);
    Py_XDECREF(out.called);
    Py_XDECREF(out.rests);
    return result;
}

/* None in place of a failed split, unless Python must see its exception (memory). */
static PyObject *or_none(PyObject *result) {
    if (result != NULL || PyErr_ExceptionMatches(PyExc_MemoryError)) return result;
    PyErr_Clear();  /* malformed, or a name that is not UTF-8: the Python path reads it */
    Py_RETURN_NONE;
}

static PyObject *py_instructions(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    PyObject *result = split(view.buf, 0, view.len);
    PyBuffer_Release(&view);
    return or_none(result);
}

/* Append the split of every computation of the HloModuleProto in [pos, end) (field 3) to `out`. */
static int module_computations(const uint8_t *buf, Py_ssize_t pos, Py_ssize_t end, PyObject *out) {
    while (pos < end) {
        uint64_t tag = varint(buf, &pos, end);
        int field = (int)(tag >> 3), wire = (int)(tag & 7);
        Py_ssize_t value = pos, next = pos > end ? end + 1 : skip(buf, pos, end, wire);
        if (next > end) return -1;
        if (field == 3 && wire == 2) {
            varint(buf, &value, end);
            PyObject *one = split(buf, value, next);
            if (one == NULL || PyList_Append(out, one) < 0) { Py_XDECREF(one); return -1; }
            Py_DECREF(one);
        }
        pos = next;
    }
    return 0;
}

static PyObject *py_computations(PyObject *self, PyObject *args) {
    Py_buffer view;
    int wrapped;
    if (!PyArg_ParseTuple(args, "y*p", &view, &wrapped)) return NULL;
    const uint8_t *buf = view.buf;
    Py_ssize_t pos = 0, end = view.len;
    PyObject *out = PyList_New(0);
    int ok = out != NULL;
    if (ok && !wrapped) ok = module_computations(buf, 0, end, out) == 0;
    while (ok && wrapped && pos < end) {  /* an HloProto: its module (field 1), merged if repeated */
        uint64_t tag = varint(buf, &pos, end);
        int field = (int)(tag >> 3), wire = (int)(tag & 7);
        Py_ssize_t value = pos, next = pos > end ? end + 1 : skip(buf, pos, end, wire);
        if (next > end) { ok = 0; break; }
        if (field == 1 && wire == 2) {
            varint(buf, &value, end);
            ok = module_computations(buf, value, next, out) == 0;
        }
        pos = next;
    }
    PyBuffer_Release(&view);
    if (!ok) Py_CLEAR(out);
    return or_none(out);
}

static PyMethodDef methods[] = {
    {"computations", py_computations, METH_VARARGS,
     "The split of each computation of a serialized HloModuleProto (or HloProto, wrapped), or None."},
    {"instructions", py_instructions, METH_O,
     "(names, ids, operand_ids, called_ids, rests) of a serialized HloComputationProto's instructions, or None."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_hloscan", "HLO instructions split in C.", -1, methods};

PyMODINIT_FUNC PyInit__hloscan(void) { return PyModule_Create(&module); }
