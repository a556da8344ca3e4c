/* Stand-in for the `cuda_utils` launcher module Triton compiles at first use.
 * Like Triton's, it is a CPython extension built on the node with the system C
 * compiler against the interpreter's headers, so a node without python3-dev fails
 * with gcc's own "Python.h: No such file or directory". The properties are a
 * B300's, as a CUDA driver would report them. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *get_device_properties(PyObject *self, PyObject *args) {
    int device_id;
    if (!PyArg_ParseTuple(args, "i", &device_id))
        return NULL;
    return Py_BuildValue("{s:i, s:s, s:i, s:i, s:i, s:i, s:i, s:i}",
                         "device_id", device_id,
                         "name", "NVIDIA B300 SXM6 AC",
                         "max_shared_mem", 232448,
                         "max_num_regs", 65536,
                         "multiprocessor_count", 148,
                         "warpSize", 32,
                         "sm_clock_rate", 2032000,
                         "mem_bus_width", 8192);
}

static PyMethodDef module_methods[] = {
    {"get_device_properties", get_device_properties, METH_VARARGS,
     "Get the properties for a given device"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "cuda_utils", NULL, -1, module_methods};

PyMODINIT_FUNC PyInit_cuda_utils(void) { return PyModule_Create(&module_def); }
