/* Buffers in least-recently-used order: the C build of `residency._Recency` (same methods, same
 * floating-point operations in the same order, so the same distances to the last bit).
 *
 *   Recency(touches)       room for `touches` touches
 *   touch(buffer, size)    the buffer is used now
 *   since(buffer)          distinct bytes touched after it was; None when never touched
 *   forget(buffer)         drop it
 *   rename(old, new)       `new` is the buffer `old` was
 *
 * A Fenwick tree over touch times holds each buffer's size at its last touch; a walk of a big
 * program makes millions of touches, each a few dozen tree steps.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdlib.h>

typedef struct {
    PyObject_HEAD
    double *tree;
    Py_ssize_t end;   /* length of tree */
    Py_ssize_t time;  /* touches so far */
    double total;     /* every live touch's bytes: the prefix sum up to `time` */
    PyObject *last;   /* buffer -> time of its last touch */
    PyObject *size;   /* buffer -> its size at that touch */
} Recency;

static void add(Recency *r, Py_ssize_t at, double value) {
    r->total += value;
    while (at < r->end) {
        r->tree[at] += value;
        at += at & -at;
    }
}

static int init(Recency *r, PyObject *args, PyObject *kwds) {
    Py_ssize_t touches;
    if (!PyArg_ParseTuple(args, "n", &touches)) return -1;
    if (touches < 0) {
        PyErr_SetString(PyExc_ValueError, "touches must be >= 0");
        return -1;
    }
    free(r->tree);
    r->end = touches + 2;
    r->tree = calloc((size_t)r->end, sizeof(double));
    if (r->tree == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    r->time = 0;
    r->total = 0.0;
    Py_XSETREF(r->last, PyDict_New());
    Py_XSETREF(r->size, PyDict_New());
    return r->last && r->size ? 0 : -1;
}

static void dealloc(Recency *r) {
    free(r->tree);
    Py_XDECREF(r->last);
    Py_XDECREF(r->size);
    Py_TYPE(r)->tp_free((PyObject *)r);
}

/* Drop `buffer`'s last touch from the tree; 1 if it had one, 0 if not, -1 on error. */
static int drop(Recency *r, PyObject *buffer) {
    PyObject *at = PyDict_GetItemWithError(r->last, buffer);
    if (at == NULL) return PyErr_Occurred() ? -1 : 0;
    PyObject *old = PyDict_GetItemWithError(r->size, buffer);
    if (old == NULL) return -1;
    add(r, PyLong_AsSsize_t(at), -PyFloat_AsDouble(old));
    return PyErr_Occurred() ? -1 : 1;
}

static PyObject *touch(Recency *r, PyObject *args) {
    PyObject *buffer;
    double size;
    if (!PyArg_ParseTuple(args, "Od", &buffer, &size)) return NULL;
    if (drop(r, buffer) < 0) return NULL;
    r->time += 1;
    PyObject *at = PyLong_FromSsize_t(r->time), *bytes = PyFloat_FromDouble(size);
    int failed = at == NULL || bytes == NULL || PyDict_SetItem(r->last, buffer, at) < 0 ||
                 PyDict_SetItem(r->size, buffer, bytes) < 0;
    Py_XDECREF(at);
    Py_XDECREF(bytes);
    if (failed) return NULL;
    add(r, r->time, size);
    Py_RETURN_NONE;
}

static PyObject *since(Recency *r, PyObject *buffer) {
    PyObject *last = PyDict_GetItemWithError(r->last, buffer);
    if (last == NULL) {
        if (PyErr_Occurred()) return NULL;
        Py_RETURN_NONE;
    }
    Py_ssize_t at = PyLong_AsSsize_t(last);
    double before = 0.0;
    while (at > 0) {
        before += r->tree[at];
        at &= at - 1;
    }
    return PyFloat_FromDouble(r->total - before);
}

static PyObject *forget(Recency *r, PyObject *buffer) {
    int had = drop(r, buffer);
    if (had < 0) return NULL;
    if (had && (PyDict_DelItem(r->last, buffer) < 0 || PyDict_DelItem(r->size, buffer) < 0)) return NULL;
    Py_RETURN_NONE;
}

static PyObject *rename_buffer(Recency *r, PyObject *args) {
    PyObject *old, *new;
    if (!PyArg_ParseTuple(args, "OO", &old, &new)) return NULL;
    PyObject *at = PyDict_GetItemWithError(r->last, old);
    if (at == NULL) {
        if (PyErr_Occurred()) return NULL;
        Py_RETURN_NONE;
    }
    PyObject *result = forget(r, new);
    if (result == NULL) return NULL;
    Py_DECREF(result);
    at = PyDict_GetItemWithError(r->last, old);  /* `new` may have been `old` */
    PyObject *bytes = at ? PyDict_GetItemWithError(r->size, old) : NULL;
    if (at == NULL || bytes == NULL) {
        if (PyErr_Occurred()) return NULL;
        Py_RETURN_NONE;
    }
    Py_INCREF(at);
    Py_INCREF(bytes);
    int failed = PyDict_DelItem(r->last, old) < 0 || PyDict_DelItem(r->size, old) < 0 ||
                 PyDict_SetItem(r->last, new, at) < 0 || PyDict_SetItem(r->size, new, bytes) < 0;
    Py_DECREF(at);
    Py_DECREF(bytes);
    if (failed) return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"touch", (PyCFunction)touch, METH_VARARGS, "The buffer is used now."},
    {"since", (PyCFunction)since, METH_O, "Distinct bytes touched after the buffer was; None if never."},
    {"forget", (PyCFunction)forget, METH_O, "Drop the buffer."},
    {"rename", (PyCFunction)rename_buffer, METH_VARARGS, "`new` is the buffer `old` was."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject RecencyType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "audit.costmodel._recency.Recency",
    .tp_basicsize = sizeof(Recency),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Buffers in least-recently-used order (a Fenwick tree over touch times).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)init,
    .tp_dealloc = (destructor)dealloc,
    .tp_methods = methods,
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_recency", "LRU stack distances in C.", -1, NULL};

PyMODINIT_FUNC PyInit__recency(void) {
    if (PyType_Ready(&RecencyType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    Py_INCREF(&RecencyType);
    if (PyModule_AddObject(m, "Recency", (PyObject *)&RecencyType) < 0) {
        Py_DECREF(&RecencyType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
