/* pgoutput text values -> Avro binary rows (the twin of connector/avro/serializer.py). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "native.h"

int pgcdc_add_rowenc(PyObject *module) {
    (void)module;
    return 0;
}
