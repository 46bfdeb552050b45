/* A stand-in for the ROCm HIP runtime (libamdhip64.so) that runs kernels on the project's gfx950 emulator.
 *
 * hip-python binds every HIP function lazily: it dlopens "libamdhip64.so" at the first call and looks up
 * each symbol at first use. This library carries that SONAME and exports the entry points rawindexer's hip
 * backend and the DLPack stream handshake use, so the real hip-python runs on it with no ROCm installed.
 *
 * What it models, and how:
 *   - Devices: `standin_configure` sets how many (0 = none: hipGetDeviceCount says hipErrorNoDevice, as
 *     the runtime does), the gfx target code objects must be built for (EF_AMDGPU_MACH), the compute units
 *     and a device-memory limit.
 *   - Memory: device memory is host memory (256-byte aligned, each block followed by a red zone that is
 *     never registered with the emulator, so an overrun faults). Copies check that the device side of
 *     the copy lies inside one live allocation.
 *   - Modules: hipModuleLoadData parses the ELF itself: AMDGPU machine and the gfx target from e_flags
 *     (another target -> hipErrorNoBinaryForGpu, not an AMDGPU ELF -> hipErrorInvalidImage);
 *     hipModuleGetFunction finds `<name>.kd` and reads the kernarg and LDS sizes from the descriptor.
 *   - Streams: in-order queues EXECUTED AT SYNCHRONISATION. Launches, async copies, event records and
 *     event waits are queued; they run when the host synchronises (hipStreamSynchronize,
 *     hipEventSynchronize, hipDeviceSynchronize) or calls something synchronous (hipMemcpy, hipMemset,
 *     hipFree). A command first runs whatever it depends on: the earlier commands of its stream, the
 *     event it waits for, and, for the legacy null stream, the work queued before it on every blocking
 *     stream (and the other way round). A missing dependency therefore shows up as wrong results or a
 *     still-pending queue, which is what the ordering tests look for.
 *   - Launches: hipModuleLaunchKernel validates as the runtime does (handles, block and grid limits, LDS,
 *     the `extra` layout {BUFFER_POINTER=1, buf, BUFFER_SIZE=2, &size, END=3}, the kernarg size against
 *     the kernel descriptor), copies the kernarg buffer during the call, and queues the launch. Executing
 *     it calls the runner registered from Python (standin_set_runner), which runs the emulator with
 *     memcheck over the live allocations. A failing runner makes the synchronising call return its
 *     error (hipErrorIllegalAddress for a memory fault), as an asynchronous kernel error would.
 * Not modelled: kernelParams launches (hipErrorNotSupported), multiple contexts, graphs, pinned host
 * memory, timing. Single-threaded use only. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

typedef int hipError_t;
enum {
    hipSuccess = 0, hipErrorInvalidValue = 1, hipErrorOutOfMemory = 2, hipErrorNotInitialized = 3,
    hipErrorInvalidConfiguration = 9, hipErrorInvalidMemcpyDirection = 21, hipErrorNoDevice = 100,
    hipErrorInvalidDevice = 101, hipErrorInvalidImage = 200, hipErrorNoBinaryForGpu = 209,
    hipErrorInvalidHandle = 400, hipErrorNotFound = 500, hipErrorNotReady = 600,
    hipErrorIllegalAddress = 700, hipErrorLaunchFailure = 719, hipErrorNotSupported = 801,
    hipErrorUnknown = 999,
};

static const struct { hipError_t code; const char *name, *text; } ERRORS[] = {
    {hipSuccess, "hipSuccess", "no error"},
    {hipErrorInvalidValue, "hipErrorInvalidValue", "invalid argument"},
    {hipErrorOutOfMemory, "hipErrorOutOfMemory", "out of memory"},
    {hipErrorNotInitialized, "hipErrorNotInitialized", "initialization error"},
    {hipErrorInvalidConfiguration, "hipErrorInvalidConfiguration", "invalid configuration argument"},
    {hipErrorInvalidMemcpyDirection, "hipErrorInvalidMemcpyDirection", "invalid copy direction for memcpy"},
    {hipErrorNoDevice, "hipErrorNoDevice", "no ROCm-capable device is detected"},
    {hipErrorInvalidDevice, "hipErrorInvalidDevice", "invalid device ordinal"},
    {hipErrorInvalidImage, "hipErrorInvalidImage", "device kernel image is invalid"},
    {hipErrorNoBinaryForGpu, "hipErrorNoBinaryForGpu", "no kernel image is available for execution on the device"},
    {hipErrorInvalidHandle, "hipErrorInvalidHandle", "invalid resource handle"},
    {hipErrorNotFound, "hipErrorNotFound", "named symbol not found"},
    {hipErrorNotReady, "hipErrorNotReady", "device not ready"},
    {hipErrorIllegalAddress, "hipErrorIllegalAddress", "an illegal memory access was encountered"},
    {hipErrorLaunchFailure, "hipErrorLaunchFailure", "unspecified launch failure"},
    {hipErrorNotSupported, "hipErrorNotSupported", "operation not supported"},
    {hipErrorUnknown, "hipErrorUnknown", "unknown error"},
};

/* ---- configuration and sticky state ------------------------------------------------------------ */
#define EF_AMDGPU_MACH_GFX950 0x04f
static int g_device_count = 1;
static uint32_t g_mach = EF_AMDGPU_MACH_GFX950;
static int g_compute_units = 256;            /* MI355X */
static uint64_t g_memory_limit = 8ull << 30; /* host memory stands in for HBM: keep it modest */
static int g_current_device = 0;
static hipError_t g_last_error = hipSuccess;
static char g_fault[2048];
static uint64_t g_launches_run = 0;

