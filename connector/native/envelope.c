/* The framed Envelope around encoded Value rows: the twin of _EnvelopeFrame.write_fields in
 * connector/avro/serializer.py (field order: schemas/README.md, the Envelope's .avsc).
 *
 *     frame = EnvelopeFrame(header, source_head, db, schema_table)  # pre-encoded constants
 *     frame.write(op, before_fields, after_fields, toast, source, ts_ms, transaction,
 *                 unparsed=None)
 *
 * `source` is a SourceInfo (commit_lsn, txn_index, ts_ms, xid, lsn, snapshot, xmin, sequence)
 * and `transaction` a TransactionBlock (id, total_order, data_collection_order) or None: both
 * NamedTuples, read by position; `unparsed` a dict {name: exact text} or None (an empty dict or
 * None: the field is null). Returns None (no exception) for anything it does not take
 * (a number outside an Avro long, a non-str text): the Python twin then raises its error.
 */
#include <time.h>

#include "avrobuf.h"
#include "native.h"

static PyTypeObject EnvelopeFrameType;

typedef struct {
    PyObject_HEAD
    PyObject *header;       /* magic byte + schema id */
    PyObject *source_head;  /* version, connector, name */
    PyObject *db;
    PyObject *schema_table; /* schema, table */
} EnvelopeFrame;

static void EnvelopeFrame_dealloc(EnvelopeFrame *self) {
    Py_XDECREF(self->header);
    Py_XDECREF(self->source_head);
    Py_XDECREF(self->db);
    Py_XDECREF(self->schema_table);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *EnvelopeFrame_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"header", "source_head", "db", "schema_table", NULL};
    PyObject *header, *source_head, *db, *schema_table;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "SSSS:EnvelopeFrame", kwlist, &header,
                                     &source_head, &db, &schema_table))
        return NULL;
    EnvelopeFrame *self = (EnvelopeFrame *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->header = Py_NewRef(header);
    self->source_head = Py_NewRef(source_head);
    self->db = Py_NewRef(db);
    self->schema_table = Py_NewRef(schema_table);
    return (PyObject *)self;
}

/* 0: written; 1: not an int64 (the caller returns None); -1: error */
static int put_int(Buf *b, PyObject *value) {
    if (!PyLong_Check(value)) return 1;
    int overflow;
    long long n = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (overflow) return 1;
    if (n == -1 && PyErr_Occurred()) return -1;
    if (buf_reserve(b, 10) < 0) return -1;
    put_long(b, n);
    return 0;
}

/* ["null", "long"] */
static int put_optional_int(Buf *b, PyObject *value) {
    if (buf_reserve(b, 1) < 0) return -1;
    if (value == Py_None) {
        b->data[b->len++] = 0;
        return 0;
    }
    b->data[b->len++] = 2;
    return put_int(b, value);
}

/* 0 / 1 / -1 as put_int */
static int put_text(Buf *b, PyObject *value) {
    if (!PyUnicode_Check(value)) return 1;
    return put_string(b, value);
}

static int put_optional_text(Buf *b, PyObject *value) {
    if (buf_reserve(b, 1) < 0) return -1;
    if (value == Py_None) {
        b->data[b->len++] = 0;
        return 0;
    }
    b->data[b->len++] = 2;
    return put_text(b, value);
}

static int put_fields(Buf *b, PyObject *fields) {
    if (fields == Py_None) return buf_put(b, "\0", 1);
    if (!PyBytes_Check(fields)) return 1;
    if (buf_put(b, "\2", 1) < 0) return -1;
    return buf_put(b, PyBytes_AS_STRING(fields), PyBytes_GET_SIZE(fields));
}

static int put_bytes_object(Buf *b, PyObject *bytes) {
    return buf_put(b, PyBytes_AS_STRING(bytes), PyBytes_GET_SIZE(bytes));
}

/* ["null", {"type": "map", "values": "string"}]: null for None or {}, else one block in the
 * dict's order (its insertion order, as Python's writer iterates it). 0 / 1 / -1 as put_int. */
static int put_unparsed(Buf *b, PyObject *unparsed) {
    if (unparsed == Py_None || (PyDict_Check(unparsed) && PyDict_GET_SIZE(unparsed) == 0))
        return buf_put(b, "\0", 1);
    if (!PyDict_Check(unparsed)) return 1;
    if (buf_reserve(b, 11) < 0) return -1;
    b->data[b->len++] = 2;
    put_long(b, PyDict_GET_SIZE(unparsed));
    Py_ssize_t pos = 0;
    PyObject *name, *text;
    while (PyDict_Next(unparsed, &pos, &name, &text)) {
        int rc = put_text(b, name);
        if (rc == 0) rc = put_text(b, text);
        if (rc != 0) return rc;
    }
    return buf_put(b, "\0", 1);
}

static PyObject *EnvelopeFrame_write(EnvelopeFrame *self, PyObject *const *args,
                                     Py_ssize_t nargs);

PyObject *pgcdc_envelope_write(PyObject *frame, PyObject *const *args, Py_ssize_t nargs) {
    if (!PyObject_TypeCheck(frame, &EnvelopeFrameType)) {
        PyErr_SetString(PyExc_TypeError, "not an EnvelopeFrame");
        return NULL;
    }
    return EnvelopeFrame_write((EnvelopeFrame *)frame, args, nargs);
}

