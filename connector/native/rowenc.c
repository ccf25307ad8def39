/* pgoutput text values -> Avro binary rows: the twin of TableCodec's Python row path
 * (connector/avro/serializer.py, loaders in connector/pgtypes, converters in connector/avro).
 *
 * A RowPlan is built once per table schema version. Per column it has a kind (below) and a
 * Python fallback `piece(raw) -> bytes` giving the column's whole union field (b"\x00" or
 * b"\x02" + datum) the Python way. The C parsers accept only the canonical text PostgreSQL
 * prints for common values (ISO dates, plain decimals, ...); anything else -- binary values,
 * infinities, BC dates, NaN, years past 9998, other DateStyles -- goes to the fallback, so the
 * output is always the Python path's bytes (tests/unit/avro/test_native_rows.py compares them).
 * A piece returns (b"\x00", exact text) for a value that fell back to null (connector/avro/
 * fallback.py): the text goes to the Envelope's `unparsed` dict under the column's field name
 * (`before.` + it in the old row), created only when a value falls back.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "avrobuf.h"
#include "native.h"

enum {
    K_FALLBACK = 0, /* always the Python piece */
    K_STRING = 1,   /* text, varchar, bpchar, name, json: the text itself */
    K_BOOL = 2,
    K_INT = 3,      /* int8 (and, in text, every int kind): Avro int/long */
    K_DOUBLE = 4,
    K_FLOAT = 5,
    K_DECIMAL = 6,  /* numeric(p,s): Avro decimal bytes of scale s */
    K_DATE = 7,
    K_TIME = 8,
    K_TIMESTAMP = 9,
    K_TIMESTAMPTZ = 10,
    K_UUID = 11,
    K_INT2 = 12,    /* the int kinds differ only in their binary width */
    K_INT4 = 13,
    K_OID = 14,     /* unsigned */
    K_JSONB = 15,   /* text: K_STRING; binary: a version byte first (the fallback's job) */
    K_LAST = 15
};

/* ------------------------------------------------------------------ text parsers
 * Each returns 1 when it wrote the field, 0 when the text is not its canonical form (the
 * caller then uses the fallback), -1 on a Python error. */

static int digits(const char *s, int n, int64_t *out) {
    int64_t v = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return 0;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return 1;
}

static int parse_int(const char *s, Py_ssize_t n, int64_t *out) {
    int neg = n > 0 && s[0] == '-';
    if (neg) s++, n--;
    if (n < 1 || n > 18) return 0; /* 19 digits may overflow: the fallback checks */
    int64_t v;
    if (!digits(s, (int)n, &v)) return 0;
    *out = neg ? -v : v;
    return 1;
}

static int enc_int(Buf *b, const char *s, Py_ssize_t n) {
    int64_t v;
    if (!parse_int(s, n, &v)) return 0;
    return put_branch_long(b, v) < 0 ? -1 : 1;
}

/* Avro int: a text beyond 32 bits (PostgreSQL sends none for int2/int4) is the Python
 * piece's, whose int encoder refuses it (the fallback rule). */
static int enc_int32(Buf *b, const char *s, Py_ssize_t n) {
    int64_t v;
    if (!parse_int(s, n, &v) || v < INT32_MIN || v > INT32_MAX) return 0;
    return put_branch_long(b, v) < 0 ? -1 : 1;
}

static int enc_bool(Buf *b, const char *s, Py_ssize_t n) {
    if (n != 1 || (s[0] != 't' && s[0] != 'f')) return 0;
    if (buf_reserve(b, 2) < 0) return -1;
    b->data[b->len++] = 2;
    b->data[b->len++] = s[0] == 't';
    return 1;
}

static int enc_real(Buf *b, const char *s, Py_ssize_t n, int single) {
    /* digits, sign, point and exponent only: NaN and Infinity take the fallback */
    if (n < 1 || n > 64) return 0;
    char text[65];
    for (Py_ssize_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' ||
              c == 'E'))
            return 0;
        text[i] = c;
    }
    text[n] = '\0';
    char *end;
    double v = PyOS_string_to_double(text, &end, NULL); /* float()'s own parser */
    if (v == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    if (end != text + n) return 0;
    if (buf_reserve(b, 9) < 0) return -1;
    b->data[b->len++] = 2;
    if (single) {
        if (PyFloat_Pack4(v, b->data + b->len, 1) < 0) { /* out of float range */
            PyErr_Clear();
            b->len--;
            return 0;
        }
        b->len += 4;
    } else {
        PyFloat_Pack8(v, b->data + b->len, 1);
        b->len += 8;
    }
    return 1;
}

/* numeric(p,s) text "-123.45" -> Avro decimal: the unscaled value, big-endian two's
 * complement in (bit_length(|v|) + 8) / 8 bytes, as fastavro sizes it. */
