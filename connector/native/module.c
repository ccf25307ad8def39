/* connector._native: the C hot paths behind pure-Python reference implementations.
 *
 * Every function here has a Python twin that stays the reference (and the fallback when the
 * extension is not built or PGCDC_NO_NATIVE is set); tests compare the two value for value.
 * On input the fast path does not handle, a function returns None and the caller runs the
 * Python twin, which also produces the precise error for malformed input.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "native.h"

static struct PyModuleDef native_module = {
    PyModuleDef_HEAD_INIT, "connector._native",
    "C hot paths of pgcdc (pgoutput tuples, Avro rows, change events to rows); see connector/native/module.c.",
    -1, NULL, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__native(void) {
    PyObject *module = PyModule_Create(&native_module);
    if (module == NULL) return NULL;
    if (pgcdc_add_rowenc(module) < 0 || pgcdc_add_tuple(module) < 0 ||
        pgcdc_add_envelope(module) < 0 || pgcdc_add_avrodec(module) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
