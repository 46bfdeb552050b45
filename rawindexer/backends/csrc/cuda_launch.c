/* One foreign call per CUDA launch for rawindexer's prepared launches (rawindexer/backends/cuda.py).
 *
 * From Python, every ctypes call costs argument conversion (about 0.4 us per argument on a server host), so a
 * launch made of cuCtxGetCurrent + cuLaunchKernel (11 arguments) costs several microseconds before the driver
 * does anything. Here a prepared launch is one record built once: the driver entry points (handed over as
 * addresses, so nothing here links against libcuda and tests can hand over fakes), the device's primary context,
 * the function, the geometry, the `extra` array, then the stream and the kernel arguments that Python rewrites
 * before each call (one struct.pack_into of stream + seven pointers). ri_cuda_launch(record) makes the context
 * current only when it is not, launches, and puts the caller's context back: the same guarantees as the Python
 * route, in one call with one argument. No libc, no allocation, no global state: thread safety is the caller's
 * (it holds the record's lock from writing the arguments to the return).
 */
#include <stdint.h>

typedef int (*ri_ctx_get)(void **context);
typedef int (*ri_ctx_set)(void *context);
typedef int (*ri_launch_kernel)(void *function, unsigned grid_x, unsigned grid_y, unsigned grid_z,
                                unsigned block_x, unsigned block_y, unsigned block_z, unsigned shared_mem,
                                void *stream, void **params, void **extra);

/* Mirrors _RECORD in cuda.py: 8-byte fields, then the kernel arguments (their size is the caller's business:
 * `extra` points at them). */
struct ri_cuda_launch_record {
    ri_launch_kernel launch;   /*  0 */
    ri_ctx_get get_current;    /*  8 */
    ri_ctx_set set_current;    /* 16 */
    void *context;             /* 24: the device's primary context */
    void *function;            /* 32 */
    uint64_t grid_xy;          /* 40: x | y << 32 */
    uint64_t grid_z_block_x;   /* 48 */
    uint64_t block_yz;         /* 56 */
    uint64_t shared_mem;       /* 64 */
    void **extra;              /* 72 */
    void *stream;              /* 80: rewritten per call, directly followed by the kernel arguments */
};

/* Which call failed, in bits 16..: so Python can name it. */
enum { RI_GET_CURRENT = 1, RI_SET_CURRENT = 2, RI_LAUNCH = 3, RI_RESTORE = 4 };

int ri_cuda_launch(const struct ri_cuda_launch_record *r) {
    void *current = 0;
    int err = r->get_current(&current);
    if (err) return RI_GET_CURRENT << 16 | err;
    int switched = current != r->context;
    if (switched && (err = r->set_current(r->context)) != 0) return RI_SET_CURRENT << 16 | err;
    int launched = r->launch(r->function, (unsigned)r->grid_xy, (unsigned)(r->grid_xy >> 32),
                             (unsigned)r->grid_z_block_x, (unsigned)(r->grid_z_block_x >> 32),
                             (unsigned)r->block_yz, (unsigned)(r->block_yz >> 32), (unsigned)r->shared_mem,
                             r->stream, 0, r->extra);
    if (switched && (err = r->set_current(current)) != 0 && !launched) return RI_RESTORE << 16 | err;
    return launched ? RI_LAUNCH << 16 | launched : 0;
}

/* The record layout this library was built with, checked by Python before the first use. */
int ri_cuda_launch_record_size(void) { return (int)sizeof(struct ri_cuda_launch_record); }