static int enc_decimal(Buf *b, const char *s, Py_ssize_t n, int scale, int max_int_digits) {
    int neg = n > 0 && s[0] == '-';
    if (neg) s++, n--;
    Py_ssize_t point = n;
    for (Py_ssize_t i = 0; i < n; i++)
        if (s[i] == '.') {
            point = i;
            break;
        }
    Py_ssize_t int_digits = point, frac_digits = point < n ? n - point - 1 : 0;
    /* more integer digits than numeric(p,s) holds: Python raises the explained error */
    if (int_digits < 1 || frac_digits > scale || int_digits + scale > 18) return 0;
    if (int_digits > max_int_digits && !(int_digits == 1 && s[0] == '0')) return 0;
    if (point < n && frac_digits < 1) return 0;
    int64_t whole, frac = 0;
    if (!digits(s, (int)int_digits, &whole)) return 0;
    if (frac_digits && !digits(s + point + 1, (int)frac_digits, &frac)) return 0;
    int64_t unscaled = whole;
    for (int i = 0; i < scale; i++) unscaled *= 10;
    int64_t frac_scaled = frac;
    for (Py_ssize_t i = frac_digits; i < scale; i++) frac_scaled *= 10;
    unscaled += frac_scaled;
    if (neg) unscaled = -unscaled;
    uint64_t magnitude = neg ? (uint64_t)(-unscaled) : (uint64_t)unscaled;
    int bits = 0;
    while (magnitude) bits++, magnitude >>= 1;
    int size = (bits + 8) / 8;
    if (buf_reserve(b, 2 + size) < 0) return -1;
    b->data[b->len++] = 2;
    put_long(b, size);
    for (int i = size - 1; i >= 0; i--) b->data[b->len++] = (char)((uint64_t)unscaled >> (8 * i));
    return 1;
}

static int64_t days_from_civil(int64_t y, int64_t m, int64_t d) {
    /* days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm) */
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static int days_in_month(int64_t y, int64_t m) {
    static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (m == 2 && ((y % 4 == 0 && y % 100 != 0) || y % 400 == 0)) return 29;
    return days[m - 1];
}

/* "YYYY-MM-DD", years 1000-9998 (others, BC and infinities take the fallback) */
static int parse_date(const char *s, Py_ssize_t n, int64_t *days) {
    int64_t y, m, d;
    if (n < 10 || s[4] != '-' || s[7] != '-') return 0;
    if (!digits(s, 4, &y) || !digits(s + 5, 2, &m) || !digits(s + 8, 2, &d)) return 0;
    if (y < 1000 || y > 9998 || m < 1 || m > 12 || d < 1 || d > days_in_month(y, m)) return 0;
    *days = days_from_civil(y, m, d);
    return 1;
}

/* "HH:MM:SS" with an optional ".f" of 1-6 digits; returns the characters read, 0: not one */
static Py_ssize_t parse_time(const char *s, Py_ssize_t n, int64_t *micros) {
    int64_t h, mi, sec, frac = 0;
    if (n < 8 || s[2] != ':' || s[5] != ':') return 0;
    if (!digits(s, 2, &h) || !digits(s + 3, 2, &mi) || !digits(s + 6, 2, &sec)) return 0;
    if (h > 23 || mi > 59 || sec > 59) return 0;
    Py_ssize_t o = 8;
    if (o < n && s[o] == '.') {
        Py_ssize_t start = ++o;
        while (o < n && s[o] >= '0' && s[o] <= '9' && o - start < 6) {
            frac = frac * 10 + (s[o] - '0');
            o++;
        }
        if (o == start || (o < n && s[o] >= '0' && s[o] <= '9')) return 0;
        for (Py_ssize_t i = o - start; i < 6; i++) frac *= 10;
    }
    *micros = ((h * 60 + mi) * 60 + sec) * 1000000 + frac;
    return o;
}

static int enc_date(Buf *b, const char *s, Py_ssize_t n) {
    int64_t days;
    if (n != 10 || !parse_date(s, n, &days)) return 0;
    return put_branch_long(b, days) < 0 ? -1 : 1;
}

static int enc_time(Buf *b, const char *s, Py_ssize_t n) {
    int64_t micros;
    Py_ssize_t used = parse_time(s, n, &micros);
    if (used == 0 || used != n) return 0;
    return put_branch_long(b, micros) < 0 ? -1 : 1;
}

/* "YYYY-MM-DD HH:MM:SS[.f]" and, with a time zone, "+HH[:MM[:SS]]" / "-HH..." */
static int enc_timestamp(Buf *b, const char *s, Py_ssize_t n, int with_zone) {
    int64_t days, micros, offset = 0;
    if (n < 19 || s[10] != ' ' || !parse_date(s, 10, &days)) return 0;
    Py_ssize_t o = parse_time(s + 11, n - 11, &micros);
    if (o == 0) return 0;
    o += 11;
    if (with_zone) {
        if (o + 3 > n || (s[o] != '+' && s[o] != '-')) return 0;
        int64_t sign = s[o] == '-' ? -1 : 1, part;
        o++;
        if (!digits(s + o, 2, &part) || part > 15) return 0;
        offset = part * 3600;
        o += 2;
        if (o < n) {
            if (o + 3 > n || s[o] != ':' || !digits(s + o + 1, 2, &part) || part > 59) return 0;
            offset += part * 60;
            o += 3;
        }
        if (o < n) {
            if (o + 3 > n || s[o] != ':' || !digits(s + o + 1, 2, &part) || part > 59) return 0;
            offset += part;
            o += 3;
        }
        offset *= sign;
    }
    if (o != n) return 0;
    return put_branch_long(b, days * 86400000000LL + micros - offset * 1000000) < 0 ? -1 : 1;
}

static int is_hex_lower(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

static int enc_uuid(Buf *b, const char *s, Py_ssize_t n) {
    if (n != 36) return 0;
    for (int i = 0; i < 36; i++) {
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (s[i] != '-') return 0;
        } else if (!is_hex_lower(s[i])) {
            return 0;
        }
    }
    return put_branch_bytes(b, s, n) < 0 ? -1 : 1;
}

/* ------------------------------------------------------------------ RowPlan */

typedef struct {
    PyObject_HEAD
    Py_ssize_t ncols;
    unsigned char *kinds;
    int *scales;
    int *int_digits;     /* numeric(p,s): at most p - s digits before the point */
    PyObject *fallbacks; /* tuple of callables: raw -> the column's union field bytes */
    PyObject *names;     /* tuple of str: Avro field names, listed for unchanged TOAST */
    PyObject *before_names; /* "before." + each name: `unparsed` keys of the old row */
    Py_ssize_t nkeys;
    Py_ssize_t *keys;    /* key column indexes, in key order */
    PyObject *unchanged; /* the UNCHANGED_TOAST marker */
} RowPlan;

static void RowPlan_dealloc(RowPlan *self) {
    PyMem_Free(self->kinds);
    PyMem_Free(self->scales);
    PyMem_Free(self->int_digits);
    PyMem_Free(self->keys);
    Py_XDECREF(self->fallbacks);
    Py_XDECREF(self->names);
    Py_XDECREF(self->before_names);
    Py_XDECREF(self->unchanged);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *RowPlan_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"kinds", "scales", "int_digits", "fallbacks", "names", "keys",
                             "unchanged", NULL};
    PyObject *kinds, *scales, *int_digits, *fallbacks, *names, *keys, *unchanged;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "SO!O!O!O!O!O:RowPlan", kwlist, &kinds,
                                     &PyTuple_Type, &scales, &PyTuple_Type, &int_digits,
                                     &PyTuple_Type, &fallbacks, &PyTuple_Type, &names,
                                     &PyTuple_Type, &keys, &unchanged))
        return NULL;
    Py_ssize_t n = PyBytes_GET_SIZE(kinds);
    if (PyTuple_GET_SIZE(scales) != n || PyTuple_GET_SIZE(int_digits) != n ||
        PyTuple_GET_SIZE(fallbacks) != n || PyTuple_GET_SIZE(names) != n) {
        PyErr_SetString(PyExc_ValueError,
                        "RowPlan: kinds, scales, int_digits, fallbacks, names differ in length");
        return NULL;
    }
    RowPlan *self = (RowPlan *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->ncols = n;
    self->nkeys = PyTuple_GET_SIZE(keys);
    self->kinds = PyMem_Malloc(n + 1);
    self->scales = PyMem_Malloc(sizeof(int) * (n + 1));
    self->int_digits = PyMem_Malloc(sizeof(int) * (n + 1));
    self->keys = PyMem_Malloc(sizeof(Py_ssize_t) * (self->nkeys + 1));
    Py_INCREF(fallbacks);
    self->fallbacks = fallbacks;
    Py_INCREF(names);
    self->names = names;
    Py_INCREF(unchanged);
    self->unchanged = unchanged;
    self->before_names = PyTuple_New(n);
    if (self->before_names == NULL) goto fail;
    if (self->kinds == NULL || self->scales == NULL || self->int_digits == NULL ||
        self->keys == NULL) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    const char *k = PyBytes_AS_STRING(kinds);
    for (Py_ssize_t i = 0; i < n; i++) {
        long scale = PyLong_AsLong(PyTuple_GET_ITEM(scales, i));
        if (scale == -1 && PyErr_Occurred()) goto fail;
        long digits = PyLong_AsLong(PyTuple_GET_ITEM(int_digits, i));
        if (digits == -1 && PyErr_Occurred()) goto fail;
        if ((unsigned char)k[i] > K_LAST || scale < 0 || scale > 18 || digits < 0 ||
            digits > 1000 ||
            !PyCallable_Check(PyTuple_GET_ITEM(fallbacks, i)) ||
            !PyUnicode_Check(PyTuple_GET_ITEM(names, i))) {
            PyErr_Format(PyExc_ValueError, "RowPlan: bad kind, scale, fallback or name of column %zd", i);
            goto fail;
        }
        PyObject *before_name = PyUnicode_FromFormat("before.%U", PyTuple_GET_ITEM(names, i));
        if (before_name == NULL) goto fail;
        PyTuple_SET_ITEM(self->before_names, i, before_name);
        self->kinds[i] = (unsigned char)k[i];
        self->scales[i] = (int)scale;
        self->int_digits[i] = (int)digits;
    }
    for (Py_ssize_t i = 0; i < self->nkeys; i++) {
        Py_ssize_t index = PyLong_AsSsize_t(PyTuple_GET_ITEM(keys, i));
        if (index == -1 && PyErr_Occurred()) goto fail;
        if (index < 0 || index >= n) {
            PyErr_Format(PyExc_ValueError, "RowPlan: key column %zd out of range", index);
            goto fail;
        }
        self->keys[i] = index;
    }
    return (PyObject *)self;
fail:
    Py_DECREF(self);
    return NULL;
}