#define LDS_BYTES (160 * 1024)               /* gfx950: 160 KiB of LDS per workgroup */
#define MAX_BLOCK 1024
#define RED_ZONE 256
#define ALIGN 256

static hipError_t fail(hipError_t e) {
    if (e != hipSuccess) g_last_error = e;
    return e;
}

#define REQUIRE_DEVICE() do { if (g_device_count < 1) return fail(hipErrorNoDevice); } while (0)

/* ---- the Python runner -------------------------------------------------------------------------- */
struct standin_allocation { uint64_t ptr, size; };

/* Everything one launch needs; mirrored by a ctypes Structure in runtime.py. */
struct standin_launch {
    const uint8_t *image;
    uint64_t image_size;
    const char *kernel;
    uint32_t grid[3], block[3];
    uint32_t shared_mem;
    uint32_t kernarg_size;
    const uint8_t *kernargs;
    const struct standin_allocation *allocations;
    uint64_t n_allocations;
    uint64_t stream;
    char *message;             /* the runner writes its error text here */
    uint64_t message_size;
};

/* Returns hipSuccess or the hipError_t of the failure. */
typedef int (*standin_runner)(const struct standin_launch *launch);
static standin_runner g_runner = NULL;

/* ---- allocations -------------------------------------------------------------------------------- */
static struct standin_allocation *g_allocs = NULL;
static size_t g_n_allocs = 0, g_cap_allocs = 0;
static uint64_t g_allocated = 0;

static struct standin_allocation *find_allocation(uint64_t ptr, uint64_t nbytes) {
    for (size_t i = 0; i < g_n_allocs; i++) {
        struct standin_allocation *a = &g_allocs[i];
        if (ptr >= a->ptr && ptr - a->ptr <= a->size && nbytes <= a->size - (ptr - a->ptr)) return a;
    }
    return NULL;
}

/* ---- ELF code objects --------------------------------------------------------------------------- */
#define EM_AMDGPU 224
#define SHT_SYMTAB 2
#define SHT_NOBITS 8
#define SHT_DYNSYM 11

typedef struct { uint8_t ident[16]; uint16_t type, machine; uint32_t version; uint64_t entry, phoff, shoff;
                 uint32_t flags; uint16_t ehsize, phentsize, phnum, shentsize, shnum, shstrndx; } Elf64Ehdr;
typedef struct { uint32_t name, type; uint64_t flags, addr, offset, size; uint32_t link, info;
                 uint64_t addralign, entsize; } Elf64Shdr;
typedef struct { uint32_t name; uint8_t info, other; uint16_t shndx; uint64_t value, size; } Elf64Sym;

struct function;
struct module {
    uint32_t magic;
    uint8_t *image;
    size_t size;
    struct function *functions;
    struct module *next;
};
struct function {
    uint32_t magic;
    struct module *module;
    char *name;
    uint32_t kernarg_size, group_segment_size;
    struct function *next;
};
#define MODULE_MAGIC 0x4d4f444cu
#define FUNCTION_MAGIC 0x46554e43u
static struct module *g_modules = NULL;

static int module_live(const struct module *m) {
    for (struct module *p = g_modules; p; p = p->next) if (p == m && p->magic == MODULE_MAGIC) return 1;
    return 0;
}

static int function_live(const struct function *f) {
    for (struct module *m = g_modules; m; m = m->next)
        for (struct function *p = m->functions; p; p = p->next) if (p == f) return 1;
    return 0;
}

static const Elf64Shdr *section(const uint8_t *image, const Elf64Ehdr *eh, unsigned i) {
    return (const Elf64Shdr *)(image + eh->shoff + (uint64_t)i * eh->shentsize);
}

/* The image's size, from the ELF headers (hipModuleLoadData gets a bare pointer, like the runtime). */
static size_t elf_size(const uint8_t *image, const Elf64Ehdr *eh) {
    size_t end = eh->shoff + (size_t)eh->shnum * eh->shentsize;
    if (eh->phoff + (size_t)eh->phnum * eh->phentsize > end) end = eh->phoff + (size_t)eh->phnum * eh->phentsize;
    for (unsigned i = 0; i < eh->shnum; i++) {
        const Elf64Shdr *s = section(image, eh, i);
        if (s->type != SHT_NOBITS && s->offset + s->size > end) end = s->offset + s->size;
    }
    return end;
}

