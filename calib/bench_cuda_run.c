/* bench_cuda_run.c — `calibrate --backend cuda` as a whole (bench_cuda.h):
 * the device sweeps of bench_cuda.cu on rank 0's GPU, then the NCCL sweeps
 * through executor/cuda/cucomm.h (the one NCCL wrapper), then the profile.
 * The all-to-all is NCCL's own recipe, one group of ncclSend/ncclRecv to
 * and from every rank (itself included, as nccl-tests' alltoall_perf), and
 * a2a_lat/a2a_eff are fitted to its sizes (bench_fit.h). Timed with CUDA
 * events from the runtime's C API. */
#include "bench_cuda.h"

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench_cpu.h"
#include "bench_fit.h"
#include "cucomm.h"
#include "cunvml.h"
#include "dist.h"
#include "kernels_cuda.h"
#include "profile.h"

static const size_t NCCL_MAX = (size_t)1 << 30;   // bytes of the largest message

/* The GPUs one collective call runs on: one process over n devices (comms
 * and buffers per device), or one rank's device under mpirun (n = 1). */
typedef struct {
    int n;                       // devices this process drives
    CuComm **cc;                 // (n)
    void **sb, **rb;             // (n) send buffers NCCL_MAX, receive buffers NCCL_MAX·size
    int size;                    // ranks of the collective (all devices, or the world)
    cudaEvent_t e0, e1;          // on device 0 of this process
} Sweep;

/* What the sweep times: the CollKinds, then the all-to-all (which the cost
 * model prices with constants of its own, so CollKind does not name it). */
enum { OP_ALLTOALL = COLL_COUNT, OP_COUNT };

/* bytes: the whole buffer, as nccl-tests' size; COLL_P2P sends from rank 0
 * to rank 1; OP_ALLTOALL sends bytes/size to every rank and receives as
 * much from each, in one group */
static void nccl_once(Sweep *w, int kind, size_t bytes, CuType t)
{
    size_t es = t == CC_F32 ? 4 : 2, cnt = bytes / es, part = cnt / w->size;
    cucomm_group_start();
    for (int d = 0; d < w->n; d++) {
        CuComm *c = w->cc[d];
        cudaStream_t st = cucomm_stream(c);
        int me = cucomm_rank(c, CC_WORLD);
        switch (kind) {
        case COLL_ALLREDUCE: cucomm_allreduce_to(c, CC_WORLD, w->sb[d], w->rb[d], cnt, t, CC_SUM, st); break;
        case COLL_REDUCE_SCATTER: cucomm_reduce_scatter_to(c, CC_WORLD, w->sb[d], w->rb[d], part, t, st); break;
        case COLL_ALLGATHER: cucomm_allgather_from(c, CC_WORLD, w->sb[d], w->rb[d], part, t, st); break;
        case COLL_P2P:
            if (me == 0)
                cucomm_send_peer(c, CC_WORLD, 1, w->sb[d], cnt, t, st);
            if (me == 1)
                cucomm_recv_peer(c, CC_WORLD, 0, w->rb[d], cnt, t, st);
            break;
        default:   // OP_ALLTOALL
            for (int p = 0; p < w->size; p++) {
                cucomm_send_peer(c, CC_WORLD, p, (const char *)w->sb[d] + (size_t)p * part * es, part, t, st);
                cucomm_recv_peer(c, CC_WORLD, p, (char *)w->rb[d] + (size_t)p * part * es, part, t, st);
            }
        }
    }
    cucomm_group_end();
}

static void sync_all(Sweep *w)
{
    for (int d = 0; d < w->n; d++) {
        if (w->n > 1)
            CHECK_CUDA(cudaSetDevice(d));
        CHECK_CUDA(cudaStreamSynchronize(cucomm_stream(w->cc[d])));
    }
    if (w->n > 1)
        CHECK_CUDA(cudaSetDevice(0));
}