/* A column's field from its text (UTF-8) by the column's C parser. 1: written, 0: not the
 * canonical form (use the fallback), -1: error. */
static int encode_text(RowPlan *self, Py_ssize_t i, const char *s, Py_ssize_t n, Buf *b) {
    switch (self->kinds[i]) {
    case K_STRING:
    case K_JSONB: return put_branch_bytes(b, s, n) < 0 ? -1 : 1;
    case K_BOOL: return enc_bool(b, s, n);
    case K_INT:
    case K_OID: return enc_int(b, s, n);
    case K_INT2:
    case K_INT4: return enc_int32(b, s, n);
    case K_DOUBLE: return enc_real(b, s, n, 0);
    case K_FLOAT: return enc_real(b, s, n, 1);
    case K_DECIMAL: return enc_decimal(b, s, n, self->scales[i], self->int_digits[i]);
    case K_DATE: return enc_date(b, s, n);
    case K_TIME: return enc_time(b, s, n);
    case K_TIMESTAMP: return enc_timestamp(b, s, n, 0);
    case K_TIMESTAMPTZ: return enc_timestamp(b, s, n, 1);
    case K_UUID: return enc_uuid(b, s, n);
    }
    return 0;
}

/* Strict UTF-8 as Python decodes it: no overlong forms, no surrogates, at most U+10FFFF. */
int pgcdc_valid_utf8(const unsigned char *s, Py_ssize_t n) {
    Py_ssize_t i = 0;
    while (i < n) {
        unsigned char c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        int len;
        unsigned char lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) len = 2;
        else if (c == 0xE0) len = 3, lo = 0xA0;
        else if (c == 0xED) len = 3, hi = 0x9F;
        else if (c >= 0xE1 && c <= 0xEF) len = 3;
        else if (c == 0xF0) len = 4, lo = 0x90;
        else if (c >= 0xF1 && c <= 0xF3) len = 4;
        else if (c == 0xF4) len = 4, hi = 0x8F;
        else return 0;
        if (i + len > n || s[i + 1] < lo || s[i + 1] > hi) return 0;
        for (int k = 2; k < len; k++)
            if (s[i + k] < 0x80 || s[i + k] > 0xBF) return 0;
        i += len;
    }
    return 1;
}