/* File bytes of the kernel descriptor `<name>.kd`, or NULL. */
static const uint8_t *find_descriptor(const struct module *m, const char *name) {
    const Elf64Ehdr *eh = (const Elf64Ehdr *)m->image;
    size_t want = strlen(name) + 3;
    for (unsigned i = 0; i < eh->shnum; i++) {
        const Elf64Shdr *symtab = section(m->image, eh, i);
        if (symtab->type != SHT_SYMTAB && symtab->type != SHT_DYNSYM) continue;
        const Elf64Shdr *strtab = section(m->image, eh, symtab->link);
        const Elf64Sym *syms = (const Elf64Sym *)(m->image + symtab->offset);
        for (size_t k = 0; k < symtab->size / sizeof(Elf64Sym); k++) {
            const char *sym = (const char *)m->image + strtab->offset + syms[k].name;
            if (strlen(sym) != want || strncmp(sym, name, want - 3) != 0 || strcmp(sym + want - 3, ".kd") != 0)
                continue;
            for (unsigned j = 0; j < eh->shnum; j++) {  /* virtual address -> file offset */
                const Elf64Shdr *s = section(m->image, eh, j);
                if (s->type != SHT_NOBITS && syms[k].value >= s->addr && syms[k].value + 64 <= s->addr + s->size)
                    return m->image + s->offset + (syms[k].value - s->addr);
            }
        }
    }
    return NULL;
}

/* ---- streams, events and their queues ----------------------------------------------------------- */
enum { CMD_LAUNCH, CMD_COPY, CMD_MARK };
struct dep { uint64_t stream_id, seq; };
struct command {
    int kind;
    struct dep *deps;
    size_t n_deps;
    /* CMD_LAUNCH */
    struct function *function;
    uint32_t grid[3], block[3], shared_mem;
    uint8_t *kernargs;
    uint32_t kernarg_size;
    /* CMD_COPY */
    void *dst;
    const void *src;
    size_t nbytes;
};
struct stream {
    uint32_t magic;
    uint64_t id;
    int blocking;              /* takes part in legacy null-stream synchronisation */
    struct command *queue;
    size_t head, tail, cap;    /* queue[head..tail) are pending */
    uint64_t enqueued, completed;
    struct stream *next;
};
#define STREAM_MAGIC 0x5354524du
static struct stream g_null_stream = {STREAM_MAGIC, 0, 1, NULL, 0, 0, 0, 0, 0, NULL};
static struct stream *g_streams = &g_null_stream;  /* the null stream heads the list */
static uint64_t g_next_stream_id = 1;

struct event {
    uint32_t magic;
    int recorded;
    struct dep at;             /* (stream, seq) of its latest record */
    struct event *next;
};
#define EVENT_MAGIC 0x45564e54u
static struct event *g_events = NULL;

static struct stream *stream_of(void *handle) {
    if (handle == NULL) return &g_null_stream;
    for (struct stream *s = g_streams; s; s = s->next) if ((void *)s == handle && s->magic == STREAM_MAGIC) return s;
    return NULL;
}

static struct stream *stream_by_id(uint64_t id) {
    for (struct stream *s = g_streams; s; s = s->next) if (s->id == id) return s;
    return NULL;
}

static int event_live(const struct event *e) {
    for (struct event *p = g_events; p; p = p->next) if (p == e && p->magic == EVENT_MAGIC) return 1;
    return 0;
}

static int add_dep(struct command *c, uint64_t stream_id, uint64_t seq) {
    struct dep *d = realloc(c->deps, (c->n_deps + 1) * sizeof *d);
    if (!d) return 0;
    c->deps = d;
    c->deps[c->n_deps++] = (struct dep){stream_id, seq};
    return 1;
}

/* Queue `c` on `s`, adding the legacy default-stream dependencies. Returns its sequence number (0 = no memory). */
static uint64_t enqueue(struct stream *s, struct command c) {
    if (s == &g_null_stream) {
        for (struct stream *o = g_streams; o; o = o->next)
            if (o != s && o->blocking && o->enqueued > o->completed && !add_dep(&c, o->id, o->enqueued)) return 0;
    } else if (s->blocking && g_null_stream.enqueued > g_null_stream.completed) {
        if (!add_dep(&c, 0, g_null_stream.enqueued)) return 0;
    }
    if (s->tail == s->cap) {
        if (s->head > 0) {  /* slide the pending commands to the front */
            memmove(s->queue, s->queue + s->head, (s->tail - s->head) * sizeof *s->queue);
            s->tail -= s->head;
            s->head = 0;
        }
        if (s->tail == s->cap) {
            size_t cap = s->cap ? 2 * s->cap : 16;
            struct command *q = realloc(s->queue, cap * sizeof *q);
            if (!q) return 0;
            s->queue = q;
            s->cap = cap;
        }
    }
    s->queue[s->tail++] = c;
    return ++s->enqueued;
}

