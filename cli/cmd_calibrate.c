/* cmd_calibrate.c — `[mpirun -np N] ultraplan calibrate --backend cpu|cuda
 * -o profile.json`: parse the command line, then hand over to the executor
 * module (module.h), which starts MPI and runs calib/'s benchmarks
 * (bench_cpu.h; bench_cuda.h in the CUDA module) into a hardware profile the
 * cost model reads. The binary links neither MPI, BLAS nor CUDA. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "command.h"
#include "fileio.h"
#include "modload.h"
#include "module.h"

static int calibrate_main(int argc, char **argv)
{
    static const struct option opts[] = {{"help", no_argument, 0, 'h'}, {"backend", required_argument, 0, 'b'},
                                         {"output", required_argument, 0, 'o'}, {0, 0, 0, 0}};
    const char *out = NULL, *backend = "cpu";
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "ho:", opts, NULL)) != -1) {
        if (c == 'h') {
            printf("usage: [mpirun -np N] ultraplan calibrate [--backend cpu|cuda] -o profile.json\n\n"
                   "Measures GEMM and attention throughput, memory bandwidth and (with N >= 2 ranks)\n"
                   "MPI latency and bandwidth and MPI_Alltoall by size (a2a_lat, a2a_eff: the MoE\n"
                   "dispatch and combine), and writes a hardware profile for plan/predict --profile.\n"
                   "  --backend cpu|cuda   what to measure (default cpu)\n"
                   "  -o FILE              the profile to write (required; checked before measuring)\n"
                   "--backend cuda: cuBLASLt GEMM sweep, HBM copy, attention kernel over the h200\n"
                   "profile's datasheet figures; with 2+ GPUs, NCCL all-reduce, all-gather,\n"
                   "reduce-scatter, all-to-all and send/recv bandwidth by size (one process over the\n"
                   "GPUs it sees, or under mpirun one GPU per rank: link bw/lat, coll_lat, coll_eff,\n"
                   "a2a_lat, a2a_eff).\n");
            return 0;
        } else if (c == 'b') {
            backend = optarg;
        } else if (c == 'o') {
            out = optarg;
        } else {
            command_bad_option("calibrate", argv);
            return 2;
        }
    }
    int cuda = strcmp(backend, "cuda") == 0;
    if (!cuda && strcmp(backend, "cpu") != 0) {
        fprintf(stderr, "ultraplan calibrate: backend \"%s\" is unknown: give cpu or cuda\n", backend);
        return 2;
    }
    if (!out) {
        fprintf(stderr, "ultraplan calibrate: give -o FILE for the profile\n");
        return 2;
    }
    if (cuda && !ULTRAPLAN_HAVE_CUDA) {
        fprintf(stderr, "ultraplan calibrate: this build has no CUDA backend (nvcc was not found at configure "
                        "time)\n");
        return 1;
    }
    char err[1400];
    if (util_check_writable(out, err, sizeof err) != 0) {
        fprintf(stderr, "ultraplan calibrate: -o: %s\n", err);
        return 1;
    }
    const UpExecModule *m = modload_exec(err, sizeof err);
    if (!m) {
        fprintf(stderr, "ultraplan calibrate: %s\n", err);
        return 1;
    }
    CalibRequest rq = {cuda, out};
    return m->calibrate(&rq);
}

const Command cmd_calibrate = {"calibrate", "measure this machine into a hardware profile", calibrate_main};
