/* The residency walk of one computation on integer arrays: the C build of
 * costmodel/residency_walk.py's `walk` (same steps, same floating-point operations in the same
 * order, so the same result to the last bit; see there for the arguments and the result).
 *
 * Buffers are kept in least-recently-used order by a Fenwick tree over touch times that holds each
 * buffer's size at its last touch: the distinct bytes touched since a buffer's last touch are a
 * prefix sum. A big program's walk makes millions of touches, each a few dozen tree steps.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { PRODUCES, ALIAS, RUNS, FIRST };

typedef struct {
    int64_t *data;
    Py_ssize_t len, cap;
} Vec;

static int push(Vec *v, int64_t x) {
    if (v->len == v->cap) {
        Py_ssize_t cap = v->cap ? 2 * v->cap : 64;
        int64_t *data = realloc(v->data, (size_t)cap * sizeof(int64_t));
        if (data == NULL) return -1;
        v->data = data;
        v->cap = cap;
    }
    v->data[v->len++] = x;
    return 0;
}

typedef struct {
    double *tree;
    Py_ssize_t end, time;
    double total;     /* every live touch's bytes: the prefix sum up to `time` */
    Py_ssize_t *last; /* per buffer: time of its last touch, 0 if none */
    double *size;     /* per buffer: its size at that touch */
} Lru;

static void lru_add(Lru *r, Py_ssize_t at, double value) {
    r->total += value;
    while (at < r->end) {
        r->tree[at] += value;
        at += at & -at;
    }
}

static void lru_touch(Lru *r, int64_t b, double size) {
    if (r->last[b]) lru_add(r, r->last[b], -r->size[b]);
    r->time += 1;
    r->last[b] = r->time;
    r->size[b] = size;
    lru_add(r, r->time, size);
}

/* Distinct bytes touched after `b` was; `*seen` says whether it was touched at all. */
static double lru_since(const Lru *r, int64_t b, int *seen) {
    Py_ssize_t at = r->last[b];
    *seen = at != 0;
    double before = 0.0;
    while (at > 0) {
        before += r->tree[at];
        at &= at - 1;
    }
    return r->total - before;
}

static void lru_forget(Lru *r, int64_t b) {
    if (r->last[b]) {
        lru_add(r, r->last[b], -r->size[b]);
        r->last[b] = 0;
    }
}

static void lru_rename(Lru *r, int64_t old, int64_t new) {
    if (!r->last[old]) return;
    lru_forget(r, new);
    if (!r->last[old]) return; /* `new` was `old` */
    r->last[new] = r->last[old];
    r->size[new] = r->size[old];
    r->last[old] = 0;
}

typedef struct {
    Py_ssize_t n, buffers, levels;
    const unsigned char *kinds, *hidden;
    const int *order, *starts, *operands, *body, *costs;
    const double *sizes, *capacities;
    int64_t *rank;                    /* per buffer: its place in name order */
    Py_ssize_t *alias_at, *alias_len; /* per buffer: its alias set in `pool`, length -1 if none */
    Vec pool;
} Walk;

/* Each op's reads: op i's buffers are reads->data[at[i]:at[i] + count[i]]; count -1 for an alias. */
typedef struct {
    Vec data;
    Py_ssize_t *at, *count;
} Reads;