/* Seconds per call on this process: the median of 5 batches of reps calls
 * after 3 warm-ups. Collective under mpirun. */
static double nccl_time(Sweep *w, int kind, size_t bytes, int reps, CuType t)
{
    enum { BATCHES = 5 };
    for (int i = 0; i < 3; i++)
        nccl_once(w, kind, bytes, t);
    sync_all(w);
    double v[BATCHES];
    cudaStream_t st0 = cucomm_stream(w->cc[0]);
    for (int b = 0; b < BATCHES; b++) {
        CHECK_CUDA(cudaEventRecord(w->e0, st0));
        for (int i = 0; i < reps; i++)
            nccl_once(w, kind, bytes, t);
        sync_all(w);
        CHECK_CUDA(cudaEventRecord(w->e1, st0));
        CHECK_CUDA(cudaEventSynchronize(w->e1));
        float ms = 0;
        CHECK_CUDA(cudaEventElapsedTime(&ms, w->e0, w->e1));
        v[b] = ms * 1e-3 / reps;
    }
    for (int i = 0; i < BATCHES; i++)   // insertion sort of five
        for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
            double x = v[j];
            v[j] = v[j - 1], v[j - 1] = x;
        }
    return v[BATCHES / 2];
}

static void sweep_open(Sweep *w, int n, CuComm **cc, int size)
{
    w->n = n, w->cc = cc, w->size = size;
    w->sb = calloc((size_t)n, sizeof *w->sb);
    w->rb = calloc((size_t)n, sizeof *w->rb);
    if (!w->sb || !w->rb)
        kc_fail("calloc", "out of host memory", __FILE__, __LINE__);
    for (int d = 0; d < n; d++) {
        if (n > 1)
            CHECK_CUDA(cudaSetDevice(d));
        CHECK_CUDA(cudaMalloc(&w->sb[d], NCCL_MAX));
        CHECK_CUDA(cudaMalloc(&w->rb[d], n > 1 ? NCCL_MAX * (size_t)n : NCCL_MAX));
        CHECK_CUDA(cudaMemset(w->sb[d], 0x3c, NCCL_MAX));   // ~0.0115 in bf16 and fp32: finite sums
    }
    if (n > 1)
        CHECK_CUDA(cudaSetDevice(0));
    CHECK_CUDA(cudaEventCreate(&w->e0));
    CHECK_CUDA(cudaEventCreate(&w->e1));
    CHECK_CUDA(cudaDeviceSynchronize());
}

static void sweep_close(Sweep *w)
{
    sync_all(w);
    for (int d = 0; d < w->n; d++) {
        if (w->n > 1)
            cudaSetDevice(d);
        cudaFree(w->sb[d]);
        cudaFree(w->rb[d]);
    }
    if (w->n > 1)
        cudaSetDevice(0);
    cudaEventDestroy(w->e0);
    cudaEventDestroy(w->e1);
    free(w->sb);
    free(w->rb);
}

/* The sizes 64 KiB .. 1 GiB into rep (rank 0's figures on every rank when
 * under mpirun); the link into *link; the smallest all-reduce's time. */