static hipError_t run_launch(struct stream *s, struct command *c) {
    struct function *f = c->function;
    struct standin_launch l = {
        f->module->image, f->module->size, f->name,
        {c->grid[0], c->grid[1], c->grid[2]}, {c->block[0], c->block[1], c->block[2]},
        c->shared_mem, c->kernarg_size, c->kernargs, g_allocs, g_n_allocs,
        (uint64_t)(uintptr_t)(s == &g_null_stream ? NULL : s), g_fault, sizeof g_fault,
    };
    g_fault[0] = 0;
    if (!g_runner) {
        snprintf(g_fault, sizeof g_fault, "hip stand-in: no kernel runner registered (standin_set_runner)");
        return hipErrorLaunchFailure;
    }
    g_launches_run++;
    return (hipError_t)g_runner(&l);
}

static void release(struct command *c) {
    free(c->deps);
    free(c->kernargs);
}

static hipError_t drain(struct stream *s, uint64_t upto);

static hipError_t execute(struct stream *s, struct command *c) {
    for (size_t i = 0; i < c->n_deps; i++) {
        struct stream *d = stream_by_id(c->deps[i].stream_id);
        if (d) {  /* a destroyed stream was drained when it was destroyed */
            hipError_t e = drain(d, c->deps[i].seq);
            if (e != hipSuccess) return e;
        }
    }
    switch (c->kind) {
    case CMD_LAUNCH: return run_launch(s, c);
    case CMD_COPY: memmove(c->dst, c->src, c->nbytes); return hipSuccess;
    default: return hipSuccess;  /* an event record or wait: only its dependencies matter */
    }
}

/* Run the commands of `s` up to sequence number `upto`. A failing command is consumed; its error returns. */
static hipError_t drain(struct stream *s, uint64_t upto) {
    while (s->completed < upto && s->head < s->tail) {
        struct command c = s->queue[s->head++];
        s->completed++;
        hipError_t e = execute(s, &c);
        release(&c);
        if (e != hipSuccess) return fail(e);
    }
    return hipSuccess;
}

static hipError_t drain_all(void) {
    hipError_t first = hipSuccess;
    for (struct stream *s = g_streams; s; s = s->next) {
        hipError_t e = drain(s, s->enqueued);
        if (first == hipSuccess) first = e;
    }
    return first;
}

/* ================================================================================================ */
/* The HIP API                                                                                        */
/* ================================================================================================ */
EXPORT const char *hipGetErrorName(hipError_t e) {
    for (size_t i = 0; i < sizeof ERRORS / sizeof *ERRORS; i++) if (ERRORS[i].code == e) return ERRORS[i].name;
    return "hipErrorUnknown";
}

EXPORT const char *hipGetErrorString(hipError_t e) {
    for (size_t i = 0; i < sizeof ERRORS / sizeof *ERRORS; i++) if (ERRORS[i].code == e) return ERRORS[i].text;
    return "unknown error";
}

EXPORT hipError_t hipGetLastError(void) {
    hipError_t e = g_last_error;
    g_last_error = hipSuccess;
    return e;
}

EXPORT hipError_t hipPeekAtLastError(void) { return g_last_error; }

EXPORT hipError_t hipInit(unsigned flags) {
    if (flags != 0) return fail(hipErrorInvalidValue);
    REQUIRE_DEVICE();
    return hipSuccess;
}

EXPORT hipError_t hipDriverGetVersion(int *v) {
    if (!v) return fail(hipErrorInvalidValue);
    *v = 70200000;
    return hipSuccess;
}

EXPORT hipError_t hipRuntimeGetVersion(int *v) { return hipDriverGetVersion(v); }

EXPORT hipError_t hipGetDeviceCount(int *count) {
    if (!count) return fail(hipErrorInvalidValue);
    *count = g_device_count;
    return g_device_count < 1 ? fail(hipErrorNoDevice) : hipSuccess;
}

EXPORT hipError_t hipSetDevice(int device) {
    REQUIRE_DEVICE();
    if (device < 0 || device >= g_device_count) return fail(hipErrorInvalidDevice);
    g_current_device = device;
    return hipSuccess;
}

EXPORT hipError_t hipGetDevice(int *device) {
    REQUIRE_DEVICE();
    if (!device) return fail(hipErrorInvalidValue);
    *device = g_current_device;
    return hipSuccess;
}