/* ------------------------------------------------------------------ binary values
 * pgoutput's binary tuples (`--binary`): the types' send functions' output. Same contract as
 * the text parsers: 1 written, 0 the fallback's (infinities, out-of-range, odd widths), -1. */

#define PG_EPOCH_DAYS 10957                  /* 2000-01-01 in days since 1970-01-01 */
#define PG_EPOCH_MICROS 946684800000000LL    /* and in microseconds */
#define MIN_MICROS (-62135596800000000LL)    /* 0001-01-01 00:00:00 since 1970 */
#define MAX_MICROS 253402300799999999LL      /* 9999-12-31 23:59:59.999999 */
/* timestamptz: a day inside (two at the start), as connector/avro/datums.py clamps it */
#define MIN_MICROS_TZ (MIN_MICROS + 2 * 86400000000LL)
#define MAX_MICROS_TZ (MAX_MICROS - 86400000000LL)

static int64_t be_int(const unsigned char *s, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v = (v << 8) | s[i];
    if (n < 8 && (v >> (8 * n - 1)) & 1) v |= ~(uint64_t)0 << (8 * n); /* sign-extend */
    return (int64_t)v;
}

static int put_hex_uuid(Buf *b, const unsigned char *s) {
    static const char hex[] = "0123456789abcdef";
    if (buf_reserve(b, 38) < 0) return -1;
    b->data[b->len++] = 2;
    b->data[b->len++] = 72; /* zig-zag varint of the length 36 */
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10) b->data[b->len++] = '-';
        b->data[b->len++] = hex[s[i] >> 4];
        b->data[b->len++] = hex[s[i] & 15];
    }
    return 1;
}

static int encode_binary(RowPlan *self, Py_ssize_t i, const char *data, Py_ssize_t n, Buf *b) {
    const unsigned char *s = (const unsigned char *)data;
    int64_t v;
    switch (self->kinds[i]) {
    case K_STRING:
        if (!pgcdc_valid_utf8(s, n)) return 0;
        return put_branch_bytes(b, data, n) < 0 ? -1 : 1;
    case K_BOOL:
        if (n != 1 || s[0] > 1) return 0;
        if (buf_reserve(b, 2) < 0) return -1;
        b->data[b->len++] = 2;
        b->data[b->len++] = (char)s[0];
        return 1;
    case K_INT2:
    case K_INT4:
    case K_INT:
        if (n != (self->kinds[i] == K_INT2 ? 2 : self->kinds[i] == K_INT4 ? 4 : 8)) return 0;
        return put_branch_long(b, be_int(s, (int)n)) < 0 ? -1 : 1;
    case K_OID:
        if (n != 4) return 0;
        return put_branch_long(b, be_int(s, 4) & 0xFFFFFFFFLL) < 0 ? -1 : 1;
    case K_DOUBLE: {
        if (n != 8) return 0;
        double d = PyFloat_Unpack8(data, 0);
        if (d == -1.0 && PyErr_Occurred()) return -1;
        if (buf_reserve(b, 9) < 0) return -1;
        b->data[b->len++] = 2;
        if (PyFloat_Pack8(d, b->data + b->len, 1) < 0) return -1;
        b->len += 8;
        return 1;
    }
    case K_UUID:
        return n == 16 ? put_hex_uuid(b, s) : 0;
    case K_DATE:
        if (n != 4) return 0;
        v = be_int(s, 4) + PG_EPOCH_DAYS;
        if (v < -719162 || v > 2932896) return 0; /* outside 0001-01-01..9999-12-31 */
        return put_branch_long(b, v) < 0 ? -1 : 1;
    case K_TIME:
        if (n != 8) return 0;
        v = be_int(s, 8);
        if (v < 0 || v >= 86400000000LL) return 0;
        return put_branch_long(b, v) < 0 ? -1 : 1;
    case K_TIMESTAMP:
    case K_TIMESTAMPTZ: {
        int zoned = self->kinds[i] == K_TIMESTAMPTZ;
        if (n != 8) return 0;
        v = be_int(s, 8) + PG_EPOCH_MICROS;
        if (v < (zoned ? MIN_MICROS_TZ : MIN_MICROS) || v > (zoned ? MAX_MICROS_TZ : MAX_MICROS))
            return 0;
        return put_branch_long(b, v) < 0 ? -1 : 1;
    }
    }
    return 0; /* float4 (its shortest-decimal rule), numeric, jsonb: the fallback */
}