static double nccl_sizes(Sweep *w, BenchCudaReport *rep, CuType t, int mpi, int rank, Link *link)
{
    double f = (double)(w->size - 1) / w->size, t_small = 0;
    rep->nccl_n = BENCH_NCCL_SIZES;
    for (int i = 0; i < BENCH_NCCL_SIZES; i++) {
        size_t bytes = ((size_t)1 << 16) << (2 * i);
        int reps = bytes >= ((size_t)1 << 28) ? 5 : 20;
        double s[OP_COUNT];
        for (int kind = 0; kind < OP_COUNT; kind++) {
            s[kind] = nccl_time(w, kind, bytes, reps, t);
            if (mpi)
                s[kind] = dist_bcast_double(s[kind]);
        }
        if (i == 0)
            t_small = s[0];
        rep->nccl_bytes[i] = (double)bytes;
        rep->allreduce_busbw[i] = 2 * f * bytes / s[0];
        rep->reducescatter_busbw[i] = f * bytes / s[1];
        rep->allgather_busbw[i] = f * bytes / s[2];
        rep->sendrecv_bw[i] = bytes / s[3];
        rep->alltoall_s[i] = s[OP_ALLTOALL];
        rep->alltoall_busbw[i] = f * bytes / s[OP_ALLTOALL];
        if (rank == 0)
            printf("nccl   %10zu B  all-reduce %6.1f  all-gather %6.1f  reduce-scatter %6.1f  send-recv %6.1f  "
                   "all-to-all %6.1f GB/s (bus bandwidth, %d %s)\n", bytes, rep->allreduce_busbw[i] / 1e9,
                   rep->allgather_busbw[i] / 1e9, rep->reducescatter_busbw[i] / 1e9, rep->sendrecv_bw[i] / 1e9,
                   rep->alltoall_busbw[i] / 1e9, w->size, mpi ? "ranks" : "GPUs");
    }
    link->bw = rep->allreduce_busbw[BENCH_NCCL_SIZES - 1];
    link->lat = t_small / (2.0 * (w->size - 1));   // α of a 2(n−1)-step ring at 64 KiB
    return t_small;
}

/* a2a_lat, a2a_eff from the sweep's all-to-alls over n ranks, k per node,
 * on hw's links as nccl_sizes left them; rank 0 prints the fit. */
static void nccl_fit_a2a(HwProfile *hw, const BenchCudaReport *rep, int n, int k, int rank)
{
    BenchA2aFit f;
    char err[256];
    if (bench_fit_a2a(hw, n, k, rep->nccl_bytes, rep->alltoall_s, rep->nccl_n, &f, err, sizeof err) != 0) {
        if (rank == 0)
            printf("nccl   %s: a2a_lat, a2a_eff kept\n", err);
        return;
    }
    hw->a2a_lat = f.lat;
    hw->a2a_eff = f.eff;
    if (rank == 0)
        printf("nccl   all-to-all fit: a2a_lat %.1f us, a2a_eff %.0f%% of the link, mean error %.1f%%%s\n",
               f.lat * 1e6, f.eff * 100, f.err * 100, f.capped ? " (at a bound)" : "");
}

/* One process, every visible GPU (bf16 messages). */
static void nccl_local(HwProfile *hw, BenchCudaReport *rep, int n)
{
    CuComm **cc = calloc((size_t)n, sizeof *cc);
    char err[256];
    if (!cc || cucomm_init_local(n, cc, err, sizeof err) != 0) {
        printf("nccl   skipped: %s\n", cc ? err : "out of host memory");
        free(cc);
        return;
    }
    Sweep w;
    sweep_open(&w, n, cc, n);
    nccl_sizes(&w, rep, CC_BF16, 0, 0, &hw->intra);
    hw->gpus_per_node = n;
    nccl_fit_a2a(hw, rep, n, n, 0);
    sweep_close(&w);
    for (int d = 0; d < n; d++) {
        cudaSetDevice(d);
        cucomm_free(cc[d]);
    }
    cudaSetDevice(0);
    free(cc);
}

/* bench_fit_colls' timer: NCCL, rank 0's figure on every rank */
static double nccl_coll(void *ctx, CollKind kind, int count, int reps)
{
    return dist_bcast_double(nccl_time(ctx, (int)kind, (size_t)count * 4, reps, CC_F32));
}

/* Under mpirun, one GPU per rank (fp32 messages): the link they run over
 * (intra within one node, inter across nodes), coll_lat and coll_eff. */
