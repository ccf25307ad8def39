/* pgoutput TupleData decoding (the twin of connector/pgoutput/decoder.py). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "native.h"

int pgcdc_add_tuple(PyObject *module) {
    (void)module;
    return 0;
}