static int by_value(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Each op's operand buffers through the aliases before it, in name order, once each. */
static int expand(Walk *w, Reads *out, Py_ssize_t *touches) {
    Vec names = {0};
    for (Py_ssize_t k = 0; k < w->n; k++) {
        int i = w->order[k];
        names.len = 0;
        for (int j = w->starts[i]; j < w->starts[i + 1]; j++) {
            int o = w->operands[j];
            if (w->alias_len[o] < 0) {
                if (push(&names, w->rank[o] << 32 | o) < 0) goto fail;
                continue;
            }
            for (Py_ssize_t a = 0; a < w->alias_len[o]; a++) {
                int64_t b = w->pool.data[w->alias_at[o] + a];
                if (push(&names, w->rank[b] << 32 | b) < 0) goto fail;
            }
        }
        if (names.len > 1) qsort(names.data, (size_t)names.len, sizeof(int64_t), by_value);
        Py_ssize_t unique = 0;
        for (Py_ssize_t a = 0; a < names.len; a++)
            if (a == 0 || names.data[a] != names.data[unique - 1]) names.data[unique++] = names.data[a];
        Vec *into = w->kinds[i] == ALIAS ? &w->pool : &out->data;
        Py_ssize_t at = into->len;
        for (Py_ssize_t a = 0; a < unique; a++)
            if (push(into, names.data[a] & 0xffffffff) < 0) goto fail;
        if (w->kinds[i] == ALIAS) {
            w->alias_at[i] = at, w->alias_len[i] = unique;
            out->count[i] = -1;
            continue;
        }
        out->at[i] = at, out->count[i] = unique;
        *touches += unique + (w->kinds[i] == RUNS) + (w->kinds[i] != FIRST);
    }
    free(names.data);
    return 0;
fail:
    free(names.data);
    return -1;
}

/* One run: each read's distance (NaN: unseen history) and each buffer's distance at its first
 * reader (NaN: never read). */
static int run(const Walk *w, const Reads *reads, Lru *r, double *distances, double *first) {
    unsigned char *produced = calloc((size_t)w->buffers + 1, 1);
    if (produced == NULL) return -1;
    for (Py_ssize_t b = 0; b < w->buffers; b++) first[b] = NAN;
    for (Py_ssize_t k = 0; k < w->n; k++) {
        int i = w->order[k], seen;
        if (reads->count[i] < 0) continue;
        const int64_t *names = reads->data.data + reads->at[i];
        for (Py_ssize_t a = 0; a < reads->count[i]; a++) {
            double since = lru_since(r, names[a], &seen);
            distances[reads->at[i] + a] = seen ? since : w->hidden[names[a]] ? NAN : INFINITY;
        }
        for (Py_ssize_t a = 0; a < reads->count[i]; a++) {
            int64_t b = names[a];
            if (produced[b] && isnan(first[b])) {
                double since = lru_since(r, b, &seen);
                first[b] = seen && since != 0.0 ? since : 0.0;
            }
            lru_touch(r, b, w->sizes[b]);
        }
        if (w->kinds[i] == RUNS) lru_touch(r, w->body[i], w->sizes[w->body[i]]);
        if (w->kinds[i] != FIRST) {
            lru_touch(r, i, w->sizes[i]);
            produced[i] = 1;
        }
    }
    free(produced);
    return 0;
}

/* The next run reads each donated parameter where this run left the output that reuses it. */
static int run_again(Walk *w, Reads *again, Lru *r, double *distances, double *first, const int *params,
                     Py_ssize_t nparams, const int *pairs, Py_ssize_t npairs) {
    for (Py_ssize_t p = 0; p < nparams; p++) lru_forget(r, params[p]);
    for (Py_ssize_t p = 0; p < npairs; p++) {
        int out = pairs[2 * p + 1];
        if (w->alias_len[out] < 0) lru_rename(r, out, pairs[2 * p]);
        for (Py_ssize_t a = 0; a < w->alias_len[out]; a++) lru_rename(r, w->pool.data[w->alias_at[out] + a], pairs[2 * p]);
    }
    if (run(w, again, r, distances, first) < 0) return -1;
    for (Py_ssize_t p = 0; p < npairs; p++) { /* that output is read when the parameter first is */
        int out = pairs[2 * p + 1], found = 0;
        double gap = 0.0;
        for (Py_ssize_t k = 0; k < w->n && !found; k++) {
            int i = w->order[k];
            for (Py_ssize_t a = 0; a < again->count[i] && !found; a++)
                if (again->data.data[again->at[i] + a] == pairs[2 * p]) found = 1, gap = distances[again->at[i] + a];
        }
        if (!found) continue;
        if (w->alias_len[out] < 0 && isnan(first[out])) first[out] = gap;
        for (Py_ssize_t a = 0; a < w->alias_len[out]; a++) {
            int64_t b = w->pool.data[w->alias_at[out] + a];
            if (isnan(first[b])) first[b] = gap;
        }
    }
    return 0;
}

static int is_result(const Walk *w, int root, int b) {
    if (b == root) return 1;
    for (Py_ssize_t a = 0; a < w->alias_len[root]; a++)
        if (w->pool.data[w->alias_at[root] + a] == b) return 1;
    return 0;
}

/* Op i's signature into out[0 .. levels + 2): named bytes, held bytes per level, kept mask. */
static void signature(const Walk *w, const Reads *reads, const double *distances, const double *first,
                      int root, int entry, int i, double *out) {
    const int64_t *names = reads->data.data + reads->at[i];
    const double *d = distances + reads->at[i];
    double named = 0.0, size = w->sizes[i], gap = first[i];
    for (Py_ssize_t a = 0; a < reads->count[i]; a++) named += w->sizes[names[a]];
    out[0] = named;
    int unseen = !entry && is_result(w, root, i) && isnan(gap);
    int64_t mask = 0;
    for (Py_ssize_t l = 0; l < w->levels; l++) {
        double capacity = w->capacities[l], held = 0.0;
        for (Py_ssize_t a = 0; a < reads->count[i]; a++) {
            double s = w->sizes[names[a]];
            if (s <= capacity && (isnan(d[a]) || d[a] + s <= capacity)) held += s;
        }
        out[1 + l] = held;
        if (size <= capacity && (unseen || (!isnan(gap) && gap + size <= capacity))) mask |= (int64_t)1 << l;
    }
    out[1 + w->levels] = (double)mask;
}

/* Ops with the same cost and signature share a group: (ops, groups, keys) as walk returns them. */
static PyObject *group(const Walk *w, const Reads *reads, const double *distances, const double *first,
                       int root, int entry) {
    Py_ssize_t width = w->levels + 2, slots = 64, used = 0;
    while (slots < 2 * w->n) slots *= 2;
    Py_ssize_t *table = calloc((size_t)slots, sizeof(Py_ssize_t)); /* group + 1; 0: empty */
    double *keys = malloc((size_t)(w->n + 1) * (size_t)width * sizeof(double));
    int *key_cost = malloc((size_t)(w->n + 1) * sizeof(int));
    int *ops = malloc((size_t)(w->n + 1) * sizeof(int)), *groups = malloc((size_t)(w->n + 1) * sizeof(int));
    PyObject *result = NULL, *listed = NULL;
    Py_ssize_t placed = 0;
    if (!table || !keys || !key_cost || !ops || !groups) {
        PyErr_NoMemory();
        goto done;
    }
    for (int i = 0; i < w->n; i++) {
        if (reads->count[i] < 0 || w->costs[i] < 0) continue;
        double *key = keys + used * width;
        signature(w, reads, distances, first, root, entry, i, key);
        uint64_t hash = 1469598103934665603ULL ^ (uint64_t)w->costs[i];
        for (Py_ssize_t l = 0; l < width; l++) {
            uint64_t bits;
            memcpy(&bits, key + l, sizeof bits);
            hash = (hash ^ bits) * 1099511628211ULL;
        }
        Py_ssize_t slot = (Py_ssize_t)(hash & (uint64_t)(slots - 1));
        while (table[slot] && (key_cost[table[slot] - 1] != w->costs[i] ||
                               memcmp(keys + (table[slot] - 1) * width, key, (size_t)width * sizeof(double))))
            slot = (slot + 1) & (slots - 1);
        if (!table[slot]) {
            key_cost[used] = w->costs[i];
            table[slot] = ++used;
        }
        ops[placed] = i, groups[placed++] = (int)(table[slot] - 1);
    }
    listed = PyList_New(used);
    for (Py_ssize_t g = 0; listed && g < used; g++) {
        PyObject *key = PyTuple_New(width + 1), *item;
        if (key == NULL) goto done;
        PyList_SET_ITEM(listed, g, key);
        if ((item = PyLong_FromLong(key_cost[g])) == NULL) goto done;
        PyTuple_SET_ITEM(key, 0, item);
        for (Py_ssize_t l = 0; l < width; l++) {
            if ((item = PyFloat_FromDouble(keys[g * width + l])) == NULL) goto done;
            PyTuple_SET_ITEM(key, l + 1, item);
        }
    }
    if (listed)
        result = Py_BuildValue("(y#y#O)", (const char *)ops, placed * (Py_ssize_t)sizeof(int), (const char *)groups,
                               placed * (Py_ssize_t)sizeof(int), listed);
done:
    Py_XDECREF(listed);
    free(table), free(keys), free(key_cost), free(ops), free(groups);
    return result;
}

static int ids_in(const Py_buffer *v, Py_ssize_t buffers, int none) {
    const int *ids = v->buf;
    for (Py_ssize_t i = 0; i < v->len / (Py_ssize_t)sizeof(int); i++)
        if (ids[i] >= buffers || ids[i] < (none ? -1 : 0)) return 0;
    return v->len % (Py_ssize_t)sizeof(int) == 0;
}

/* What in the arrays would make the walk read out of bounds, or NULL where they describe a
 * computation it can take. */
static const char *inconsistent(const Walk *w, const Py_buffer *v) {
    /* v: order, starts, operands, body, hidden, by_name, params, donated, costs */
    Py_ssize_t ints = (Py_ssize_t)sizeof(int), n = w->n;
    if (n >= INT32_MAX || w->buffers >= INT32_MAX) return "more than 2^31 ops or buffers";
    if (n > w->buffers) return "more ops than buffers (op i writes buffer i)";
    if (w->levels > 62) return "more than 62 capacities";
    if (v[0].len != n * ints) return "order is not one int per op (kinds)";
    if (v[1].len != (n + 1) * ints) return "starts is not one int per op and one more";
    if (v[3].len != n * ints) return "body is not one int per op";
    if (v[4].len != w->buffers) return "hidden is not one byte per buffer (sizes)";
    if (v[8].len != n * ints) return "costs is not one int per op";
    if (v[5].len > w->buffers * ints) return "by_name names more buffers than there are";
    if (v[7].len % (2 * ints)) return "donated is not pairs of ints";
    if (!ids_in(&v[0], n, 0)) return "order holds an id that is not an op";
    if (!ids_in(&v[2], w->buffers, 0)) return "operands holds an id that is not a buffer";
    if (!ids_in(&v[3], w->buffers, 1)) return "body holds an id that is not a buffer nor -1";
    if (!ids_in(&v[5], w->buffers, 0)) return "by_name holds an id that is not a buffer";
    if (!ids_in(&v[6], n, 0)) return "params holds an id that is not an op";
    if (!ids_in(&v[7], w->buffers, 0)) return "donated holds an id that is not a buffer";
    if (w->starts[0] != 0 || w->starts[n] != v[2].len / ints) return "starts does not span the operands";
    for (Py_ssize_t i = 0; i < n; i++) {
        if (w->starts[i + 1] < w->starts[i]) return "starts decreases";
        if (w->kinds[i] > FIRST) return "kinds holds an unknown kind";
        if (w->kinds[i] == RUNS && w->body[i] < 0) return "an op that runs a body names none";
    }
    return NULL;
}

static PyObject *walk(PyObject *self, PyObject *args) {
    Py_buffer v[12]; /* kinds, order, starts, operands, body, sizes, hidden, by_name, params, donated, capacities, costs */
    int root, entry;
    memset(v, 0, sizeof v);
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*y*y*y*y*y*iiy*y*", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6],
                          &v[7], &v[8], &v[9], &root, &entry, &v[10], &v[11]))
        return NULL;
    Walk w = {.n = v[0].len, .buffers = v[5].len / (Py_ssize_t)sizeof(double),
              .levels = v[10].len / (Py_ssize_t)sizeof(double), .kinds = v[0].buf, .order = v[1].buf,
              .starts = v[2].buf, .operands = v[3].buf, .body = v[4].buf, .sizes = v[5].buf, .hidden = v[6].buf,
              .capacities = v[10].buf, .costs = v[11].buf};
    Py_buffer checked[] = {v[1], v[2], v[3], v[4], v[6], v[7], v[8], v[9], v[11]};
    Reads reads = {{0}}, again = {{0}};
    Py_ssize_t touches = 0, npairs = v[9].len / (Py_ssize_t)(2 * sizeof(int));
    double *distances = NULL, *first = NULL;
    Lru r = {0};
    PyObject *result = NULL;
    const char *wrong = root < 0 || root >= w.n ? "root is not an op" : inconsistent(&w, checked);
    if (wrong != NULL) {
        PyErr_Format(PyExc_ValueError, "walk: inconsistent arrays: %s", wrong);
        goto done;
    }
    size_t n = (size_t)w.n + 1, buffers = (size_t)w.buffers + 1;
    w.rank = calloc(buffers, sizeof(int64_t));
    w.alias_at = malloc(buffers * sizeof(Py_ssize_t)), w.alias_len = malloc(buffers * sizeof(Py_ssize_t));
    reads.at = malloc(n * sizeof(Py_ssize_t)), reads.count = malloc(n * sizeof(Py_ssize_t));
    again.at = malloc(n * sizeof(Py_ssize_t)), again.count = malloc(n * sizeof(Py_ssize_t));
    first = malloc(buffers * sizeof(double));
    if (!w.rank || !w.alias_at || !w.alias_len || !reads.at || !reads.count || !again.at || !again.count || !first)
        goto nomem;
    for (Py_ssize_t p = 0; p < v[7].len / (Py_ssize_t)sizeof(int); p++) w.rank[((const int *)v[7].buf)[p]] = p;
    for (Py_ssize_t b = 0; b < w.buffers; b++) w.alias_len[b] = -1;
    if (expand(&w, &reads, &touches) < 0 || (npairs && expand(&w, &again, &touches) < 0)) goto nomem;
    r.end = touches + 2;
    r.tree = calloc((size_t)r.end, sizeof(double));
    r.last = calloc(buffers, sizeof(Py_ssize_t)), r.size = calloc(buffers, sizeof(double));
    distances = malloc((size_t)(reads.data.len + again.data.len + 1) * sizeof(double));
    if (!r.tree || !r.last || !r.size || !distances || run(&w, &reads, &r, distances, first) < 0) goto nomem;
    if (npairs && run_again(&w, &again, &r, distances, first, v[8].buf, v[8].len / (Py_ssize_t)sizeof(int), v[9].buf,
                            npairs) < 0)
        goto nomem;
    result = group(&w, npairs ? &again : &reads, distances, first, root, entry);
    goto done;
nomem:
    PyErr_NoMemory();
done:
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) PyBuffer_Release(&v[i]);
    free(w.rank), free(w.alias_at), free(w.alias_len), free(w.pool.data);
    free(reads.data.data), free(reads.at), free(reads.count), free(again.data.data), free(again.at), free(again.count);
    free(distances), free(first), free(r.tree), free(r.last), free(r.size);
    return result;
}

static PyMethodDef functions[] = {
    {"walk", walk, METH_VARARGS, "The residency walk of one computation (see costmodel/residency_walk.py)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_recency", "The residency walk in C.", -1, functions};

PyMODINIT_FUNC PyInit__recency(void) { return PyModule_Create(&module); }
