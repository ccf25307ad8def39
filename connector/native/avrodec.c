/* Change events (Avro Envelopes) -> the merge job's flattened rows: the twin of
 * spark_jobs/events/rows.py (`flatten(schemaless_reader(body, writer))` per body), which stays
 * the reference.
 *
 *     decoder = RowDecoder(program, roles, source_roles, slots, columns, keys, toast_names,
 *                          decimal_type, decimal_of)
 *     decode_envelopes(records, decoders) -> (rows, truncates, deletes, toast) | None
 *
 * `program` is the writer schema compiled by spark_jobs/events/row_program.py into nested
 * tuples (one per Avro type: ("long",), ("record", names, fields), ("union", branches), ...);
 * the compile step refuses (None) every shape this file does not read, so the constructor only
 * checks the tuples' form. `roles` says what each Envelope field is for the row (ROLE_* below),
 * `source_roles` the same for the source record's fields, `slots` the row column of each Value
 * field (-1: not a column), `columns` the row's column names in order, `keys` the five
 * metadata column names (op, commit lsn, txn index, ts_ms, toast), `toast_names` the Avro name
 * -> column mapping of unchanged_toast (None: the schema has no such field, the row's list is
 * empty). Decimals are `decimal_type("<unscaled>E<-scale>")` when the unscaled value fits 64
 * bits within the precision (the same Decimal, exponent included, as fastavro's
 * create_decimal(unscaled).scaleb(-scale)); otherwise `decimal_of(bytes, scale, precision)`.
 *
 * `decode_envelopes` takes a list of (schema id, body) and a dict schema id -> RowDecoder (or
 * None). It declines (returns None, never raises) for anything it does not decode exactly as
 * fastavro would: a schema id without a decoder, a body not bytes, truncation, a varint over
 * 64 bits, a negative length or block count, a union branch or enum index out of range, a
 * boolean byte other than 0/1, invalid UTF-8 (also in the fields a row does not keep), trailing
 * bytes, even MemoryError. The caller then decodes the whole part with fastavro, which gives
 * the same rows or raises its own error.
 *
 * Every read is bounds-checked: `end - p` is the bytes left, lengths are compared with it before
 * any pointer moves.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "avrobuf.h"
#include "native.h"

enum {
    K_NULL, K_BOOLEAN, K_LONG, K_FLOAT, K_DOUBLE, K_STRING, K_BYTES, K_FIXED, K_DECIMAL,
    K_FIXED_DECIMAL, K_ENUM, K_ARRAY, K_MAP, K_RECORD, K_UNION
};

/* What an Envelope field (or a source field) is for the row. */
enum { ROLE_SKIP, ROLE_BEFORE, ROLE_AFTER, ROLE_SOURCE, ROLE_OP, ROLE_TOAST };
enum { SRC_SKIP, SRC_LSN, SRC_IDX, SRC_TS };
enum { KEY_OP, KEY_LSN, KEY_IDX, KEY_TS, KEY_TOAST, NKEYS };

typedef struct Node {
    int kind;
    Py_ssize_t size;         /* fixed, fixed-decimal: bytes */
    int scale, precision;    /* decimals */
    Py_ssize_t n;            /* record fields, union branches; 1 for array / map */
    struct Node **children;  /* record fields, union branches, array items, map values */
    PyObject *names;         /* record: field names; enum: symbols (tuples of str) */
} Node;

static void node_free(Node *node) {
    if (node == NULL) return;
    if (node->children != NULL) {
        for (Py_ssize_t i = 0; i < node->n; i++) node_free(node->children[i]);
        PyMem_Free(node->children);
    }
    Py_XDECREF(node->names);
    PyMem_Free(node);
}

static const struct { const char *name; int kind; } KINDS[] = {
    {"null", K_NULL}, {"boolean", K_BOOLEAN}, {"long", K_LONG}, {"float", K_FLOAT},
    {"double", K_DOUBLE}, {"string", K_STRING}, {"bytes", K_BYTES}, {"fixed", K_FIXED},
    {"decimal", K_DECIMAL}, {"fixed-decimal", K_FIXED_DECIMAL}, {"enum", K_ENUM},
    {"array", K_ARRAY}, {"map", K_MAP}, {"record", K_RECORD}, {"union", K_UNION},
};

static int bad_program(void) {
    PyErr_SetString(PyExc_ValueError, "RowDecoder: malformed program");
    return -1;
}

