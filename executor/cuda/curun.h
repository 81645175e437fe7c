/* curun.h — the CUDA entry of the run loop's backend table (loop.h):
 * `[mpirun -np N] ultraplan run --backend cuda`, a training run on one GPU
 * per rank (cuexec.h), or the stage proxy of a larger plan on one GPU
 * (--proxy-stage S: backend "cuda-proxy", no optimizer, no checkpoints).
 *
 * What the loop gets from it: the bf16 peak; tokens per step the global
 * batch's (proxy: this GPU's micro-batches); MFU's FLOPs per token the
 * model's (proxy: the rank's share, proxy_flops_per_token: its stage's
 * layers at one tp rank's shapes, not the whole model's over one GPU's
 * tokens). Each rank's memory row adds to the slabs by category the device
 * peak (total − least free from cudaMemGetInfo: context, cuBLASLt workspace
 * and NCCL buffers included), the device's total and, where NVML loads, the
 * GPU's busy percentage sampled after every step but the first (warm-up)
 * and averaged. The proxy adds a "proxy" object to run.json: predicted vs
 * measured seconds per micro-batch (the measured from the summary's medians).
 *
 * Checkpoints are the CPU's files (cuexec_save, cuckpt.c).
 */
#ifndef ULTRAPLAN_EXECUTOR_CUDA_CURUN_H
#define ULTRAPLAN_EXECUTOR_CUDA_CURUN_H

#include "loop.h"

/* 1 when this build can run several GPUs (NCCL). */
int curun_multi_gpu(void);

extern const ExecBackend curun_backend;

#endif
