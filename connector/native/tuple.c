/* pgoutput Insert/Update/Delete decoding: the twin of connector/pgoutput/decoder.py
 * (`read_tuple`, `_insert`, `_update`, `_delete`), which stays the reference.
 *
 * The C side only decodes well-formed messages. Anything else (truncation, an unknown kind
 * byte, a length past the end, invalid UTF-8, trailing bytes, even MemoryError) makes it give
 * up without an exception: `decode_change` returns None and `read_change` calls the Python
 * reader for that message type, which raises the precise DecodeError (or, for input the C
 * side merely declines, decodes it the same way).
 *
 * Every read is bounds-checked against the buffer length; offsets are Py_ssize_t (64-bit on
 * the platforms we build for) and lengths from the wire are uint32, so `start + len` cannot
 * overflow.
 *
 * setup(Insert, Update, Delete, BinaryValue, UNCHANGED_TOAST, insert_reader, update_reader,
 *       delete_reader) is called once by decoder.py at import.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "native.h"

/* Set by setup(); strong references, kept for the life of the process. */
static PyTypeObject *Insert_type, *Update_type, *Delete_type, *BinaryValue_type;
static PyObject *unchanged_toast;
static PyObject *insert_reader, *update_reader, *delete_reader;
static PyObject *str_K, *str_O;
/* BinaryValue's instances have the layout of bytes (it adds no slots): allocated directly. */
static int binary_direct;