static int tuple_of_str(PyObject *t) {
    if (!PyTuple_Check(t)) return 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(t); i++)
        if (!PyUnicode_Check(PyTuple_GET_ITEM(t, i))) return 0;
    return 1;
}

static int small_int(PyObject *o, long lo, long hi, long *out) {
    if (!PyLong_Check(o)) return 0;
    long v = PyLong_AsLong(o);
    if (v == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    if (v < lo || v > hi) return 0;
    *out = v;
    return 1;
}

static Node *compile_children(Node *node, PyObject *items) {
    if (!PyTuple_Check(items)) return bad_program(), NULL;
    node->n = PyTuple_GET_SIZE(items);
    node->children = PyMem_Calloc(node->n ? node->n : 1, sizeof(Node *));
    if (node->children == NULL) return PyErr_NoMemory(), NULL;
    return node;
}

static Node *compile_node(PyObject *desc, int depth);

/* A Node from its description tuple; NULL with ValueError when malformed. */
static Node *compile_node(PyObject *desc, int depth) {
    if (depth > 100 || !PyTuple_Check(desc) || PyTuple_GET_SIZE(desc) < 1 ||
        !PyUnicode_Check(PyTuple_GET_ITEM(desc, 0)))
        return bad_program(), NULL;
    Py_ssize_t arity = PyTuple_GET_SIZE(desc);
    int kind = -1;
    for (size_t i = 0; i < sizeof KINDS / sizeof KINDS[0]; i++)
        if (PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(desc, 0), KINDS[i].name) == 0)
            kind = KINDS[i].kind;
    if (kind < 0) return bad_program(), NULL;
    Node *node = PyMem_Calloc(1, sizeof(Node));
    if (node == NULL) return PyErr_NoMemory(), NULL;
    node->kind = kind;
    long size = 0, scale = 0, precision = 0;
    switch (kind) {
    case K_FIXED:
        if (arity != 2 || !small_int(PyTuple_GET_ITEM(desc, 1), 0, 1L << 30, &size)) goto bad;
        node->size = size;
        break;
    case K_DECIMAL:
        if (arity != 3 || !small_int(PyTuple_GET_ITEM(desc, 1), 0, 1000, &scale) ||
            !small_int(PyTuple_GET_ITEM(desc, 2), 1, 1000, &precision))
            goto bad;
        node->scale = (int)scale;
        node->precision = (int)precision;
        break;
    case K_FIXED_DECIMAL:
        if (arity != 4 || !small_int(PyTuple_GET_ITEM(desc, 1), 0, 1L << 30, &size) ||
            !small_int(PyTuple_GET_ITEM(desc, 2), 0, 1000, &scale) ||
            !small_int(PyTuple_GET_ITEM(desc, 3), 1, 1000, &precision))
            goto bad;
        node->size = size;
        node->scale = (int)scale;
        node->precision = (int)precision;
        break;
    case K_ENUM:
        if (arity != 2 || !tuple_of_str(PyTuple_GET_ITEM(desc, 1))) goto bad;
        node->names = Py_NewRef(PyTuple_GET_ITEM(desc, 1));
        break;
    case K_ARRAY:
    case K_MAP: {
        if (arity != 2) goto bad;
        node->n = 1;
        node->children = PyMem_Calloc(1, sizeof(Node *));
        if (node->children == NULL) {
            PyErr_NoMemory();
            goto fail;
        }
        node->children[0] = compile_node(PyTuple_GET_ITEM(desc, 1), depth + 1);
        if (node->children[0] == NULL) goto fail;
        break;
    }
    case K_RECORD:
    case K_UNION: {
        PyObject *items = PyTuple_GET_ITEM(desc, arity - 1);
        if (kind == K_RECORD) {
            if (arity != 3 || !tuple_of_str(PyTuple_GET_ITEM(desc, 1)) || !PyTuple_Check(items) ||
                PyTuple_GET_SIZE(items) != PyTuple_GET_SIZE(PyTuple_GET_ITEM(desc, 1)))
                goto bad;
            node->names = Py_NewRef(PyTuple_GET_ITEM(desc, 1));
        } else if (arity != 2) {
            goto bad;
        }
        if (compile_children(node, items) == NULL) goto fail;
        for (Py_ssize_t i = 0; i < node->n; i++) {
            node->children[i] = compile_node(PyTuple_GET_ITEM(items, i), depth + 1);
            if (node->children[i] == NULL) goto fail;
        }
        break;
    }
    default:
        if (arity != 1) goto bad;
    }
    return node;
bad:
    bad_program();
fail:
    node_free(node);
    return NULL;
}

