/* Copies of a plain slots class's instance with a few fields changed, without its __init__: the C
 * build of audit/base/stamping.py (which falls back to `dataclasses.replace`).
 *
 *   layout(cls, fields, stamped) -> None: learn where a slots class keeps its fields (raises when
 *       `fields` are not all of them, stored as object pointers); `stamped` the fields stamp sets
 *       (up to 16; up to 4 classes, a class learned again replacing what was learned of it)
 *   stamp(template, *values) -> a copy of the instance `template` with the `stamped` fields set
 *       to `values`: what cls(...) with the template's other fields makes, without its __init__
 *
 * It reads CPython's object layout: `layout` accepts only a class whose instances are an object
 * header followed by exactly its fields' object slots (a class statement's: no __dict__, no weakref
 * slot, no items, a direct subclass of object), each field named once and each an object slot of
 * that class itself, and `stamp` only an instance of a class it learned, with one value per stamped
 * field; anything else raises TypeError.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

/* The slots classes `layout` learned, each with the offsets of the fields `stamp` sets. */
#define MAX_CLASSES 4
#define MAX_STAMPED 16
typedef struct {
    PyTypeObject *type;
    Py_ssize_t at[MAX_STAMPED];
    Py_ssize_t count;
} Layout;
static Layout layouts[MAX_CLASSES];

/* The offset of `field`'s object slot in instances of `cls`: -1 with TypeError unless it is a writable
 * object slot of `cls` itself (not a descriptor of another class stored under that name) inside its
 * instances, on a pointer boundary. */
static Py_ssize_t slot_offset(PyTypeObject *cls, PyObject *field) {
    PyObject *descr = PyObject_GetAttr((PyObject *)cls, field);
    if (descr == NULL) return -1;
    Py_ssize_t at = -1;
    if (Py_IS_TYPE(descr, &PyMemberDescr_Type) && PyDescr_TYPE(descr) == cls) {
        PyMemberDef *m = ((PyMemberDescrObject *)descr)->d_member;
        if (m->type == T_OBJECT_EX && !(m->flags & READONLY)) at = m->offset;
    }
    Py_DECREF(descr);
    if (at < (Py_ssize_t)sizeof(PyObject) || at > cls->tp_basicsize - (Py_ssize_t)sizeof(PyObject *) ||
        (at - (Py_ssize_t)sizeof(PyObject)) % (Py_ssize_t)sizeof(PyObject *)) {
        PyErr_Format(PyExc_TypeError, "%R is not an object slot of %s", field, cls->tp_name);
        return -1;
    }
    return at;
}

static PyObject *py_layout(PyObject *self, PyObject *args) {
    PyTypeObject *cls;
    PyObject *fields, *stamped;
    if (!PyArg_ParseTuple(args, "O!O!O!", &PyType_Type, &cls, &PyTuple_Type, &fields, &PyTuple_Type, &stamped))
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(fields), k = PyTuple_GET_SIZE(stamped);
    Py_ssize_t slots = (cls->tp_basicsize - (Py_ssize_t)sizeof(PyObject)) / (Py_ssize_t)sizeof(PyObject *);
    if (!(cls->tp_flags & Py_TPFLAGS_HEAPTYPE) || cls->tp_dictoffset || cls->tp_weaklistoffset || cls->tp_itemsize ||
        cls->tp_base != &PyBaseObject_Type) {
        PyErr_SetString(PyExc_TypeError, "layout: not a plain slots class (a class statement's, slots only)");
        return NULL;
    }
    if (slots != n) {
        PyErr_Format(PyExc_TypeError, "layout: %zd fields named for a class of %zd slots", n, slots);
        return NULL;
    }
    if (k > MAX_STAMPED) {
        PyErr_Format(PyExc_TypeError, "layout: %zd stamped fields, at most %d", k, MAX_STAMPED);
        return NULL;
    }
    /* Every slot named once: `stamp` copies each word after the header as an object pointer. */
    char *named = PyMem_Calloc((size_t)n + 1, 1);
    if (named == NULL) return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t at = slot_offset(cls, PyTuple_GET_ITEM(fields, i));
        if (at < 0) { PyMem_Free(named); return NULL; }
        Py_ssize_t slot = (at - (Py_ssize_t)sizeof(PyObject)) / (Py_ssize_t)sizeof(PyObject *);
        if (named[slot]) {
            PyErr_Format(PyExc_TypeError, "layout: field %R named twice", PyTuple_GET_ITEM(fields, i));
            PyMem_Free(named);
            return NULL;
        }
        named[slot] = 1;
    }
    PyMem_Free(named);
    Layout *entry = NULL;
    for (int c = 0; c < MAX_CLASSES && entry == NULL; c++)
        if (layouts[c].type == cls || layouts[c].type == NULL) entry = &layouts[c];
    if (entry == NULL) {
        PyErr_SetString(PyExc_TypeError, "no room for another class");
        return NULL;
    }
    Layout learned = {cls, {0}, k};
    for (Py_ssize_t i = 0; i < k; i++) {
        if ((learned.at[i] = slot_offset(cls, PyTuple_GET_ITEM(stamped, i))) < 0) return NULL;
    }
    if (entry->type == NULL) Py_INCREF(cls);
    *entry = learned;
    Py_RETURN_NONE;
}

static PyObject *py_stamp(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    const Layout *layout = NULL;
    for (int c = 0; nargs > 0 && c < MAX_CLASSES && layout == NULL; c++)
        if (layouts[c].type != NULL && Py_IS_TYPE(args[0], layouts[c].type)) layout = &layouts[c];
    if (layout == NULL) {
        PyErr_SetString(PyExc_TypeError, "stamp(template, *values): the template's class was not learned by layout");
        return NULL;
    }
    if (nargs != layout->count + 1) {
        PyErr_Format(PyExc_TypeError, "stamp: %zd values for %zd stamped fields", nargs - 1, layout->count);
        return NULL;
    }
    PyTypeObject *cls = layout->type;
    PyObject *out = cls->tp_alloc(cls, 0);
    if (out == NULL) return NULL;
    char *from = (char *)args[0], *to = (char *)out;
    for (Py_ssize_t at = sizeof(PyObject); at < cls->tp_basicsize; at += sizeof(PyObject *)) {
        PyObject *v = *(PyObject **)(from + at);
        Py_XINCREF(v);
        *(PyObject **)(to + at) = v;
    }
    for (Py_ssize_t i = 0; i < layout->count; i++) {
        PyObject **slot = (PyObject **)(to + layout->at[i]);
        Py_XDECREF(*slot);
        Py_INCREF(args[i + 1]);
        *slot = args[i + 1];
    }
    return out;
}

static PyMethodDef methods[] = {
    {"layout", py_layout, METH_VARARGS, "Learn the slots of a class whose instances stamp copies."},
    {"stamp", (PyCFunction)(void (*)(void))py_stamp, METH_FASTCALL, "A copy of an instance with some fields set."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_stamp", "Copies of slots instances made in C.", -1,
                                    methods};

PyMODINIT_FUNC PyInit__stamp(void) { return PyModule_Create(&module); }