static inline uint32_t get_u32(const unsigned char *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static inline uint16_t get_u16(const unsigned char *p) {
    return (uint16_t)(((unsigned)p[0] << 8) | p[1]);
}

static PyObject *new_binary(const unsigned char *data, Py_ssize_t len) {
    if (binary_direct) {
        /* what CPython's bytes_subtype_new does: tp_alloc zeroes, including the final NUL */
        PyObject *obj = BinaryValue_type->tp_alloc(BinaryValue_type, len);
        if (obj == NULL) return NULL;
        memcpy(PyBytes_AS_STRING(obj), data, (size_t)len);
_Pragma("GCC diagnostic push")
_Pragma("GCC diagnostic ignored \"-Wdeprecated-declarations\"")
        ((PyBytesObject *)obj)->ob_shash = -1;
_Pragma("GCC diagnostic pop")
        return obj;
    }
    PyObject *raw = PyBytes_FromStringAndSize((const char *)data, len);
    if (raw == NULL) return NULL;
    PyObject *obj = PyObject_CallOneArg((PyObject *)BinaryValue_type, raw);
    Py_DECREF(raw);
    return obj;
}

/* TupleData at *offset: a new tuple, *offset moved past it; NULL (maybe with an exception
 * set) when the bytes are not a well-formed TupleData. */
static PyObject *read_tuple(const unsigned char *buf, Py_ssize_t size, Py_ssize_t *offset) {
    Py_ssize_t o = *offset;
    if (o < 0 || size - o < 2) return NULL;
    Py_ssize_t ncols = get_u16(buf + o);
    o += 2;
    if (ncols > size - o) return NULL; /* every column takes at least its kind byte */
    PyObject *values = PyTuple_New(ncols);
    if (values == NULL) return NULL;
    for (Py_ssize_t i = 0; i < ncols; i++) {
        if (o >= size) goto fail;
        unsigned char kind = buf[o];
        PyObject *v;
        if (kind == 't' || kind == 'b') {
            if (size - o < 5) goto fail;
            Py_ssize_t len = (Py_ssize_t)get_u32(buf + o + 1);
            Py_ssize_t start = o + 5;
            if (len > size - start) goto fail;
            o = start + len;
            if (kind == 't')
                v = PyUnicode_DecodeUTF8((const char *)buf + start, len, NULL);
            else
                v = new_binary(buf + start, len);
            if (v == NULL) goto fail;
        } else if (kind == 'n') {
            v = Py_NewRef(Py_None);
            o += 1;
        } else if (kind == 'u') {
            v = Py_NewRef(unchanged_toast);
            o += 1;
        } else {
            goto fail;
        }
        PyTuple_SET_ITEM(values, i, v);
    }
    *offset = o;
    return values;
fail:
    Py_DECREF(values);
    return NULL;
}

/* A NamedTuple instance of `type` from n stolen references (each may be NULL: then all are
 * released and NULL returned). */
static PyObject *build(PyTypeObject *type, Py_ssize_t n, PyObject **items) {
    PyObject *obj = NULL;
    for (Py_ssize_t i = 0; i < n; i++)
        if (items[i] == NULL) goto done;
    obj = type->tp_alloc(type, n);
done:
    if (obj == NULL) {
        for (Py_ssize_t i = 0; i < n; i++) Py_XDECREF(items[i]);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) PyTuple_SET_ITEM(obj, i, items[i]);
    return obj;
}

/* Decode an 'I', 'U' or 'D' message; NULL (maybe with an exception set) on anything the
 * Python reader would reject. */
static PyObject *decode(PyObject *bufobj, int streaming) {
    if (!PyBytes_CheckExact(bufobj) || Insert_type == NULL) return NULL;
    const unsigned char *buf = (const unsigned char *)PyBytes_AS_STRING(bufobj);
    Py_ssize_t size = PyBytes_GET_SIZE(bufobj);
    Py_ssize_t head = streaming ? 10 : 6; /* tag, [xid], relation OID, first part byte */
    if (size < head) return NULL;
    unsigned char tag = buf[0];
    if (tag != 'I' && tag != 'U' && tag != 'D') return NULL;
    unsigned char part = buf[head - 1];
    PyObject *items[5];
    Py_ssize_t o = head;

    if (tag == 'I') {
        if (part != 'N') return NULL;
        PyObject *new = read_tuple(buf, size, &o);
        if (new == NULL) return NULL;
        if (o != size) {
            Py_DECREF(new);
            return NULL;
        }
        items[2] = new;
    } else if (tag == 'D') {
        if (part != 'K' && part != 'O') return NULL;
        PyObject *old = read_tuple(buf, size, &o);
        if (old == NULL) return NULL;
        if (o != size) {
            Py_DECREF(old);
            return NULL;
        }
        items[2] = Py_NewRef(part == 'K' ? str_K : str_O);
        items[3] = old;
    } else {
        PyObject *old_kind = Py_None, *old = NULL;
        if (part == 'K' || part == 'O') {
            old_kind = part == 'K' ? str_K : str_O;
            old = read_tuple(buf, size, &o);
            if (old == NULL) return NULL;
            if (o >= size) {
                Py_DECREF(old);
                return NULL;
            }
            part = buf[o++];
        }
        PyObject *new = part == 'N' ? read_tuple(buf, size, &o) : NULL;
        if (new == NULL || o != size) {
            Py_XDECREF(old);
            Py_XDECREF(new);
            return NULL;
        }
        items[2] = Py_NewRef(old_kind);
        items[3] = old != NULL ? old : Py_NewRef(Py_None);
        items[4] = new;
    }
    items[0] = streaming ? PyLong_FromUnsignedLong(get_u32(buf + 1)) : Py_NewRef(Py_None);
    items[1] = PyLong_FromUnsignedLong(get_u32(buf + head - 5));
    if (tag == 'I') return build(Insert_type, 3, items);
    if (tag == 'D') return build(Delete_type, 4, items);
    return build(Update_type, 5, items);
}

static int check_nargs(const char *name, Py_ssize_t nargs, Py_ssize_t want) {
    if (nargs == want) return 1;
    PyErr_Format(PyExc_TypeError, "%s() takes %zd positional arguments (%zd given)", name, want,
                 nargs);
    return 0;
}

static int truth(PyObject *obj) {
    if (obj == Py_True) return 1;
    if (obj == Py_False) return 0;
    return PyObject_IsTrue(obj);
}

static PyObject *decode_change(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (!check_nargs("decode_change", nargs, 2)) return NULL;
    int streaming = truth(args[1]);
    if (streaming < 0) return NULL;
    PyObject *msg = decode(args[0], streaming);
    if (msg == NULL) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    return msg;
}

static PyObject *read_change(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (!check_nargs("read_change", nargs, 2)) return NULL;
    if (Insert_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "connector._native.setup() was not called");
        return NULL;
    }
    int streaming = truth(args[1]);
    if (streaming < 0) return NULL;
    PyObject *msg = decode(args[0], streaming);
    if (msg != NULL) return msg;
    PyErr_Clear();
    /* the Python reader of this message type: decodes or raises the precise DecodeError */
    PyObject *reader = insert_reader;
    if (PyBytes_Check(args[0]) && PyBytes_GET_SIZE(args[0]) > 0) {
        char tag = PyBytes_AS_STRING(args[0])[0];
        if (tag == 'U') reader = update_reader;
        else if (tag == 'D') reader = delete_reader;
    }
    return PyObject_Vectorcall(reader, args, 2, NULL);
}

