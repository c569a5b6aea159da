/*
 * A TEST DOUBLE of the CUDA driver API (libcuda.so.1), not a driver.
 *
 * It exports the cu* entry points fabricbench's CUDA memory provider opens
 * (src/transport/memory/cuda/driver.rs), each under the name libcuda
 * exports it, with cuda.h's signatures, backed by ordinary host memory
 * (malloc): "device" addresses are host addresses. It has GPUS GPUs
 * (-DGPUS=N, 2 unless set), keeps a table of live allocations and refuses
 * copies outside them, calls before cuInit, unknown devices and double
 * frees with the CUresult the real driver gives. Each GPU has 80 GiB of
 * "memory" (cuDeviceTotalMem: a number only). dma-buf export fails (the
 * device attribute says unsupported) unless built with -DDMA_BUF: then the
 * attribute says supported and the export hands back a memfd standing in
 * for a dma-buf (no NIC can register it; it proves only that the call was
 * made with a live range and its descriptor handed over).
 *
 * What it proves: that the provider resolves every entry point by its real
 * name, passes arguments in cuda.h's order and types, checks every
 * CUresult and turns it into an error naming the call and the GPU, and
 * moves bytes to and from "device" memory correctly.
 * What it cannot prove: anything about a real GPU or driver: that memory is
 * on the device, that copies cross PCIe, contexts and streams, alignment,
 * that a NIC can register the memory (GPUDirect RDMA, nvidia_peermem),
 * dma-buf export, or driver-version differences. Those need a host with an
 * NVIDIA GPU.
 *
 * Built by tests/it/gpu_memory.rs: cc -shared -fPIC [-DGPUS=N] [-DOMIT_MEMSET]
 * [-DDMA_BUF].
 */
#define _GNU_SOURCE /* memfd_create */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#ifndef GPUS
#define GPUS 2
#endif

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef unsigned long long CUdeviceptr;

enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_NOT_INITIALIZED = 3,
    CUDA_ERROR_NO_DEVICE = 100,
    CUDA_ERROR_INVALID_DEVICE = 101,
    CUDA_ERROR_INVALID_CONTEXT = 201,
    CUDA_ERROR_NOT_SUPPORTED = 801,
};

#define MAX_ALLOCATIONS 256

static int initialised;
/* Guards the table: tests run in threads of one process under cargo test. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    char *start;
    size_t len;
} live[MAX_ALLOCATIONS];
static int contexts[GPUS > 0 ? GPUS : 1];

CUresult cuInit(unsigned int flags)
{
    if (flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    initialised = 1;
    return GPUS > 0 ? CUDA_SUCCESS : CUDA_ERROR_NO_DEVICE;
}

CUresult cuDeviceGetCount(int *count)
{
    if (!initialised)
        return CUDA_ERROR_NOT_INITIALIZED;
    *count = GPUS;
    return CUDA_SUCCESS;
}

static CUresult valid_device(CUdevice dev)
{
    if (!initialised)
        return CUDA_ERROR_NOT_INITIALIZED;
    return dev >= 0 && dev < GPUS ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
    CUresult r = valid_device(ordinal);
    if (r == CUDA_SUCCESS)
        *device = ordinal;
    return r;
}

CUresult cuDeviceGetAttribute(int *value, int attribute, CUdevice dev)
{
    CUresult r = valid_device(dev);
    if (r != CUDA_SUCCESS)
        return r;
    /* PCI bus id 33: GPU n at bus 0x1b + n; dma-buf (124) as built; everything else 0. */
#ifdef DMA_BUF
    int dma_buf = 1;
#else
    int dma_buf = 0;
