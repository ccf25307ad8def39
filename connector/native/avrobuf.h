/* Avro binary output: a growable buffer and the primitive writers (shared by rowenc.c and
 * envelope.c). Everything is static inline: each part gets its own copy. */
#ifndef PGCDC_AVROBUF_H
#define PGCDC_AVROBUF_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* ------------------------------------------------------------------ output buffer */

typedef struct {
    char *data;
    Py_ssize_t len, cap;
    char stack[2048];
} Buf;

static inline void buf_init(Buf *b) {
    b->data = b->stack;
    b->len = 0;
    b->cap = sizeof b->stack;
}

static inline void buf_free(Buf *b) {
    if (b->data != b->stack) PyMem_Free(b->data);
}

static inline int buf_reserve(Buf *b, Py_ssize_t extra) {
    if (b->len + extra <= b->cap) return 0;
    Py_ssize_t cap = b->cap;
    while (cap < b->len + extra) cap *= 2;
    char *data;
    if (b->data == b->stack) {
        data = PyMem_Malloc(cap);
        if (data != NULL) memcpy(data, b->stack, b->len);
    } else {
        data = PyMem_Realloc(b->data, cap);
    }
    if (data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->data = data;
    b->cap = cap;
    return 0;
}

static inline int buf_put(Buf *b, const char *src, Py_ssize_t n) {
    if (buf_reserve(b, n) < 0) return -1;
    memcpy(b->data + b->len, src, n);
    b->len += n;
    return 0;
}

/* Avro long: zig-zag, then base-128 varint. Room for 10 bytes must be reserved. */
static inline void put_long(Buf *b, int64_t n) {
    uint64_t z = ((uint64_t)n << 1) ^ (uint64_t)(n >> 63);
    char *p = b->data + b->len;
    while (z >= 0x80) {
        *p++ = (char)((z & 0x7F) | 0x80);
        z >>= 7;
    }
    *p++ = (char)z;
    b->len = p - b->data;
}

/* "\x02" (the union's non-null branch) + an Avro long */
static inline int put_branch_long(Buf *b, int64_t n) {
    if (buf_reserve(b, 11) < 0) return -1;
    b->data[b->len++] = 2;
    put_long(b, n);
    return 0;
}

/* "\x02" + an Avro string or bytes of n bytes */
static inline int put_branch_bytes(Buf *b, const char *s, Py_ssize_t n) {
    if (buf_reserve(b, 11 + n) < 0) return -1;
    b->data[b->len++] = 2;
    put_long(b, n);
    memcpy(b->data + b->len, s, n);
    b->len += n;
    return 0;
}

/* an Avro string of a str: its UTF-8 */
static inline int put_string(Buf *b, PyObject *text) {
    Py_ssize_t n;
    const char *s = PyUnicode_AsUTF8AndSize(text, &n);
    if (s == NULL) return -1;
    if (buf_reserve(b, 10 + n) < 0) return -1;
    put_long(b, n);
    memcpy(b->data + b->len, s, n);
    b->len += n;
    return 0;
}

#endif