EXPORT hipError_t hipDeviceGetName(char *name, int len, int device) {
    REQUIRE_DEVICE();
    if (!name || len <= 0) return fail(hipErrorInvalidValue);
    if (device < 0 || device >= g_device_count) return fail(hipErrorInvalidDevice);
    snprintf(name, (size_t)len, "HIP stand-in (gfx target 0x%03x, kernels on the rawindexer emulator)", g_mach);
    return hipSuccess;
}

/* hipDeviceProp_tR0600 (ROCm 6+ headers; hip-python 7.2's hipGetDeviceProperties calls the R0600 entry point):
 * 1472 bytes; name at 0 (char[256]), multiProcessorCount at 388 (int), gcnArchName at 1160 (char[256]).
 * tests/runtime/test_hip_standin.py checks these offsets against hip-python's own struct. Only these fields are
 * modelled; every other byte is zero. */
#define DEVICE_PROP_SIZE 1472
#define DEVICE_PROP_MP_COUNT 388
#define DEVICE_PROP_GCN_ARCH_NAME 1160

static const char *gcn_arch_name(uint32_t mach) {
    switch (mach) {
    case 0x04f: return "gfx950:sramecc+:xnack-";
    case 0x04c: return "gfx942:sramecc+:xnack-";
    case 0x03f: return "gfx90a:sramecc+:xnack-";
    default: return "";
    }
}

EXPORT hipError_t hipGetDevicePropertiesR0600(void *prop, int device) {
    REQUIRE_DEVICE();
    if (!prop) return fail(hipErrorInvalidValue);
    if (device < 0 || device >= g_device_count) return fail(hipErrorInvalidDevice);
    char *p = (char *)prop;
    memset(p, 0, DEVICE_PROP_SIZE);
    snprintf(p, 256, "HIP stand-in (gfx target 0x%03x, kernels on the rawindexer emulator)", g_mach);
    memcpy(p + DEVICE_PROP_MP_COUNT, &g_compute_units, sizeof(int));
    snprintf(p + DEVICE_PROP_GCN_ARCH_NAME, 256, "%s", gcn_arch_name(g_mach));
    return hipSuccess;
}

/* hipDeviceAttribute_t values of ROCm 7.x, as hip-python 7.2 numbers them. */
EXPORT hipError_t hipDeviceGetAttribute(int *value, int attribute, int device) {
    REQUIRE_DEVICE();
    if (!value) return fail(hipErrorInvalidValue);
    if (device < 0 || device >= g_device_count) return fail(hipErrorInvalidDevice);
    switch (attribute) {
    case 26: case 27: case 28: case 56: *value = MAX_BLOCK; return hipSuccess;  /* MaxBlockDimX/Y/Z, MaxThreadsPerBlock */
    case 29: *value = 2147483647; return hipSuccess;                            /* MaxGridDimX */
    case 30: case 31: *value = 65536; return hipSuccess;                        /* MaxGridDimY/Z */
    case 63: *value = g_compute_units; return hipSuccess;                       /* MultiprocessorCount */
    case 74: *value = LDS_BYTES; return hipSuccess;                             /* MaxSharedMemoryPerBlock */
    case 87: *value = 64; return hipSuccess;                                    /* WarpSize */
    default: return fail(hipErrorInvalidValue);  /* not modelled: say so rather than invent a value */
    }
}

EXPORT hipError_t hipDeviceSynchronize(void) {
    REQUIRE_DEVICE();
    return drain_all();
}

EXPORT hipError_t hipMalloc(void **ptr, size_t size) {
    REQUIRE_DEVICE();
    if (!ptr) return fail(hipErrorInvalidValue);
    *ptr = NULL;
    if (size == 0) return hipSuccess;
    if (g_allocated > g_memory_limit || size > g_memory_limit - g_allocated) return fail(hipErrorOutOfMemory);
    void *p = NULL;
    if (posix_memalign(&p, ALIGN, size + RED_ZONE) != 0) return fail(hipErrorOutOfMemory);
    if (g_n_allocs == g_cap_allocs) {
        size_t cap = g_cap_allocs ? 2 * g_cap_allocs : 64;
        struct standin_allocation *a = realloc(g_allocs, cap * sizeof *a);
        if (!a) { free(p); return fail(hipErrorOutOfMemory); }
        g_allocs = a;
        g_cap_allocs = cap;
    }
    memset(p, 0xA5, size + RED_ZONE);  /* fresh device memory holds garbage, never zeros by luck */
    g_allocs[g_n_allocs++] = (struct standin_allocation){(uint64_t)(uintptr_t)p, size};
    g_allocated += size;
    *ptr = p;
    return hipSuccess;
}

EXPORT hipError_t hipFree(void *ptr) {
    REQUIRE_DEVICE();
    if (!ptr) return hipSuccess;
    hipError_t e = drain_all();  /* hipFree synchronises the device */
    for (size_t i = 0; i < g_n_allocs; i++) {
        if (g_allocs[i].ptr == (uint64_t)(uintptr_t)ptr) {
            g_allocated -= g_allocs[i].size;
            g_allocs[i] = g_allocs[--g_n_allocs];
            free(ptr);
            return e;
        }
    }
    return fail(hipErrorInvalidValue);
}