/* ------------------------------------------------------------------ reading */

typedef struct {
    const unsigned char *p, *end;
    PyObject *decimal_type, *decimal_of;
} Reader;

/* 0: read; -1: declined (truncated, or beyond 64 bits) */
static inline int read_long(Reader *r, int64_t *out) {
    uint64_t z = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (r->p >= r->end) return -1;
        unsigned char c = *r->p++;
        if (shift == 63 && c > 1) return -1;
        z |= (uint64_t)(c & 0x7F) << shift;
        if (!(c & 0x80)) {
            *out = (int64_t)(z >> 1) ^ -(int64_t)(z & 1);
            return 0;
        }
    }
    return -1;
}

/* A length (string, bytes): 0 and *start, *n set; -1: negative or past the end. */
static inline int read_span(Reader *r, const unsigned char **start, Py_ssize_t *n) {
    int64_t len;
    if (read_long(r, &len) < 0 || len < 0 || len > r->end - r->p) return -1;
    *start = r->p;
    *n = (Py_ssize_t)len;
    r->p += len;
    return 0;
}

/* A block count of an array or map: 0 and *count; -1: declined (negative: fastavro's
 * sized blocks, which the producer never writes; or more items than bytes left). */
static inline int read_count(Reader *r, int64_t *count) {
    if (read_long(r, count) < 0 || *count < 0 || *count > r->end - r->p) return -1;
    return 0;
}

static PyObject *read_decimal(Reader *r, const Node *node, const unsigned char *s,
                              Py_ssize_t n) {
    if (n <= 8) {
        int64_t v = 0;
        if (n > 0) {
            uint64_t u = s[0] & 0x80 ? UINT64_MAX : 0;
            for (Py_ssize_t i = 0; i < n; i++) u = (u << 8) | s[i];
            v = (int64_t)u;
        }
        uint64_t mag = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
        int digits = 1;
        while (mag >= 10) {
            mag /= 10;
            digits++;
        }
        if (digits <= node->precision) {
            char text[48];
            snprintf(text, sizeof text, "%lldE%d", (long long)v, -node->scale);
            PyObject *str = PyUnicode_FromString(text);
            if (str == NULL) return NULL;
            PyObject *out = PyObject_CallOneArg(r->decimal_type, str);
            Py_DECREF(str);
            return out;
        }
    }
    /* beyond 64 bits or the precision (fastavro rounds to it): the Python helper */
    return PyObject_CallFunction(r->decimal_of, "y#ii", (const char *)s, n, node->scale,
                                 node->precision);
}

static int skip(Reader *r, const Node *node);

/* The value fastavro gives for `node` (a new reference); NULL: declined (an exception may be
 * set: the caller clears it). */