#endif
    *value = attribute == 33 ? 0x1b + dev : attribute == 124 ? dma_buf : 0;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetPCIBusId(char *bus, int len, CUdevice dev)
{
    CUresult r = valid_device(dev);
    if (r == CUDA_SUCCESS)
        snprintf(bus, (size_t)len, "0000:%02X:00.0", 0x1b + dev);
    return r;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
    CUresult r = valid_device(dev);
    if (r == CUDA_SUCCESS)
        snprintf(name, (size_t)len, "CUDA test double");
    return r;
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    CUresult r = valid_device(dev);
    if (r == CUDA_SUCCESS)
        *bytes = (size_t)80 << 30;
    return r;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev)
{
    CUresult r = valid_device(dev);
    if (r != CUDA_SUCCESS)
        return r;
    contexts[dev]++;
    *ctx = &contexts[dev];
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    CUresult r = valid_device(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (contexts[dev] == 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    contexts[dev]--;
    return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext ctx)
{
    for (int i = 0; i < GPUS; i++)
        if (ctx == &contexts[i])
            return contexts[i] > 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
    return CUDA_ERROR_INVALID_CONTEXT;
}

static CUresult allocate_locked(void **out, size_t len)
{
    if (!initialised)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (len == 0)
        return CUDA_ERROR_INVALID_VALUE;
    for (int i = 0; i < MAX_ALLOCATIONS; i++) {
        if (live[i].start == NULL) {
            char *p = malloc(len);
            if (p == NULL)
                return CUDA_ERROR_OUT_OF_MEMORY;
            live[i].start = p;
            live[i].len = len;
            *out = p;
            return CUDA_SUCCESS;
        }
    }
    return CUDA_ERROR_OUT_OF_MEMORY;
}

/* The live allocation holding [p, p + len), or -1. */
static int holding(const char *p, size_t len)
{
    for (int i = 0; i < MAX_ALLOCATIONS; i++)
        if (live[i].start != NULL && p >= live[i].start && len <= live[i].len &&
            (size_t)(p - live[i].start) <= live[i].len - len)
            return i;
    return -1;
}

static CUresult allocate(void **out, size_t len)
{
    pthread_mutex_lock(&lock);
    CUresult r = allocate_locked(out, len);
    pthread_mutex_unlock(&lock);
    return r;
}

static CUresult release(char *p)
{
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    int i = holding(p, 0);
    if (i >= 0 && live[i].start == p) {
        free(p);
        live[i].start = NULL;
        r = CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&lock);
    return r;
}

/* Copies len bytes from src to dst once `inside` lies in a live allocation
   (memset when src is NULL, with value). */
static CUresult move_bytes(const char *inside, char *dst, const char *src, unsigned char value, size_t len)
{
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    if (holding(inside, len) >= 0) {
        if (src != NULL)
            memcpy(dst, src, len);
        else
            memset(dst, value, len);
        r = CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&lock);
    return r;
}

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t len)
{
    void *p = NULL;
    CUresult r = allocate(&p, len);
    *dptr = (CUdeviceptr)(uintptr_t)p;
    return r;
}

CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t len, unsigned int flags)
{
    (void)flags;
    return cuMemAlloc_v2(dptr, len);
}

CUresult cuMemHostAlloc(void **p, size_t len, unsigned int flags)
{
    (void)flags;
    return allocate(p, len);
}

CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    return release((char *)(uintptr_t)dptr);
}

CUresult cuMemFreeHost(void *p)
{
    return release(p);
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t len)
{
    char *d = (char *)(uintptr_t)dst;
    return move_bytes(d, d, src, 0, len);
}

CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t len)
{
    const char *s = (const char *)(uintptr_t)src;
    return move_bytes(s, dst, s, 0, len);
}

#ifndef OMIT_MEMSET /* -DOMIT_MEMSET: a driver without one entry point */
CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char value, size_t len)
{
    char *d = (char *)(uintptr_t)dst;
    return move_bytes(d, d, NULL, value, len);
}
#endif

CUresult cuMemGetHandleForAddressRange(void *handle, CUdeviceptr dptr, size_t len, int type,
                                       unsigned long long flags)
{
#ifdef DMA_BUF
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    int live_range = holding((const char *)(uintptr_t)dptr, len) >= 0;
    pthread_mutex_unlock(&lock);
    if (type != 1 /* CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD */ || flags != 0 || !live_range)
        return r;
    int fd = memfd_create("libcuda-double-dma-buf", MFD_CLOEXEC);
    if (fd < 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *(int *)handle = fd;
    return CUDA_SUCCESS;
#else
    (void)handle, (void)dptr, (void)len, (void)type, (void)flags;
    return CUDA_ERROR_NOT_SUPPORTED;
#endif
}

CUresult cuGetErrorString(CUresult error, const char **text)
{
    switch (error) {
    case CUDA_SUCCESS: *text = "no error"; break;
    case CUDA_ERROR_INVALID_VALUE: *text = "invalid argument"; break;
    case CUDA_ERROR_OUT_OF_MEMORY: *text = "out of memory"; break;
    case CUDA_ERROR_NOT_INITIALIZED: *text = "initialization error"; break;
    case CUDA_ERROR_NO_DEVICE: *text = "no CUDA-capable device is detected"; break;
    case CUDA_ERROR_INVALID_DEVICE: *text = "invalid device ordinal"; break;
    case CUDA_ERROR_INVALID_CONTEXT: *text = "invalid device context"; break;
    case CUDA_ERROR_NOT_SUPPORTED: *text = "operation not supported"; break;
    default: *text = NULL; return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}