/* hipMemcpyKind: 0 HostToHost, 1 HostToDevice, 2 DeviceToHost, 3 DeviceToDevice, 4 Default. */
static hipError_t check_copy(void *dst, const void *src, size_t n, int kind) {
    if (n == 0) return hipSuccess;
    if (!dst || !src) return hipErrorInvalidValue;
    int dst_dev = find_allocation((uint64_t)(uintptr_t)dst, n) != NULL;
    int src_dev = find_allocation((uint64_t)(uintptr_t)src, n) != NULL;
    switch (kind) {
    case 0: return hipSuccess;
    case 1: return dst_dev ? hipSuccess : hipErrorInvalidValue;
    case 2: return src_dev ? hipSuccess : hipErrorInvalidValue;
    case 3: return dst_dev && src_dev ? hipSuccess : hipErrorInvalidValue;
    case 4: return hipSuccess;
    default: return hipErrorInvalidMemcpyDirection;
    }
}

EXPORT hipError_t hipMemcpy(void *dst, const void *src, size_t n, int kind) {
    REQUIRE_DEVICE();
    hipError_t e = check_copy(dst, src, n, kind);
    if (e != hipSuccess) return fail(e);
    e = drain_all();  /* synchronous, on the legacy null stream */
    if (e != hipSuccess) return e;
    if (n) memmove(dst, src, n);
    return hipSuccess;
}

EXPORT hipError_t hipMemcpyAsync(void *dst, const void *src, size_t n, int kind, void *stream) {
    REQUIRE_DEVICE();
    struct stream *s = stream_of(stream);
    if (!s) return fail(hipErrorInvalidHandle);
    hipError_t e = check_copy(dst, src, n, kind);
    if (e != hipSuccess) return fail(e);
    struct command c = {.kind = CMD_COPY, .dst = dst, .src = src, .nbytes = n};
    return enqueue(s, c) ? hipSuccess : fail(hipErrorOutOfMemory);
}

EXPORT hipError_t hipMemset(void *dst, int value, size_t n) {
    REQUIRE_DEVICE();
    if (n && !find_allocation((uint64_t)(uintptr_t)dst, n)) return fail(hipErrorInvalidValue);
    hipError_t e = drain_all();
    if (e != hipSuccess) return e;
    if (n) memset(dst, value, n);
    return hipSuccess;
}

EXPORT hipError_t hipStreamCreateWithFlags(void **stream, unsigned flags) {
    REQUIRE_DEVICE();
    if (!stream || flags > 1) return fail(hipErrorInvalidValue);
    struct stream *s = calloc(1, sizeof *s);
    if (!s) return fail(hipErrorOutOfMemory);
    s->magic = STREAM_MAGIC;
    s->id = g_next_stream_id++;
    s->blocking = !(flags & 1);  /* hipStreamNonBlocking = 1 */
    s->next = g_null_stream.next;
    g_null_stream.next = s;
    *stream = s;
    return hipSuccess;
}

EXPORT hipError_t hipStreamCreate(void **stream) { return hipStreamCreateWithFlags(stream, 0); }

EXPORT hipError_t hipStreamDestroy(void *stream) {
    REQUIRE_DEVICE();
    struct stream *s = stream_of(stream);
    if (!s || s == &g_null_stream) return fail(hipErrorInvalidHandle);
    hipError_t e = drain(s, s->enqueued);  /* queued work still completes */
    for (struct stream *p = &g_null_stream; p->next; p = p->next)
        if (p->next == s) { p->next = s->next; break; }
    while (s->head < s->tail) release(&s->queue[s->head++]);
    s->magic = 0;
    free(s->queue);
    free(s);
    return e;
}

EXPORT hipError_t hipStreamSynchronize(void *stream) {
    REQUIRE_DEVICE();
    struct stream *s = stream_of(stream);
    if (!s) return fail(hipErrorInvalidHandle);
    if (s == &g_null_stream) return drain_all();  /* the null stream waits for every stream */
    return drain(s, s->enqueued);
}

EXPORT hipError_t hipStreamQuery(void *stream) {
    REQUIRE_DEVICE();
    struct stream *s = stream_of(stream);
    if (!s) return fail(hipErrorInvalidHandle);
    return s->completed < s->enqueued ? hipErrorNotReady : hipSuccess;
}

EXPORT hipError_t hipEventCreateWithFlags(void **event, unsigned flags) {
    REQUIRE_DEVICE();
    if (!event) return fail(hipErrorInvalidValue);
    (void)flags;  /* no timing is modelled, so every flag behaves like hipEventDisableTiming */
    struct event *e = calloc(1, sizeof *e);
    if (!e) return fail(hipErrorOutOfMemory);
    e->magic = EVENT_MAGIC;
    e->next = g_events;
    g_events = e;
    *event = e;
    return hipSuccess;
}