static PyObject *decode(Reader *r, const Node *node) {
    const unsigned char *s;
    Py_ssize_t n;
    int64_t v;
    switch (node->kind) {
    case K_NULL:
        Py_RETURN_NONE;
    case K_BOOLEAN:
        if (r->p >= r->end || *r->p > 1) return NULL;
        return PyBool_FromLong(*r->p++);
    case K_LONG:
        if (read_long(r, &v) < 0) return NULL;
        return PyLong_FromLongLong(v);
    case K_FLOAT:
        if (r->end - r->p < 4) return NULL;
        r->p += 4;
        return PyFloat_FromDouble(PyFloat_Unpack4((const char *)r->p - 4, 1));
    case K_DOUBLE:
        if (r->end - r->p < 8) return NULL;
        r->p += 8;
        return PyFloat_FromDouble(PyFloat_Unpack8((const char *)r->p - 8, 1));
    case K_STRING:
        if (read_span(r, &s, &n) < 0) return NULL;
        return PyUnicode_DecodeUTF8((const char *)s, n, NULL);
    case K_BYTES:
        if (read_span(r, &s, &n) < 0) return NULL;
        return PyBytes_FromStringAndSize((const char *)s, n);
    case K_FIXED:
        if (r->end - r->p < node->size) return NULL;
        r->p += node->size;
        return PyBytes_FromStringAndSize((const char *)r->p - node->size, node->size);
    case K_DECIMAL:
        if (read_span(r, &s, &n) < 0) return NULL;
        return read_decimal(r, node, s, n);
    case K_FIXED_DECIMAL:
        if (r->end - r->p < node->size) return NULL;
        r->p += node->size;
        return read_decimal(r, node, r->p - node->size, node->size);
    case K_ENUM:
        if (read_long(r, &v) < 0 || v < 0 || v >= PyTuple_GET_SIZE(node->names)) return NULL;
        return Py_NewRef(PyTuple_GET_ITEM(node->names, v));
    case K_UNION:
        if (read_long(r, &v) < 0 || v < 0 || v >= node->n) return NULL;
        return decode(r, node->children[v]);
    case K_RECORD: {
        PyObject *out = PyDict_New();
        if (out == NULL) return NULL;
        for (Py_ssize_t i = 0; i < node->n; i++) {
            PyObject *value = decode(r, node->children[i]);
            if (value == NULL ||
                PyDict_SetItem(out, PyTuple_GET_ITEM(node->names, i), value) < 0) {
                Py_XDECREF(value);
                Py_DECREF(out);
                return NULL;
            }
            Py_DECREF(value);
        }
        return out;
    }
    case K_ARRAY: {
        PyObject *out = PyList_New(0);
        if (out == NULL) return NULL;
        for (;;) {
            int64_t count;
            if (read_count(r, &count) < 0) goto array_fail;
            if (count == 0) return out;
            for (int64_t i = 0; i < count; i++) {
                PyObject *item = decode(r, node->children[0]);
                if (item == NULL || PyList_Append(out, item) < 0) {
                    Py_XDECREF(item);
                    goto array_fail;
                }
                Py_DECREF(item);
            }
        }
    array_fail:
        Py_DECREF(out);
        return NULL;
    }
    case K_MAP: {
        PyObject *out = PyDict_New();
        if (out == NULL) return NULL;
        for (;;) {
            int64_t count;
            if (read_count(r, &count) < 0) goto map_fail;
            if (count == 0) return out;
            for (int64_t i = 0; i < count; i++) {
                if (read_span(r, &s, &n) < 0) goto map_fail;
                PyObject *key = PyUnicode_DecodeUTF8((const char *)s, n, NULL);
                if (key == NULL) goto map_fail;
                PyObject *value = decode(r, node->children[0]);
                int rc = value == NULL ? -1 : PyDict_SetItem(out, key, value);
                Py_DECREF(key);
                Py_XDECREF(value);
                if (rc < 0) goto map_fail;
            }
        }
    map_fail:
        Py_DECREF(out);
        return NULL;
    }
    }
    return NULL;
}

/* Reads past a value the row does not keep, checking it as `decode` would: 0, or -1. */
static int skip(Reader *r, const Node *node) {
    const unsigned char *s;
    Py_ssize_t n;
    int64_t v;
    switch (node->kind) {
    case K_NULL:
        return 0;
    case K_BOOLEAN:
        if (r->p >= r->end || *r->p > 1) return -1;
        r->p++;
        return 0;
    case K_LONG:
        return read_long(r, &v);
    case K_FLOAT:
    case K_DOUBLE: {
        Py_ssize_t width = node->kind == K_FLOAT ? 4 : 8;
        if (r->end - r->p < width) return -1;
        r->p += width;
        return 0;
    }
    case K_STRING:
        if (read_span(r, &s, &n) < 0) return -1;
        return pgcdc_valid_utf8(s, n) ? 0 : -1;
    case K_BYTES:
        return read_span(r, &s, &n);
    case K_DECIMAL: {
        /* decoded anyway: its helper could raise where fastavro would too */
        PyObject *value = decode(r, node);
        if (value == NULL) return -1;
        Py_DECREF(value);
        return 0;
    }
    case K_FIXED:
    case K_FIXED_DECIMAL:
        if (node->kind == K_FIXED_DECIMAL) {
            PyObject *value = decode(r, node);
            if (value == NULL) return -1;
            Py_DECREF(value);
            return 0;
        }
        if (r->end - r->p < node->size) return -1;
        r->p += node->size;
        return 0;
    case K_ENUM:
        if (read_long(r, &v) < 0 || v < 0 || v >= PyTuple_GET_SIZE(node->names)) return -1;
        return 0;
    case K_UNION:
        if (read_long(r, &v) < 0 || v < 0 || v >= node->n) return -1;
        return skip(r, node->children[v]);
    case K_RECORD:
        for (Py_ssize_t i = 0; i < node->n; i++)
            if (skip(r, node->children[i]) < 0) return -1;
        return 0;
    case K_ARRAY:
    case K_MAP:
        for (;;) {
            int64_t count;
            if (read_count(r, &count) < 0) return -1;
            if (count == 0) return 0;
            for (int64_t i = 0; i < count; i++) {
                if (node->kind == K_MAP) {
                    if (read_span(r, &s, &n) < 0 || !pgcdc_valid_utf8(s, n)) return -1;
                }
                if (skip(r, node->children[0]) < 0) return -1;
            }
        }
    }
    return -1;
}