/* A column's field the Python way. 1: written, -1: error. A piece of (bytes, text): the text
 * is set in *unparsed (a dict made on first use) under names[i]; unparsed NULL: dropped (the
 * key). */
static int encode_fallback(RowPlan *self, Py_ssize_t i, PyObject *raw, Buf *b,
                           PyObject **unparsed, PyObject *names) {
    PyObject *piece = PyObject_CallOneArg(PyTuple_GET_ITEM(self->fallbacks, i), raw);
    if (piece == NULL) return -1;
    PyObject *field = piece;
    if (PyTuple_Check(piece) && PyTuple_GET_SIZE(piece) == 2) {
        field = PyTuple_GET_ITEM(piece, 0);
        if (unparsed != NULL) {
            if (*unparsed == NULL && (*unparsed = PyDict_New()) == NULL) goto fail;
            if (PyDict_SetItem(*unparsed, PyTuple_GET_ITEM(names, i),
                               PyTuple_GET_ITEM(piece, 1)) < 0)
                goto fail;
        }
    }
    if (!PyBytes_Check(field)) {
        PyErr_SetString(PyExc_TypeError, "RowPlan: a fallback returned no bytes");
        goto fail;
    }
    int rc = buf_put(b, PyBytes_AS_STRING(field), PyBytes_GET_SIZE(field));
    Py_DECREF(piece);
    return rc < 0 ? -1 : 1;
fail:
    Py_DECREF(piece);
    return -1;
}

/* One column's union field from a pgoutput value (not None / unchanged). 1: written, -1.
 * `unparsed`/`names`: as encode_fallback. */
static int encode_column(RowPlan *self, Py_ssize_t i, PyObject *raw, Buf *b,
                         PyObject **unparsed, PyObject *names) {
    if (self->kinds[i] != K_FALLBACK) {
        int done = 0;
        if (PyUnicode_CheckExact(raw)) {
            Py_ssize_t n;
            const char *s = PyUnicode_AsUTF8AndSize(raw, &n);
            if (s == NULL) return -1;
            done = encode_text(self, i, s, n, b);
        } else if (PyBytes_Check(raw)) { /* BinaryValue */
            done = encode_binary(self, i, PyBytes_AS_STRING(raw), PyBytes_GET_SIZE(raw), b);
        }
        if (done != 0) return done;
    }
    return encode_fallback(self, i, raw, b, unparsed, names);
}

/* The key columns' fields, copied out of a row's fields (starts[i]: where column i begins). */
static PyObject *key_from_fields(RowPlan *self, const char *fields, const Py_ssize_t *starts) {
    Py_ssize_t size = 0;
    for (Py_ssize_t k = 0; k < self->nkeys; k++)
        size += starts[self->keys[k] + 1] - starts[self->keys[k]];
    PyObject *key = PyBytes_FromStringAndSize(NULL, size);
    if (key == NULL) return NULL;
    char *p = PyBytes_AS_STRING(key);
    for (Py_ssize_t k = 0; k < self->nkeys; k++) {
        Py_ssize_t i = self->keys[k], len = starts[i + 1] - starts[i];
        memcpy(p, fields + starts[i], len);
        p += len;
    }
    return key;
}

/* (row fields, key fields | None) of a finished row: the pair encode() and encode_copy()
 * return. */
static PyObject *row_and_key(RowPlan *self, const Buf *b, const Py_ssize_t *starts,
                             int with_key) {
    PyObject *row = PyBytes_FromStringAndSize(b->data, b->len);
    if (row == NULL) return NULL;
    PyObject *key = with_key ? key_from_fields(self, b->data, starts) : Py_NewRef(Py_None);
    PyObject *result = key == NULL ? NULL : PyTuple_Pack(2, row, key);
    Py_DECREF(row);
    Py_XDECREF(key);
    return result;
}

/* key_header + key fields as one bytes object (None stays None): the framed Kafka key. */
static PyObject *framed_key(PyObject *key_header, PyObject *fields) {
    if (fields == Py_None) return Py_NewRef(Py_None);
    Py_ssize_t head = PyBytes_GET_SIZE(key_header), size = PyBytes_GET_SIZE(fields);
    PyObject *key = PyBytes_FromStringAndSize(NULL, head + size);
    if (key == NULL) return NULL;
    memcpy(PyBytes_AS_STRING(key), PyBytes_AS_STRING(key_header), head);
    memcpy(PyBytes_AS_STRING(key) + head, PyBytes_AS_STRING(fields), size);
    return key;
}

/* encode() below; `unparsed`: as encode_fallback, `names` self->names or self->before_names. */
static PyObject *encode_row(RowPlan *self, PyObject *values, PyObject *toast, int with_key,
                            PyObject **unparsed, PyObject *names) {
    if (!PyTuple_Check(values) || PyTuple_GET_SIZE(values) != self->ncols) Py_RETURN_NONE;
    Buf b;
    buf_init(&b);
    Py_ssize_t small[65];
    Py_ssize_t *starts = small; /* starts[i]..starts[i+1]: column i's field */
    if (with_key && self->ncols + 1 > 65) {
        starts = PyMem_Malloc(sizeof(Py_ssize_t) * (self->ncols + 1));
        if (starts == NULL) return PyErr_NoMemory();
    }
    PyObject *result = NULL;
    for (Py_ssize_t i = 0; i < self->ncols; i++) {
        if (with_key) starts[i] = b.len;
        PyObject *raw = PyTuple_GET_ITEM(values, i);
        if (raw == Py_None || raw == self->unchanged) {
            if (buf_reserve(&b, 1) < 0) goto done;
            b.data[b.len++] = 0;
            if (raw == self->unchanged && toast != Py_None &&
                PyList_Append(toast, PyTuple_GET_ITEM(self->names, i)) < 0)
                goto done;
        } else if (encode_column(self, i, raw, &b, unparsed, names) < 0) {
            goto done;
        }
    }
    if (with_key) starts[self->ncols] = b.len;
    result = row_and_key(self, &b, starts, with_key);
done:
    if (starts != small) PyMem_Free(starts);
    buf_free(&b);
    return result;
}