static void nccl_world(HwProfile *hw, BenchCudaReport *rep, int rank, int world)
{
    int local_n = 1, local = dist_local_rank(&local_n);
    int ndev = kc_device_count();
    CHECK_CUDA(cudaSetDevice(ndev > 0 ? local % ndev : 0));
    char err[256];
    CuComm *c = cucomm_init_world(err, sizeof err);
    Sweep w;
    sweep_open(&w, 1, &c, world);
    Link *link = local_n >= world ? &hw->intra : &hw->inter;
    nccl_sizes(&w, rep, CC_F32, 1, rank, link);
    hw->gpus_per_node = local_n;
    bench_fit_colls(hw, world, nccl_coll, &w);
    nccl_fit_a2a(hw, rep, world, local_n, rank);
    sweep_close(&w);
    cucomm_free(c);
}

/* BenchCudaOpts.probe: GPU 0's SM clock and power from NVML */
static void nvml_probe(void *ctx, int *sm_mhz, double *watts)
{
    *sm_mhz = cunvml_clock_sm(ctx);
    *watts = cunvml_power_w(ctx);
}

/* peak[fp8] from the fp8 GEMM sweep (bench_fit_fp8_peak), replacing the
 * datasheet's; kept, and said so, when nothing was measured */
static void fit_fp8(HwProfile *hw, const BenchCudaReport *rep)
{
    char err[256];
    double p = 0, e = 0;
    if (rep->fp8_n < 1) {
        printf("fp8    no fp8 GEMM measured: peak[fp8] %.1f TFLOP/s kept\n", hw->peak[PREC_FP8] / 1e12);
        return;
    }
    if (bench_fit_fp8_peak(hw, rep->fp8_flops, rep->fp8_rate, rep->fp8_n, &p, &e, err, sizeof err) != 0) {
        printf("fp8    %s: peak[fp8] kept\n", err);
        return;
    }
    printf("fp8    sustained peak fitted to %d GEMMs through the bf16 curve: %.1f TFLOP/s (was %.1f; best GEMM "
           "%.1f, %.2fx the best bf16), mean error %.1f%%\n",
           rep->fp8_n, p / 1e12, hw->peak[PREC_FP8] / 1e12, rep->fp8_best / 1e12,
           rep->gemm_best > 0 ? rep->fp8_best / rep->gemm_best : 0, 100 * (exp(e) - 1));
    hw->peak[PREC_FP8] = p;
}

int bench_cuda_calibrate(const char *out, int rank, int world)
{
    char err[512] = "";
    HwProfile hw;
    BenchCudaReport rep;
    memset(&rep, 0, sizeof rep);
    int rc = profile_load_builtin("h200", &hw, err, sizeof err) != 0;
    if (!rc && world > 1 && !cucomm_available()) {
        snprintf(err, sizeof err, "this build has no NCCL: run calibrate --backend cuda as one process");
        rc = 1;
    }
    if (!rc && rank == 0) {
        CuNvml *nv = cunvml_open(0);
        BenchCudaOpts opt = {stdout, nvml_probe, nv};
        rc = bench_cuda_measure(&hw, &rep, &opt, err, sizeof err) != 0;
        cunvml_close(nv);
        if (!rc)
            fit_fp8(&hw, &rep);
        if (!rc && world == 1 && rep.ngpus > 1 && cucomm_available())
            nccl_local(&hw, &rep, rep.ngpus);
    }
    rc = dist_bcast_int(rc);
    if (!rc && world > 1)
        nccl_world(&hw, &rep, rank, world);
    if (!rc && rank == 0)
        rc = profile_write_json(&hw, out, err, sizeof err) != 0;
    rc = dist_bcast_int(rc);
    if (rank == 0) {
        if (rc)
            fprintf(stderr, "ultraplan calibrate: %s\n", err[0] ? err : "failed on rank 0");
        else
            printf("calibrated %s: bf16 peak %.1f TFLOP/s, HBM %.0f GB/s%s -> %s\n", hw.name,
                   hw.peak[PREC_BF16] / 1e12, hw.hbm_bw / 1e9, world > 1 ? ", NCCL links and collectives" : "", out);
    }
    return rc;
}
