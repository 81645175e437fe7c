/* cunvml.h — GPU utilisation, SM clock and power from NVML, loaded at run time: dlopen of
 * libnvidia-ml.so.1 and the handful of stable C entry points declared here,
 * so the build needs neither NVML's header nor its library. Where the
 * library, the driver or the device is missing it is simply unavailable
 * (NULL), never an error.
 *
 * The device is found by its PCI bus id (cudaDeviceGetPCIBusId), so NVML's
 * numbering and CUDA_VISIBLE_DEVICES' can differ. */
#ifndef ULTRAPLAN_EXECUTOR_CUDA_CUNVML_H
#define ULTRAPLAN_EXECUTOR_CUDA_CUNVML_H

typedef struct CuNvml CuNvml;

/* NVML for CUDA device `device`, or NULL when unavailable. */
CuNvml *cunvml_open(int device);
/* Percent of NVML's last sample period (1/6 s to 1 s) in which a kernel ran
 * on the device, or -1 when the query failed. */
int cunvml_util(CuNvml *n);
/* The SM clock now, MHz, or -1 when the query failed or this NVML lacks it. */
int cunvml_clock_sm(CuNvml *n);
/* Board power, watts (NVML's average over about a second), or -1 likewise. */
double cunvml_power_w(CuNvml *n);
void cunvml_close(CuNvml *n);

#endif
