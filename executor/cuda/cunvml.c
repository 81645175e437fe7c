/* cunvml.c — see cunvml.h. */
#include "cunvml.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdlib.h>

/* NVML's ABI, as its documentation gives it: nvmlReturn_t is an int-sized
 * enum (0 = NVML_SUCCESS), nvmlDevice_t an opaque pointer. */
typedef int nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct {
    unsigned int gpu;      // percent of time a kernel was running
    unsigned int memory;   // percent of time device memory was read or written
} nvmlUtilization_t;

enum { NVML_CLOCK_SM = 1 };   // nvmlClockType_t: graphics 0, SM 1, memory 2, video 3

struct CuNvml {
    void *lib;
    nvmlDevice_t dev;
    nvmlReturn_t (*util)(nvmlDevice_t, nvmlUtilization_t *);
    nvmlReturn_t (*shutdown)(void);
    nvmlReturn_t (*clock)(nvmlDevice_t, int, unsigned int *);   // optional: nvmlDeviceGetClockInfo, MHz
    nvmlReturn_t (*power)(nvmlDevice_t, unsigned int *);        // optional: nvmlDeviceGetPowerUsage, mW
};

CuNvml *cunvml_open(int device)
{
    char bus[32];
    if (cudaDeviceGetPCIBusId(bus, sizeof bus, device) != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return NULL;
    nvmlReturn_t (*init)(void) = (nvmlReturn_t (*)(void))dlsym(lib, "nvmlInit_v2");
    nvmlReturn_t (*by_bus)(const char *, nvmlDevice_t *) =
        (nvmlReturn_t (*)(const char *, nvmlDevice_t *))dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2");
    CuNvml *n = calloc(1, sizeof *n);
    if (n) {
        n->lib = lib;
        n->util = (nvmlReturn_t (*)(nvmlDevice_t, nvmlUtilization_t *))dlsym(lib, "nvmlDeviceGetUtilizationRates");
        n->shutdown = (nvmlReturn_t (*)(void))dlsym(lib, "nvmlShutdown");
        n->clock = (nvmlReturn_t (*)(nvmlDevice_t, int, unsigned int *))dlsym(lib, "nvmlDeviceGetClockInfo");
        n->power = (nvmlReturn_t (*)(nvmlDevice_t, unsigned int *))dlsym(lib, "nvmlDeviceGetPowerUsage");
    }
    if (!n || !init || !by_bus || !n->util || !n->shutdown || init() != 0) {
        free(n);
        dlclose(lib);
        return NULL;
    }
    if (by_bus(bus, &n->dev) != 0) {
        n->shutdown();
        free(n);
        dlclose(lib);
        return NULL;
    }
    return n;
}

int cunvml_util(CuNvml *n)
{
    nvmlUtilization_t u;
    if (!n || n->util(n->dev, &u) != 0)
        return -1;
    return (int)u.gpu;
}

int cunvml_clock_sm(CuNvml *n)
{
    unsigned int mhz;
    if (!n || !n->clock || n->clock(n->dev, NVML_CLOCK_SM, &mhz) != 0)
        return -1;
    return (int)mhz;
}

double cunvml_power_w(CuNvml *n)
{
    unsigned int mw;
    if (!n || !n->power || n->power(n->dev, &mw) != 0)
        return -1;
    return mw / 1000.0;
}

void cunvml_close(CuNvml *n)
{
    if (!n)
        return;
    n->shutdown();
    dlclose(n->lib);
    free(n);
}
