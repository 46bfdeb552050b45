/* The C launcher as a CPython extension: a prepared launch called as a builtin function, no ctypes in between.
 *
 * cuda_launch.c is reached through ctypes: per call Python takes the record's lock, packs the stream and the
 * pointers with struct.pack_into, and ctypes converts and releases around one foreign call -- about a microsecond
 * on a server host, a fifth of a whole launch. Here `bind(record, ...)` returns a builtin function bound to that
 * record; calling it with (stream, *pointers) reads the integers, copies the record's header and kernel arguments
 * onto this thread's stack, writes the stream and pointers there, releases the GIL and launches through
 * ri_cuda_launch. The record itself is never written after binding, so threads need no lock: each launch reads
 * its own copy.
 *
 * Built against the stable ABI of CPython 3.10+ (one binary for every later version), only where Python.h
 * exists; without it the backend keeps the ctypes route. Nothing here links against libcuda or torch.
 */
#define Py_LIMITED_API 0x030A0000
#include <Python.h>
#include <string.h>

#include "cuda_launch.c"

/* Kernel arguments larger than this take the ctypes route (the shipped kernels use at most 256 bytes). */
#define RI_MAX_KERNARG_BYTES 1024
#define RI_MAX_POINTERS 16
#define RI_CAPSULE_NAME "rawindexer.cuda_launch.bound"

typedef struct {
    const struct ri_cuda_launch_record *record;  /* built by Python; its `extra` is ignored here */
    size_t kernarg_bytes;
    Py_ssize_t pointers;  /* how many 8-byte pointer slots open the kernel arguments */
    PyObject *fail;       /* fail(code): raises the backend's named error */
    PyObject *keep;       /* the Python objects the record lives in */
} ri_bound;

static void ri_bound_free(PyObject *capsule) {
    ri_bound *bound = (ri_bound *)PyCapsule_GetPointer(capsule, RI_CAPSULE_NAME);
    if (!bound) return;
    Py_XDECREF(bound->fail);
    Py_XDECREF(bound->keep);
    PyMem_Free(bound);
}

/* go(stream, *pointers): one launch of the bound kernel. TypeError / OverflowError for an argument that is not an
 * integer in [0, 2**64), as struct.pack_into raises them on the ctypes route (the launch path catches both). */
static PyObject *ri_bound_launch(PyObject *capsule, PyObject *const *args, Py_ssize_t nargs) {
    const ri_bound *bound = (const ri_bound *)PyCapsule_GetPointer(capsule, RI_CAPSULE_NAME);
    if (!bound) return NULL;
    if (nargs != 1 + bound->pointers) {
        PyErr_Format(PyExc_TypeError, "launch: expected a stream and %zd pointers, got %zd arguments",
                     bound->pointers, nargs);
        return NULL;
    }
    struct {
        struct ri_cuda_launch_record head;
        unsigned char kernargs[RI_MAX_KERNARG_BYTES];
    } local;
    unsigned long long values[1 + RI_MAX_POINTERS];
    for (Py_ssize_t i = 0; i < nargs; ++i) {
        if (!PyLong_Check(args[i])) {
            PyErr_Format(PyExc_TypeError, "launch: argument %zd must be an int", i);
            return NULL;
        }
        values[i] = PyLong_AsUnsignedLongLong(args[i]);
        if (values[i] == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
    }
    memcpy(&local, bound->record, sizeof(local.head) + bound->kernarg_bytes);
    memcpy(local.kernargs, &values[1], 8 * (size_t)bound->pointers);
    local.head.stream = (void *)(uintptr_t)values[0];
    size_t size = bound->kernarg_bytes;
    void *extra[5] = {(void *)1, local.kernargs, (void *)2, &size, (void *)0};
    local.head.extra = extra;
    int err;
    Py_BEGIN_ALLOW_THREADS
    err = ri_cuda_launch(&local.head);
    Py_END_ALLOW_THREADS
    if (err) return PyObject_CallFunction(bound->fail, "i", err);
    Py_RETURN_NONE;
}

static PyMethodDef ri_bound_def = {"go", (PyCFunction)(void (*)(void))ri_bound_launch, METH_FASTCALL,
                                   "go(stream, *pointers): launch the bound kernel on the caller's stream."};

/* bind(record_address, kernarg_bytes, pointers, fail, keep) -> go */
static PyObject *ri_bind(PyObject *module, PyObject *args) {
    (void)module;
    unsigned long long address, kernarg_bytes;
    Py_ssize_t pointers;
    PyObject *fail, *keep;
    if (!PyArg_ParseTuple(args, "KKnOO", &address, &kernarg_bytes, &pointers, &fail, &keep)) return NULL;
    if (kernarg_bytes > RI_MAX_KERNARG_BYTES || pointers < 0 || pointers > RI_MAX_POINTERS ||
        8 * (unsigned long long)pointers > kernarg_bytes) {
        PyErr_Format(PyExc_ValueError, "bind: at most %d kernel-argument bytes and %d leading pointers, got %llu "
                     "and %zd", RI_MAX_KERNARG_BYTES, RI_MAX_POINTERS, kernarg_bytes, pointers);
        return NULL;
    }
    ri_bound *bound = (ri_bound *)PyMem_Malloc(sizeof(ri_bound));
    if (!bound) return PyErr_NoMemory();
    bound->record = (const struct ri_cuda_launch_record *)(uintptr_t)address;
    bound->kernarg_bytes = (size_t)kernarg_bytes;
    bound->pointers = pointers;
    Py_INCREF(fail);
    Py_INCREF(keep);
    bound->fail = fail;
    bound->keep = keep;
    PyObject *capsule = PyCapsule_New(bound, RI_CAPSULE_NAME, ri_bound_free);
    if (!capsule) {
        Py_DECREF(fail);
        Py_DECREF(keep);
        PyMem_Free(bound);
        return NULL;
    }
    PyObject *go = PyCFunction_NewEx(&ri_bound_def, capsule, NULL);
    Py_DECREF(capsule);
    return go;
}

static PyObject *ri_record_size(PyObject *module, PyObject *unused) {
    (void)module;
    (void)unused;
    return PyLong_FromLong(ri_cuda_launch_record_size());
}

static PyMethodDef ri_methods[] = {
    {"bind", ri_bind, METH_VARARGS, "bind(record_address, kernarg_bytes, pointers, fail, keep) -> go"},
    {"record_size", ri_record_size, METH_NOARGS, "The launch record's size this module was built with."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef ri_module = {PyModuleDef_HEAD_INIT, "_ri_cuda_launch",
                                       "rawindexer's CUDA launcher (see cuda_launch.c)", -1, ri_methods,
                                       NULL, NULL, NULL, NULL};

/* The module, with the bounds bind() takes (MAX_KERNARG_BYTES, MAX_POINTERS), so Python asks them of the build. */
PyMODINIT_FUNC PyInit__ri_cuda_launch(void) {
    PyObject *module = PyModule_Create(&ri_module);
    if (module && (PyModule_AddIntConstant(module, "MAX_KERNARG_BYTES", RI_MAX_KERNARG_BYTES) < 0 ||
                   PyModule_AddIntConstant(module, "MAX_POINTERS", RI_MAX_POINTERS) < 0)) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