EXPORT hipError_t hipEventCreate(void **event) { return hipEventCreateWithFlags(event, 0); }

EXPORT hipError_t hipEventDestroy(void *event) {
    REQUIRE_DEVICE();
    struct event *e = event;
    if (!e || !event_live(e)) return fail(hipErrorInvalidHandle);
    for (struct event **p = &g_events; *p; p = &(*p)->next)
        if (*p == e) { *p = e->next; break; }
    e->magic = 0;
    free(e);  /* waits already queued on it captured what they wait for */
    return hipSuccess;
}

EXPORT hipError_t hipEventRecord(void *event, void *stream) {
    REQUIRE_DEVICE();
    struct event *e = event;
    struct stream *s = stream_of(stream);
    if (!e || !event_live(e) || !s) return fail(hipErrorInvalidHandle);
    struct command c = {.kind = CMD_MARK};
    uint64_t seq = enqueue(s, c);
    if (!seq) return fail(hipErrorOutOfMemory);
    e->recorded = 1;
    e->at = (struct dep){s->id, seq};
    return hipSuccess;
}

EXPORT hipError_t hipStreamWaitEvent(void *stream, void *event, unsigned flags) {
    REQUIRE_DEVICE();
    struct event *e = event;
    struct stream *s = stream_of(stream);
    if (!e || !event_live(e) || !s) return fail(hipErrorInvalidHandle);
    if (flags != 0) return fail(hipErrorInvalidValue);
    if (!e->recorded) return hipSuccess;  /* never recorded: nothing to wait for */
    struct command c = {.kind = CMD_MARK};
    if (!add_dep(&c, e->at.stream_id, e->at.seq) || !enqueue(s, c)) return fail(hipErrorOutOfMemory);
    return hipSuccess;
}

static int event_done(const struct event *e) {
    if (!e->recorded) return 1;
    struct stream *s = stream_by_id(e->at.stream_id);
    return !s || s->completed >= e->at.seq;
}

EXPORT hipError_t hipEventSynchronize(void *event) {
    REQUIRE_DEVICE();
    struct event *e = event;
    if (!e || !event_live(e)) return fail(hipErrorInvalidHandle);
    if (event_done(e)) return hipSuccess;
    return drain(stream_by_id(e->at.stream_id), e->at.seq);
}

EXPORT hipError_t hipEventQuery(void *event) {
    REQUIRE_DEVICE();
    struct event *e = event;
    if (!e || !event_live(e)) return fail(hipErrorInvalidHandle);
    return event_done(e) ? hipSuccess : hipErrorNotReady;
}

EXPORT hipError_t hipModuleLoadData(void **module, const void *image) {
    REQUIRE_DEVICE();
    if (!module || !image) return fail(hipErrorInvalidValue);
    const uint8_t *p = image;
    const Elf64Ehdr *eh = image;
    if (memcmp(p, "\177ELF", 4) != 0 || p[4] != 2 /* ELFCLASS64 */ || eh->machine != EM_AMDGPU ||
        eh->shentsize != sizeof(Elf64Shdr) || eh->shstrndx >= eh->shnum)
        return fail(hipErrorInvalidImage);
    if ((eh->flags & 0xff) != g_mach) return fail(hipErrorNoBinaryForGpu);
    struct module *m = calloc(1, sizeof *m);
    if (!m) return fail(hipErrorOutOfMemory);
    m->size = elf_size(p, eh);
    m->image = malloc(m->size);
    if (!m->image) { free(m); return fail(hipErrorOutOfMemory); }
    memcpy(m->image, p, m->size);  /* the caller may free its image once this returns */
    m->magic = MODULE_MAGIC;
    m->next = g_modules;
    g_modules = m;
    *module = m;
    return hipSuccess;
}

EXPORT hipError_t hipModuleUnload(void *module) {
    REQUIRE_DEVICE();
    struct module *m = module;
    if (!m || !module_live(m)) return fail(hipErrorInvalidHandle);
    hipError_t e = drain_all();  /* queued launches of its kernels still run */
    for (struct module **q = &g_modules; *q; q = &(*q)->next)
        if (*q == m) { *q = m->next; break; }
    while (m->functions) {
        struct function *f = m->functions;
        m->functions = f->next;
        f->magic = 0;
        free(f->name);
        free(f);
    }
    m->magic = 0;
    free(m->image);
    free(m);
    return e;
}