/* ------------------------------------------------------------------ RowDecoder */

typedef struct {
    PyObject_HEAD
    Node *program;           /* the Envelope record */
    unsigned char *roles;    /* per Envelope field: ROLE_* */
    unsigned char *src_roles; /* per field of the source record: SRC_* */
    Py_ssize_t *slots;       /* per Value field: its column, or -1 */
    Py_ssize_t nslots;
    PyObject *columns;       /* tuple of str */
    PyObject *keys;          /* tuple of the NKEYS metadata column names */
    PyObject *toast_names;   /* dict or None */
    PyObject *decimal_type, *decimal_of;
    PyObject *template;      /* {column: None, ..., key: None, ...}: each row is a copy */
} RowDecoder;

static PyTypeObject RowDecoderType;

static void RowDecoder_dealloc(RowDecoder *self) {
    node_free(self->program);
    PyMem_Free(self->roles);
    PyMem_Free(self->src_roles);
    PyMem_Free(self->slots);
    Py_XDECREF(self->columns);
    Py_XDECREF(self->keys);
    Py_XDECREF(self->toast_names);
    Py_XDECREF(self->decimal_type);
    Py_XDECREF(self->decimal_of);
    Py_XDECREF(self->template);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* The Value record of a before/after field: a record, or a union of null and one record. */
static const Node *image_record(const Node *field) {
    if (field->kind == K_RECORD) return field;
    if (field->kind != K_UNION) return NULL;
    const Node *found = NULL;
    for (Py_ssize_t i = 0; i < field->n; i++) {
        const Node *branch = field->children[i];
        if (branch->kind == K_RECORD && found == NULL)
            found = branch;
        else if (branch->kind != K_NULL)
            return NULL;
    }
    return found;
}

/* a tuple of small ints into a new array; -1 when not one of `len` ints within [lo, hi] */
static int int_array(PyObject *t, Py_ssize_t len, long lo, long hi, Py_ssize_t **out) {
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != len) return -1;
    *out = PyMem_Calloc(len ? len : 1, sizeof(Py_ssize_t));
    if (*out == NULL) return -1;
    for (Py_ssize_t i = 0; i < len; i++) {
        long v;
        if (!small_int(PyTuple_GET_ITEM(t, i), lo, hi, &v)) return -1;
        (*out)[i] = v;
    }
    return 0;
}

static int byte_roles(PyObject *t, Py_ssize_t len, long hi, unsigned char **out) {
    Py_ssize_t *wide = NULL;
    int rc = int_array(t, len, 0, hi, &wide);
    if (rc == 0) {
        *out = PyMem_Calloc(len ? len : 1, 1);
        if (*out == NULL) rc = -1;
        else
            for (Py_ssize_t i = 0; i < len; i++) (*out)[i] = (unsigned char)wide[i];
    }
    PyMem_Free(wide);
    return rc;
}