static PyObject *EnvelopeFrame_write(EnvelopeFrame *self, PyObject *const *args,
                                     Py_ssize_t nargs) {
    if (nargs != 7 && nargs != 8) {
        PyErr_SetString(PyExc_TypeError,
                        "write(op, before, after, toast, source, ts_ms, transaction, "
                        "unparsed=None)");
        return NULL;
    }
    PyObject *op = args[0], *before = args[1], *after = args[2], *toast = args[3];
    PyObject *source = args[4], *ts_ms = args[5], *transaction = args[6];
    PyObject *unparsed = nargs > 7 ? args[7] : Py_None;
    if (!PyUnicode_Check(op) || !PyList_Check(toast) || !PyTuple_Check(source) ||
        PyTuple_GET_SIZE(source) != 8 ||
        (transaction != Py_None &&
         (!PyTuple_Check(transaction) || PyTuple_GET_SIZE(transaction) != 3)))
        Py_RETURN_NONE;
    Buf b;
    buf_init(&b);
    PyObject *result = NULL, *now = NULL;
    int rc;
#define PUT(call)                      \
    do {                               \
        rc = (call);                   \
        if (rc < 0) goto done;         \
        if (rc > 0) goto not_mine;     \
    } while (0)
    PUT(put_bytes_object(&b, self->header));
    PUT(put_fields(&b, before));
    PUT(put_fields(&b, after));
    PUT(put_bytes_object(&b, self->source_head));
    PUT(put_int(&b, PyTuple_GET_ITEM(source, 2)));           /* ts_ms (commit time) */
    PUT(put_text(&b, PyTuple_GET_ITEM(source, 5)));          /* snapshot */
    PUT(put_bytes_object(&b, self->db));
    PUT(put_optional_text(&b, PyTuple_GET_ITEM(source, 7))); /* sequence */
    PUT(put_bytes_object(&b, self->schema_table));
    PUT(put_optional_int(&b, PyTuple_GET_ITEM(source, 3)));  /* txId */
    PUT(put_optional_int(&b, PyTuple_GET_ITEM(source, 4)));  /* lsn */
    PUT(put_optional_int(&b, PyTuple_GET_ITEM(source, 6)));  /* xmin */
    PUT(put_int(&b, PyTuple_GET_ITEM(source, 0)));           /* commit_lsn */
    PUT(put_int(&b, PyTuple_GET_ITEM(source, 1)));           /* txn_index */
    PUT(put_text(&b, op));
    if (ts_ms == Py_None) { /* time.time_ns() // 1_000_000 */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        now = PyLong_FromLongLong(((long long)ts.tv_sec * 1000000000LL + ts.tv_nsec) /
                                  1000000LL);
        if (now == NULL) goto done;
        ts_ms = now;
    }
    PUT(put_optional_int(&b, ts_ms));
    if (transaction == Py_None) {
        PUT(buf_put(&b, "\0", 1));
    } else {
        PUT(buf_put(&b, "\2", 1));
        PUT(put_text(&b, PyTuple_GET_ITEM(transaction, 0)));
        PUT(put_int(&b, PyTuple_GET_ITEM(transaction, 1)));
        PUT(put_int(&b, PyTuple_GET_ITEM(transaction, 2)));
    }
    Py_ssize_t ntoast = PyList_GET_SIZE(toast);
    if (ntoast > 0) { /* one block of names, then the end-of-array block */
        PUT(buf_reserve(&b, 10));
        put_long(&b, ntoast);
        for (Py_ssize_t i = 0; i < ntoast; i++) PUT(put_text(&b, PyList_GET_ITEM(toast, i)));
    }
    PUT(buf_put(&b, "\0", 1));
    PUT(put_unparsed(&b, unparsed));
#undef PUT
    result = PyBytes_FromStringAndSize(b.data, b.len);
    goto done;
not_mine:
    result = Py_NewRef(Py_None);
done:
    Py_XDECREF(now);
    buf_free(&b);
    return result;
}

static PyMethodDef EnvelopeFrame_methods[] = {
    {"write", (PyCFunction)(void (*)(void))EnvelopeFrame_write, METH_FASTCALL,
     "write(op, before, after, toast, source, ts_ms, transaction, unparsed=None) -> "
     "bytes | None"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject EnvelopeFrameType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "connector._native.EnvelopeFrame",
    .tp_basicsize = sizeof(EnvelopeFrame),
    .tp_dealloc = (destructor)EnvelopeFrame_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "EnvelopeFrame(header, source_head, db, schema_table): framed Envelopes of one "
              "table version (see connector/native/envelope.c).",
    .tp_methods = EnvelopeFrame_methods,
    .tp_new = EnvelopeFrame_new,
};

int pgcdc_add_envelope(PyObject *module) {
    /* The SourceInfo positions write() reads, in order: a unit test holds them equal to
     * connector.avro.serializer.SourceInfo._fields. */
    PyObject *fields = Py_BuildValue("(ssssssss)", "commit_lsn", "txn_index", "ts_ms", "xid",
                                     "lsn", "snapshot", "xmin", "sequence");
    if (fields == NULL) return -1;
    if (PyModule_AddObject(module, "SOURCE_FIELDS", fields) < 0) {
        Py_DECREF(fields);
        return -1;
    }
    if (PyType_Ready(&EnvelopeFrameType) < 0) return -1;
    Py_INCREF(&EnvelopeFrameType);
    if (PyModule_AddObject(module, "EnvelopeFrame", (PyObject *)&EnvelopeFrameType) < 0) {
        Py_DECREF(&EnvelopeFrameType);
        return -1;
    }
    return 0;
}
