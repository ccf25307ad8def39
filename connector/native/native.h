#ifndef PGCDC_NATIVE_H
#define PGCDC_NATIVE_H
#include <Python.h>

/* Each part adds its functions and types to the module; -1 with an exception on failure. */
int pgcdc_add_rowenc(PyObject *module);  /* rowenc.c: pgoutput text values -> Avro row bytes */
int pgcdc_add_tuple(PyObject *module);    /* tuple.c: pgoutput Insert/Update/Delete decoding */
int pgcdc_add_envelope(PyObject *module); /* envelope.c: the Envelope around encoded rows */
int pgcdc_add_avrodec(PyObject *module);  /* avrodec.c: change events -> the merge job's rows */

/* EnvelopeFrame.write(op, before, after, toast, source, ts_ms, transaction[, unparsed]) from
 * C */
PyObject *pgcdc_envelope_write(PyObject *frame, PyObject *const *args, Py_ssize_t nargs);

/* 1 when s[0:n] is UTF-8 as Python's strict decoder takes it (rowenc.c; avrodec.c too) */
int pgcdc_valid_utf8(const unsigned char *s, Py_ssize_t n);

#endif