static PyObject *RowDecoder_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"program", "roles", "source_roles", "slots", "columns", "keys",
                             "toast_names", "decimal_type", "decimal_of", NULL};
    PyObject *program, *roles, *source_roles, *slots, *columns, *keys, *toast_names;
    PyObject *decimal_type, *decimal_of;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO!O!O!O!O!OOO:RowDecoder", kwlist, &program,
                                     &PyTuple_Type, &roles, &PyTuple_Type, &source_roles,
                                     &PyTuple_Type, &slots, &PyTuple_Type, &columns,
                                     &PyTuple_Type, &keys, &toast_names, &decimal_type,
                                     &decimal_of))
        return NULL;
    if (!tuple_of_str(columns) || !tuple_of_str(keys) || PyTuple_GET_SIZE(keys) != NKEYS ||
        (toast_names != Py_None && !PyDict_Check(toast_names)) ||
        !PyCallable_Check(decimal_type) || !PyCallable_Check(decimal_of)) {
        PyErr_SetString(PyExc_TypeError, "RowDecoder: malformed arguments");
        return NULL;
    }
    RowDecoder *self = (RowDecoder *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->columns = Py_NewRef(columns);
    self->keys = Py_NewRef(keys);
    self->toast_names = Py_NewRef(toast_names);
    self->decimal_type = Py_NewRef(decimal_type);
    self->decimal_of = Py_NewRef(decimal_of);
    /* the keys in the order `flatten` inserts them (a copy of a dict keeps its order) */
    self->template = PyDict_New();
    if (self->template == NULL) goto fail;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(columns); i++)
        if (PyDict_SetItem(self->template, PyTuple_GET_ITEM(columns, i), Py_None) < 0) goto fail;
    for (Py_ssize_t i = 0; i < NKEYS; i++)
        if (PyDict_SetItem(self->template, PyTuple_GET_ITEM(keys, i), Py_None) < 0) goto fail;
    self->program = compile_node(program, 0);
    if (self->program == NULL) goto fail;
    const Node *env = self->program, *source = NULL, *value = NULL;
    if (env->kind != K_RECORD ||
        byte_roles(roles, env->n, ROLE_TOAST, &self->roles) < 0)
        goto bad;
    int seen[ROLE_TOAST + 1] = {0};
    for (Py_ssize_t i = 0; i < env->n; i++) {
        int role = self->roles[i];
        const Node *field = env->children[i];
        if (role != ROLE_SKIP && seen[role]++) goto bad;
        if (role == ROLE_BEFORE || role == ROLE_AFTER) {
            const Node *record = image_record(field);
            if (record == NULL || (value != NULL && record->n != value->n)) goto bad;
            value = record;
        } else if (role == ROLE_SOURCE) {
            if (field->kind != K_RECORD) goto bad;
            source = field;
        } else if (role == ROLE_TOAST) {
            const Node *array = field->kind == K_UNION ? NULL : field;
            if (field->kind == K_UNION) {  /* ["null", array] */
                for (Py_ssize_t b = 0; b < field->n; b++)
                    if (field->children[b]->kind == K_ARRAY) array = field->children[b];
                    else if (field->children[b]->kind != K_NULL) goto bad;
            }
            if (array == NULL || array->kind != K_ARRAY ||
                array->children[0]->kind != K_STRING || toast_names == Py_None)
                goto bad;
        } else if (role == ROLE_OP && field->kind != K_STRING) {
            goto bad;
        }
    }
    if (!seen[ROLE_BEFORE] || !seen[ROLE_AFTER] || !seen[ROLE_SOURCE] || !seen[ROLE_OP] ||
        (toast_names != Py_None && !seen[ROLE_TOAST]))
        goto bad;
    if (byte_roles(source_roles, source->n, SRC_TS, &self->src_roles) < 0) goto bad;
    int src_seen[SRC_TS + 1] = {0};
    for (Py_ssize_t i = 0; i < source->n; i++)
        if (self->src_roles[i] != SRC_SKIP && src_seen[self->src_roles[i]]++) goto bad;
    if (!src_seen[SRC_LSN] || !src_seen[SRC_IDX] || !src_seen[SRC_TS]) goto bad;
    self->nslots = value->n;
    if (int_array(slots, value->n, -1, PyTuple_GET_SIZE(columns) - 1, &self->slots) < 0)
        goto bad;
    return (PyObject *)self;
bad:
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "RowDecoder: malformed roles");
fail:
    Py_DECREF(self);
    return NULL;
}

/* The Value record's columns into `values` (new references; NULL: not a column of it). */
static int read_image(Reader *r, const RowDecoder *d, const Node *record, PyObject **values) {
    for (Py_ssize_t i = 0; i < record->n; i++) {
        Py_ssize_t slot = d->slots[i];
        if (slot < 0) {
            if (skip(r, record->children[i]) < 0) return -1;
            continue;
        }
        PyObject *value = decode(r, record->children[i]);
        if (value == NULL) return -1;
        Py_XSETREF(values[slot], value);
    }
    return 0;
}