PyDoc_STRVAR(RowPlan_encode_doc,
"encode(values, toast=None, with_key=False, unparsed=None, before=False)\n"
"    -> (row: bytes, key: bytes | None)\n\n"
"The Avro fields of a row of pgoutput values (str / bytes / None / UNCHANGED_TOAST) and, with\n"
"with_key, those of its key columns. Unchanged TOAST is null; its field name is appended to\n"
"`toast` when given. A value that falls back to null: its exact text is set in the dict\n"
"`unparsed` when given, under its field name (with `before`: 'before.' + it). None (no\n"
"exception): the row has the wrong number of values.");

static PyObject *RowPlan_encode(RowPlan *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 1 || nargs > 5) {
        PyErr_SetString(PyExc_TypeError,
                        "encode(values, toast=None, with_key=False, unparsed=None, before=False)");
        return NULL;
    }
    PyObject *toast = nargs > 1 ? args[1] : Py_None;
    int with_key = nargs > 2 ? PyObject_IsTrue(args[2]) : 0;
    if (with_key < 0) return NULL;
    PyObject *unparsed = nargs > 3 ? args[3] : Py_None;
    int before = nargs > 4 ? PyObject_IsTrue(args[4]) : 0;
    if (before < 0) return NULL;
    if (toast != Py_None && !PyList_Check(toast)) {
        PyErr_SetString(PyExc_TypeError, "encode: toast must be a list or None");
        return NULL;
    }
    if (unparsed != Py_None && !PyDict_Check(unparsed)) {
        PyErr_SetString(PyExc_TypeError, "encode: unparsed must be a dict or None");
        return NULL;
    }
    PyObject *dict = unparsed == Py_None ? NULL : unparsed;
    return encode_row(self, args[0], toast, with_key, unparsed == Py_None ? NULL : &dict,
                      before ? self->before_names : self->names);
}

/* ------------------------------------------------------------------ COPY text rows */

/* Undo COPY text escaping (\b \f \n \r \t \v; a backslash before any other byte stands for
 * that byte: PostgreSQL's COPY TO writes no octal or hex escapes) into `out`. */
static int copy_unescape(const char *s, Py_ssize_t n, Buf *out) {
    out->len = 0;
    if (buf_reserve(out, n) < 0) return -1;
    char *p = out->data;
    for (Py_ssize_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '\\' && i + 1 < n) {
            c = s[++i];
            switch (c) {
            case 'b': c = '\b'; break;
            case 'f': c = '\f'; break;
            case 'n': c = '\n'; break;
            case 'r': c = '\r'; break;
            case 't': c = '\t'; break;
            case 'v': c = '\v'; break;
            }
        }
        *p++ = c;
    }
    out->len = p - out->data;
    return 0;
}

/* encode_copy() below; `unparsed`: as encode_fallback (the row is an `after`). */
static PyObject *encode_copy_line(RowPlan *self, PyObject *line_obj, int with_key,
                                  PyObject **unparsed) {
    Py_buffer view;
    if (PyObject_GetBuffer(line_obj, &view, PyBUF_SIMPLE) < 0) return NULL;
    const char *line = view.buf;
    Py_ssize_t size = view.len;
    if (size > 0 && line[size - 1] == '\n') size--;
    Buf b, scratch;
    buf_init(&b);
    buf_init(&scratch);
    Py_ssize_t small[65];
    Py_ssize_t *starts = small;
    PyObject *result = NULL;
    if (self->ncols + 1 > 65) {
        starts = PyMem_Malloc(sizeof(Py_ssize_t) * (self->ncols + 1));
        if (starts == NULL) {
            PyErr_NoMemory();
            goto done;
        }
    }
    Py_ssize_t pos = 0;
    for (Py_ssize_t i = 0; i < self->ncols; i++) {
        starts[i] = b.len;
        if (pos > size) goto not_mine; /* fewer fields than columns */
        const char *field = line + pos;
        const char *tab = memchr(field, '\t', size - pos);
        Py_ssize_t n = tab == NULL ? size - pos : tab - field;
        if ((tab == NULL) != (i == self->ncols - 1)) goto not_mine;
        pos += n + 1;
        if (n == 2 && field[0] == '\\' && field[1] == 'N') {
            if (buf_put(&b, "\0", 1) < 0) goto done;
            continue;
        }
        const char *text = field;
        if (memchr(field, '\\', n) != NULL) {
            if (copy_unescape(field, n, &scratch) < 0) goto done;
            text = scratch.data;
            n = scratch.len;
        }
        int rc = 0;
        if (self->kinds[i] == K_STRING && !pgcdc_valid_utf8((const unsigned char *)text, n))
            goto not_mine;
        if (self->kinds[i] != K_FALLBACK) rc = encode_text(self, i, text, n, &b);
        if (rc < 0) goto done;
        if (rc == 0) {
            PyObject *raw = PyUnicode_DecodeUTF8(text, n, NULL);
            if (raw == NULL) {
                PyErr_Clear();
                goto not_mine;
            }
            rc = encode_fallback(self, i, raw, &b, unparsed, self->names);
            Py_DECREF(raw);
            if (rc < 0) goto done;
        }
    }
    starts[self->ncols] = b.len;
    result = row_and_key(self, &b, starts, with_key);
    goto done;
not_mine:
    result = Py_NewRef(Py_None);
done:
    if (starts != small) PyMem_Free(starts);
    buf_free(&scratch);
    buf_free(&b);
    PyBuffer_Release(&view);
    return result;
}