EXPORT hipError_t hipModuleGetFunction(void **function, void *module, const char *name) {
    REQUIRE_DEVICE();
    struct module *m = module;
    if (!function || !name) return fail(hipErrorInvalidValue);
    if (!m || !module_live(m)) return fail(hipErrorInvalidHandle);
    for (struct function *f = m->functions; f; f = f->next)
        if (strcmp(f->name, name) == 0) { *function = f; return hipSuccess; }
    const uint8_t *kd = find_descriptor(m, name);
    if (!kd) return fail(hipErrorNotFound);
    struct function *f = calloc(1, sizeof *f);
    if (!f || !(f->name = strdup(name))) { free(f); return fail(hipErrorOutOfMemory); }
    f->magic = FUNCTION_MAGIC;
    f->module = m;
    memcpy(&f->group_segment_size, kd + 0, 4);
    memcpy(&f->kernarg_size, kd + 8, 4);
    f->next = m->functions;
    m->functions = f;
    *function = f;
    return hipSuccess;
}

#define HIP_LAUNCH_PARAM_BUFFER_POINTER ((void *)1)
#define HIP_LAUNCH_PARAM_BUFFER_SIZE ((void *)2)
#define HIP_LAUNCH_PARAM_END ((void *)3)

EXPORT hipError_t hipModuleLaunchKernel(void *function, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                        unsigned by, unsigned bz, unsigned shared_mem, void *stream,
                                        void **kernel_params, void **extra) {
    REQUIRE_DEVICE();
    struct function *f = function;
    if (!f || !function_live(f)) return fail(hipErrorInvalidHandle);
    struct stream *s = stream_of(stream);
    if (!s) return fail(hipErrorInvalidHandle);
    if (!gx || !gy || !gz || !bx || !by || !bz) return fail(hipErrorInvalidValue);
    if (bx > MAX_BLOCK || by > MAX_BLOCK || bz > MAX_BLOCK || (uint64_t)bx * by * bz > MAX_BLOCK)
        return fail(hipErrorInvalidConfiguration);
    if (gy > 65536 || gz > 65536) return fail(hipErrorInvalidConfiguration);
    /* HIP launches at most 2^32 - 1 work-items along each dimension. */
    if ((uint64_t)gx * bx > UINT32_MAX || (uint64_t)gy * by > UINT32_MAX || (uint64_t)gz * bz > UINT32_MAX)
        return fail(hipErrorInvalidValue);
    if ((uint64_t)shared_mem + f->group_segment_size > LDS_BYTES) return fail(hipErrorInvalidValue);
    if (kernel_params && extra) return fail(hipErrorInvalidValue);
    if (kernel_params) return fail(hipErrorNotSupported);  /* needs the metadata's per-argument layout */
    const uint8_t *args = NULL;
    size_t size = 0;
    if (extra) {
        if (extra[0] != HIP_LAUNCH_PARAM_BUFFER_POINTER || extra[2] != HIP_LAUNCH_PARAM_BUFFER_SIZE ||
            extra[4] != HIP_LAUNCH_PARAM_END || !extra[3])
            return fail(hipErrorInvalidValue);
        args = extra[1];
        size = *(const size_t *)extra[3];
        if (size && !args) return fail(hipErrorInvalidValue);
    }
    /* Stricter than the runtime, which pads a short buffer: the packer must match the descriptor. */
    if (size != f->kernarg_size) return fail(hipErrorInvalidValue);
    struct command c = {.kind = CMD_LAUNCH, .function = f, .grid = {gx, gy, gz}, .block = {bx, by, bz},
                        .shared_mem = shared_mem, .kernarg_size = (uint32_t)size};
    c.kernargs = malloc(size ? size : 1);  /* the runtime copies the arguments during the call */
    if (!c.kernargs) return fail(hipErrorOutOfMemory);
    if (size) memcpy(c.kernargs, args, size);
    if (!enqueue(s, c)) { free(c.kernargs); return fail(hipErrorOutOfMemory); }
    return hipSuccess;
}

/* ================================================================================================ */
/* Control interface for the Python glue (not part of HIP)                                           */
/* ================================================================================================ */
EXPORT void standin_set_runner(standin_runner runner) { g_runner = runner; }

/* device_count 0 = no device; mach = EF_AMDGPU_MACH of the device's gfx target; limit in bytes. */
EXPORT void standin_configure(int device_count, uint32_t mach, int compute_units, uint64_t memory_limit) {
    g_device_count = device_count;
    g_mach = mach;
    g_compute_units = compute_units;
    g_memory_limit = memory_limit;
    if (g_current_device >= device_count) g_current_device = 0;
}

EXPORT const char *standin_last_fault(void) { return g_fault; }
EXPORT uint64_t standin_launches_run(void) { return g_launches_run; }
EXPORT uint64_t standin_allocated_bytes(void) { return g_allocated; }
EXPORT uint64_t standin_live_allocations(void) { return g_n_allocs; }

/* Commands still queued on `stream` (NULL = the null stream), or -1 for an unknown handle. */
EXPORT int64_t standin_pending(void *stream) {
    struct stream *s = stream_of(stream);
    return s ? (int64_t)(s->enqueued - s->completed) : -1;
}