/* before/after: 1 and `values` filled (a record), 0 (null), -1 (declined) */
static int read_side(Reader *r, const RowDecoder *d, const Node *field, PyObject **values) {
    const Node *record = field;
    if (field->kind == K_UNION) {
        int64_t branch;
        if (read_long(r, &branch) < 0 || branch < 0 || branch >= field->n) return -1;
        record = field->children[branch];
        if (record->kind == K_NULL) return 0;
    }
    return read_image(r, d, record, values) < 0 ? -1 : 1;
}

static void clear_values(PyObject **values, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) Py_CLEAR(values[i]);
}

/* One body -> its row (a new dict); NULL: declined (an exception may be set). `*op_code`:
 * 't', 'd' or 0. */
static PyObject *decode_row(RowDecoder *d, const unsigned char *body, Py_ssize_t size,
                            PyObject **before, PyObject **after, int *op_code) {
    Reader r = {body, body + size, d->decimal_type, d->decimal_of};
    const Node *env = d->program;
    Py_ssize_t ncols = PyTuple_GET_SIZE(d->columns);
    PyObject *meta[NKEYS] = {NULL};
    PyObject *row = NULL;
    int has_after = 0, has_before = 0;
    for (Py_ssize_t i = 0; i < env->n; i++) {
        const Node *field = env->children[i];
        int rc = 0;
        switch (d->roles[i]) {
        case ROLE_SKIP:
            rc = skip(&r, field);
            break;
        case ROLE_BEFORE:
            rc = has_before = read_side(&r, d, field, before);
            break;
        case ROLE_AFTER:
            rc = has_after = read_side(&r, d, field, after);
            break;
        case ROLE_OP:
            meta[KEY_OP] = decode(&r, field);
            rc = meta[KEY_OP] == NULL ? -1 : 0;
            break;
        case ROLE_TOAST: {
            PyObject *names = decode(&r, field);
            if (names == NULL) {
                rc = -1;
                break;
            }
            if (names == Py_None) {
                Py_SETREF(names, PyList_New(0));
                if (names == NULL) {
                    rc = -1;
                    break;
                }
            }
            for (Py_ssize_t k = 0; k < PyList_GET_SIZE(names); k++) {
                PyObject *name = PyList_GET_ITEM(names, k);
                PyObject *column = PyDict_GetItemWithError(d->toast_names, name);
                if (column != NULL) PyList_SetItem(names, k, Py_NewRef(column));
                else if (PyErr_Occurred()) rc = -1;
            }
            meta[KEY_TOAST] = names;
            break;
        }
        case ROLE_SOURCE:
            for (Py_ssize_t k = 0; k < field->n && rc == 0; k++) {
                int role = d->src_roles[k];
                if (role == SRC_SKIP) {
                    rc = skip(&r, field->children[k]);
                    continue;
                }
                int key = role == SRC_LSN ? KEY_LSN : role == SRC_IDX ? KEY_IDX : KEY_TS;
                meta[key] = decode(&r, field->children[k]);
                if (meta[key] == NULL) rc = -1;
            }
            break;
        }
        if (rc < 0) goto done;
    }
    if (r.p != r.end) goto done; /* trailing bytes: fastavro ignores them; it decides */
    if (meta[KEY_TOAST] == NULL && (meta[KEY_TOAST] = PyList_New(0)) == NULL) goto done;
    row = PyDict_Copy(d->template);
    if (row == NULL) goto done;
    PyObject **image = has_after ? after : has_before ? before : NULL;
    for (Py_ssize_t c = 0; image != NULL && c < ncols; c++)
        if (image[c] != NULL && image[c] != Py_None &&
            PyDict_SetItem(row, PyTuple_GET_ITEM(d->columns, c), image[c]) < 0)
            goto fail;
    for (int k = 0; k < NKEYS; k++)
        if (PyDict_SetItem(row, PyTuple_GET_ITEM(d->keys, k), meta[k]) < 0) goto fail;
    *op_code = 0;
    if (PyUnicode_GET_LENGTH(meta[KEY_OP]) == 1) {
        Py_UCS4 c = PyUnicode_READ_CHAR(meta[KEY_OP], 0);
        if (c == 't' || c == 'd') *op_code = (int)c;
    }
    goto done;
fail:
    Py_CLEAR(row);
done:
    for (int k = 0; k < NKEYS; k++) Py_XDECREF(meta[k]);
    clear_values(before, ncols);
    clear_values(after, ncols);
    return row;
}