PyDoc_STRVAR(RowPlan_encode_copy_doc,
"encode_copy(line, with_key=False, unparsed=None) -> (row: bytes, key: bytes | None) | None\n\n"
"encode() of one row of COPY ... TO STDOUT text output (tab-separated, \\\\N for NULL,\n"
"backslash escapes, an optional final newline), without making Python strings of the values\n"
"the C parsers take. None (no exception): not one field per column, or a text column not\n"
"valid UTF-8 (the caller's Python parser then reports it). `unparsed`: as encode().");

static PyObject *RowPlan_encode_copy(RowPlan *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 1 || nargs > 3) {
        PyErr_SetString(PyExc_TypeError, "encode_copy(line, with_key=False, unparsed=None)");
        return NULL;
    }
    int with_key = nargs > 1 ? PyObject_IsTrue(args[1]) : 0;
    if (with_key < 0) return NULL;
    PyObject *unparsed = nargs > 2 ? args[2] : Py_None;
    if (unparsed != Py_None && !PyDict_Check(unparsed)) {
        PyErr_SetString(PyExc_TypeError, "encode_copy: unparsed must be a dict or None");
        return NULL;
    }
    PyObject *dict = unparsed == Py_None ? NULL : unparsed;
    return encode_copy_line(self, args[0], with_key, unparsed == Py_None ? NULL : &dict);
}

PyDoc_STRVAR(RowPlan_change_doc,
"change(frame, key_header, op, old, new, source, ts_ms, transaction, with_key)\n"
"    -> (key: bytes | None, value: bytes) | None\n\n"
"TableCodec.change_from_tuples in one call: encode() of the old and new tuples, the key from\n"
"new (else old) framed with key_header (b'': the table has no key), the Envelope by the\n"
"EnvelopeFrame `frame`. None for anything not handled or failing: the Python path then gives\n"
"the result or its explained error.");

static PyObject *RowPlan_change(RowPlan *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 9) {
        PyErr_SetString(PyExc_TypeError, "change(frame, key_header, op, old, new, source, "
                                         "ts_ms, transaction, with_key)");
        return NULL;
    }
    PyObject *frame = args[0], *key_header = args[1], *op = args[2], *old = args[3];
    PyObject *new = args[4];
    if (!PyBytes_Check(key_header)) Py_RETURN_NONE;
    int want_key = PyObject_IsTrue(args[8]);
    if (want_key < 0) goto decline;
    want_key = want_key && PyBytes_GET_SIZE(key_header) > 0;
    PyObject *toast = PyList_New(0), *before = NULL, *after = NULL, *key = NULL;
    PyObject *value = NULL, *result = NULL, *unparsed = NULL;
    if (toast == NULL) goto decline;
    if (old != Py_None) {
        PyObject *encoded = encode_row(self, old, Py_None, want_key && new == Py_None,
                                       &unparsed, self->before_names);
        if (encoded == NULL || encoded == Py_None) {
            Py_XDECREF(encoded);
            goto done;
        }
        before = Py_NewRef(PyTuple_GET_ITEM(encoded, 0));
        key = Py_NewRef(PyTuple_GET_ITEM(encoded, 1));
        Py_DECREF(encoded);
    }
    if (new != Py_None) {
        PyObject *encoded = encode_row(self, new, toast, want_key, &unparsed, self->names);
        if (encoded == NULL || encoded == Py_None) {
            Py_XDECREF(encoded);
            goto done;
        }
        after = Py_NewRef(PyTuple_GET_ITEM(encoded, 0));
        Py_XSETREF(key, Py_NewRef(PyTuple_GET_ITEM(encoded, 1)));
        Py_DECREF(encoded);
    }
    PyObject *write_args[8] = {op, before ? before : Py_None, after ? after : Py_None, toast,
                               args[5], args[6], args[7], unparsed ? unparsed : Py_None};
    value = pgcdc_envelope_write(frame, write_args, 8);
    if (value == NULL || value == Py_None) goto done;
    Py_XSETREF(key, framed_key(key_header, key == NULL ? Py_None : key));
    if (key == NULL) goto done;
    result = PyTuple_Pack(2, key, value);
done:
    Py_XDECREF(toast);
    Py_XDECREF(unparsed);
    Py_XDECREF(before);
    Py_XDECREF(after);
    Py_XDECREF(key);
    Py_XDECREF(value);
    if (result != NULL) return result;
decline:
    PyErr_Clear();
    Py_RETURN_NONE;
}

PyDoc_STRVAR(RowPlan_copy_change_doc,
"copy_change(frame, key_header, op, declined, line, source, ts_ms, transaction)\n"
"    -> (key: bytes | None, value: bytes) | None\n\n"
"TableCodec.copy_encoder's call per line: encode_copy() of the line as the new row, the key\n"
"framed with key_header (b'': no key), the Envelope by `frame`. A line not handled here goes\n"
"to declined(line, source, ts_ms, transaction) (the Python writer), whose result or error is\n"
"returned; declined None: None is returned for it.");