static int take_type(PyObject *obj, PyTypeObject *base, PyTypeObject **slot) {
    if (!PyType_Check(obj) || !PyType_IsSubtype((PyTypeObject *)obj, base)) {
        PyErr_Format(PyExc_TypeError, "setup: expected a subclass of %s, got %R", base->tp_name,
                     obj);
        return -1;
    }
    Py_XSETREF(*slot, (PyTypeObject *)Py_NewRef(obj));
    return 0;
}

static int take_callable(PyObject *obj, PyObject **slot) {
    if (!PyCallable_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "setup: expected a callable, got %R", obj);
        return -1;
    }
    Py_XSETREF(*slot, Py_NewRef(obj));
    return 0;
}

static PyObject *setup(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (!check_nargs("setup", nargs, 8)) return NULL;
    /* validate everything first, so a failed call leaves the previous setup in place */
    for (int i = 0; i < 3; i++)
        if (!PyType_Check(args[i]) || !PyType_IsSubtype((PyTypeObject *)args[i], &PyTuple_Type))
            return PyErr_Format(PyExc_TypeError, "setup: expected a tuple subclass, got %R",
                                args[i]);
    if (!PyType_Check(args[3]) || !PyType_IsSubtype((PyTypeObject *)args[3], &PyBytes_Type))
        return PyErr_Format(PyExc_TypeError, "setup: expected a bytes subclass, got %R", args[3]);
    for (int i = 5; i < 8; i++)
        if (!PyCallable_Check(args[i]))
            return PyErr_Format(PyExc_TypeError, "setup: expected a callable, got %R", args[i]);
    if (str_K == NULL && (str_K = PyUnicode_InternFromString("K")) == NULL) return NULL;
    if (str_O == NULL && (str_O = PyUnicode_InternFromString("O")) == NULL) return NULL;
    if (take_type(args[0], &PyTuple_Type, &Insert_type) < 0 ||
        take_type(args[1], &PyTuple_Type, &Update_type) < 0 ||
        take_type(args[2], &PyTuple_Type, &Delete_type) < 0 ||
        take_type(args[3], &PyBytes_Type, &BinaryValue_type) < 0 ||
        take_callable(args[5], &insert_reader) < 0 ||
        take_callable(args[6], &update_reader) < 0 ||
        take_callable(args[7], &delete_reader) < 0)
        return NULL;
    Py_XSETREF(unchanged_toast, Py_NewRef(args[4]));
    PyTypeObject *bv = BinaryValue_type;
    binary_direct = bv->tp_basicsize == PyBytes_Type.tp_basicsize &&
                    bv->tp_itemsize == PyBytes_Type.tp_itemsize && bv->tp_dictoffset == 0 &&
                    bv->tp_weaklistoffset == 0 && bv->tp_new == PyBytes_Type.tp_new &&
                    bv->tp_init == PyBytes_Type.tp_init;
    Py_RETURN_NONE;
}

static PyMethodDef tuple_methods[] = {
    {"setup", (PyCFunction)(void (*)(void))setup, METH_FASTCALL,
     "setup(Insert, Update, Delete, BinaryValue, UNCHANGED_TOAST, insert_reader, update_reader, "
     "delete_reader): the classes to build and the Python readers to fall back to."},
    {"decode_change", (PyCFunction)(void (*)(void))decode_change, METH_FASTCALL,
     "decode_change(buf: bytes, streaming: bool) -> Insert | Update | Delete | None\n\n"
     "Decode an 'I', 'U' or 'D' message like the Python readers; None for anything they "
     "would reject (and for anything else it does not handle)."},
    {"read_change", (PyCFunction)(void (*)(void))read_change, METH_FASTCALL,
     "read_change(buf: bytes, streaming: bool) -> Insert | Update | Delete\n\n"
     "decode_change, falling back to the Python reader of the message type (which raises the "
     "precise DecodeError) where decode_change gives None."},
    {NULL, NULL, 0, NULL},
};

int pgcdc_add_tuple(PyObject *module) {
    return PyModule_AddFunctions(module, tuple_methods);
}