static PyObject *decode_envelopes(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyList_Check(args[0]) || !PyDict_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "decode_envelopes(records: list, decoders: dict)");
        return NULL;
    }
    PyObject *records = args[0], *decoders = args[1];
    Py_ssize_t n = PyList_GET_SIZE(records);
    PyObject *rows = PyList_New(n);
    if (rows == NULL) return NULL;
    PyObject **values = NULL, *toast = PySet_New(NULL);
    Py_ssize_t nvalues = 0;
    long truncates = 0, deletes = 0;
    if (toast == NULL) {
        Py_DECREF(rows);
        return NULL;
    }
    /* No collection while the rows pile up (all of them live on): one afterwards instead of
     * many over the growing list. The GIL is held throughout (but for `decimal_of`). */
    int gc_was_enabled = PyGC_Disable();
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *record = PyList_GET_ITEM(records, i);
        if (!PyTuple_Check(record) || PyTuple_GET_SIZE(record) != 2) goto declined;
        PyObject *body = PyTuple_GET_ITEM(record, 1);
        PyObject *decoder = PyDict_GetItemWithError(decoders, PyTuple_GET_ITEM(record, 0));
        if (decoder == NULL || !PyObject_TypeCheck(decoder, &RowDecoderType) ||
            !PyBytes_Check(body))
            goto declined;
        RowDecoder *d = (RowDecoder *)decoder;
        Py_ssize_t ncols = PyTuple_GET_SIZE(d->columns);
        if (ncols > nvalues) {
            PyMem_Free(values);
            nvalues = ncols;
            values = PyMem_Calloc(2 * (size_t)nvalues, sizeof(PyObject *));
            if (values == NULL) goto declined;
        }
        int op_code = 0;
        PyObject *row = decode_row(d, (const unsigned char *)PyBytes_AS_STRING(body),
                                   PyBytes_GET_SIZE(body), values, values + nvalues, &op_code);
        if (row == NULL) goto declined;
        PyList_SET_ITEM(rows, i, row);
        PyObject *names = PyDict_GetItemWithError(row, PyTuple_GET_ITEM(d->keys, KEY_TOAST));
        if (names == NULL || !PyList_Check(names)) goto declined;
        for (Py_ssize_t k = 0; k < PyList_GET_SIZE(names); k++)
            if (PySet_Add(toast, PyList_GET_ITEM(names, k)) < 0) goto declined;
        truncates += op_code == 't';
        deletes += op_code == 'd';
    }
    PyMem_Free(values);
    if (gc_was_enabled) PyGC_Enable();
    PyObject *out = Py_BuildValue("(NllN)", rows, truncates, deletes, toast);
    if (out == NULL) PyErr_Clear(), out = Py_NewRef(Py_None);
    return out;
declined:
    if (gc_was_enabled) PyGC_Enable();
    PyErr_Clear();
    PyMem_Free(values);
    Py_DECREF(rows);
    Py_DECREF(toast);
    Py_RETURN_NONE;
}

static PyMethodDef avrodec_functions[] = {
    {"decode_envelopes", (PyCFunction)(void (*)(void))decode_envelopes, METH_FASTCALL,
     "decode_envelopes(records, decoders) -> (rows, truncates, deletes, toast) | None: the "
     "flattened rows of (schema id, Avro body) records, the columns they name unchanged (see "
     "connector/native/avrodec.c)."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject RowDecoderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "connector._native.RowDecoder",
    .tp_basicsize = sizeof(RowDecoder),
    .tp_dealloc = (destructor)RowDecoder_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "RowDecoder(program, roles, source_roles, slots, columns, keys, toast_names, "
              "decimal_type, decimal_of): one writer schema's change events -> rows "
              "(see connector/native/avrodec.c).",
    .tp_new = RowDecoder_new,
};

int pgcdc_add_avrodec(PyObject *module) {
    if (PyModule_AddFunctions(module, avrodec_functions) < 0) return -1;
    if (PyType_Ready(&RowDecoderType) < 0) return -1;
    Py_INCREF(&RowDecoderType);
    if (PyModule_AddObject(module, "RowDecoder", (PyObject *)&RowDecoderType) < 0) {
        Py_DECREF(&RowDecoderType);
        return -1;
    }
    return 0;
}