static PyObject *RowPlan_copy_change(RowPlan *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "copy_change(frame, key_header, op, declined, line, "
                                         "source, ts_ms, transaction)");
        return NULL;
    }
    PyObject *key_header = args[1], *declined = args[3], *encoded = NULL, *toast = NULL;
    PyObject *const *line_args = args + 4; /* line, source, ts_ms, transaction */
    PyObject *value = NULL, *key = NULL, *result = NULL, *unparsed = NULL;
    if (!PyBytes_Check(key_header)) goto done;
    encoded = encode_copy_line(self, line_args[0], PyBytes_GET_SIZE(key_header) > 0,
                               &unparsed);
    if (encoded == NULL || encoded == Py_None) goto done;
    toast = PyList_New(0);
    if (toast == NULL) goto done;
    PyObject *write_args[8] = {args[2], Py_None, PyTuple_GET_ITEM(encoded, 0), toast,
                               line_args[1], line_args[2], line_args[3],
                               unparsed ? unparsed : Py_None};
    value = pgcdc_envelope_write(args[0], write_args, 8);
    if (value == NULL || value == Py_None) goto done;
    key = framed_key(key_header, PyTuple_GET_ITEM(encoded, 1));
    if (key == NULL) goto done;
    result = PyTuple_Pack(2, key, value);
done:
    Py_XDECREF(encoded);
    Py_XDECREF(unparsed);
    Py_XDECREF(toast);
    Py_XDECREF(value);
    Py_XDECREF(key);
    if (result != NULL) return result;
    PyErr_Clear();
    if (declined == Py_None) Py_RETURN_NONE;
    return PyObject_Vectorcall(declined, line_args, 4, NULL);
}

PyDoc_STRVAR(RowPlan_key_doc,
"key(values) -> bytes | None\n\n"
"The Avro fields of the key columns only (None, no exception: wrong number of values).");

static PyObject *RowPlan_key(RowPlan *self, PyObject *values) {
    if (!PyTuple_Check(values) || PyTuple_GET_SIZE(values) != self->ncols) Py_RETURN_NONE;
    Buf b;
    buf_init(&b);
    PyObject *result = NULL;
    for (Py_ssize_t k = 0; k < self->nkeys; k++) {
        Py_ssize_t i = self->keys[k];
        PyObject *raw = PyTuple_GET_ITEM(values, i);
        if (raw == Py_None || raw == self->unchanged) {
            if (buf_reserve(&b, 1) < 0) goto done;
            b.data[b.len++] = 0;
        } else if (encode_column(self, i, raw, &b, NULL, self->names) < 0) {
            goto done;
        }
    }
    result = PyBytes_FromStringAndSize(b.data, b.len);
done:
    buf_free(&b);
    return result;
}

static PyMethodDef RowPlan_methods[] = {
    {"encode", (PyCFunction)(void (*)(void))RowPlan_encode, METH_FASTCALL, RowPlan_encode_doc},
    {"key", (PyCFunction)RowPlan_key, METH_O, RowPlan_key_doc},
    {"change", (PyCFunction)(void (*)(void))RowPlan_change, METH_FASTCALL, RowPlan_change_doc},
    {"copy_change", (PyCFunction)(void (*)(void))RowPlan_copy_change, METH_FASTCALL,
     RowPlan_copy_change_doc},
    {"encode_copy", (PyCFunction)(void (*)(void))RowPlan_encode_copy, METH_FASTCALL,
     RowPlan_encode_copy_doc},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject RowPlanType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "connector._native.RowPlan",
    .tp_basicsize = sizeof(RowPlan),
    .tp_dealloc = (destructor)RowPlan_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "RowPlan(kinds, scales, fallbacks, names, keys, unchanged): one table version's "
              "row encoder (see connector/native/rowenc.c).",
    .tp_methods = RowPlan_methods,
    .tp_new = RowPlan_new,
};

/* ROW_KINDS: the kinds above by name, the one table Python plans with (native_rows.py). */
static int add_row_kinds(PyObject *module) {
    static const struct { const char *name; int kind; } kinds[] = {
        {"FALLBACK", K_FALLBACK}, {"STRING", K_STRING}, {"BOOL", K_BOOL}, {"INT", K_INT},
        {"DOUBLE", K_DOUBLE}, {"FLOAT", K_FLOAT}, {"DECIMAL", K_DECIMAL}, {"DATE", K_DATE},
        {"TIME", K_TIME}, {"TIMESTAMP", K_TIMESTAMP}, {"TIMESTAMPTZ", K_TIMESTAMPTZ},
        {"UUID", K_UUID}, {"INT2", K_INT2}, {"INT4", K_INT4}, {"OID", K_OID},
        {"JSONB", K_JSONB},
    };
    PyObject *table = PyDict_New();
    if (table == NULL) return -1;
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        PyObject *value = PyLong_FromLong(kinds[i].kind);
        if (value == NULL || PyDict_SetItemString(table, kinds[i].name, value) < 0) {
            Py_XDECREF(value);
            Py_DECREF(table);
            return -1;
        }
        Py_DECREF(value);
    }
    if (PyModule_AddObject(module, "ROW_KINDS", table) < 0) {
        Py_DECREF(table);
        return -1;
    }
    return 0;
}

int pgcdc_add_rowenc(PyObject *module) {
    if (add_row_kinds(module) < 0) return -1;
    if (PyType_Ready(&RowPlanType) < 0) return -1;
    Py_INCREF(&RowPlanType);
    if (PyModule_AddObject(module, "RowPlan", (PyObject *)&RowPlanType) < 0) {
        Py_DECREF(&RowPlanType);
        return -1;
    }
    return 0;
}
