/* test_cuda_exec_mpi.c — one layout of the multi-GPU CUDA executor under
 * mpirun against the single-GPU CUDA run of the same tiny model, seed and
 * data (tests/mpi_cuda_layouts.sh drives it): 5 steps, every step's loss
 * within bf16 tolerance |multi − single| ≤ 0.03 + 0.01·|single|; and on
 * every rank the weight, gradient and optimizer bytes the executor
 * allocated equal the cost model's (memory_stage) exactly.
 *
 *   test_cuda_exec_mpi --gpus                     print the visible GPUs, exit
 *   test_cuda_exec_mpi --model M --data F --write REF           one GPU
 *   mpirun -np N test_cuda_exec_mpi --model M --data F --ref REF [--tp T]
 *       [--pp P] [--dp D] [--vp V] [--cp C] [--mbs B] [--zero1|--zero2|--zero3] [--full K] [--sp]
 *       [--ep E]
 *
 * Models: gpt, llama, and moe (the tiny Llama with 4 experts of 64, top 2,
 * a shared expert of 64 in every other layer; --ep E: expert parallel over
 * E of the dp ranks, the expert gradients over edp = dp/E, ZeRO-1 sharding
 * them over edp).
 * --sp: Megatron sequence parallel (with tp > 1); without it tp runs plain
 * TP (layout_default turns sp on, so the flag sets it either way). --cp:
 * context parallel (ring attention over C ranks, gradients over dp·cp).
 *
 * Exits 77 when this node has fewer GPUs than ranks on it. */
#include <getopt.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuexec.h"
#include "memory.h"

enum { STEPS = 5 };

/* llama: 0 GPT, 1 Llama, 2 Llama with MoE layers */
static void tiny(ModelSpec *m, int llama)
{
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "tiny-%s", llama == 2 ? "moe" : llama ? "llama" : "gpt");
    m->L = 4, m->h = 64, m->a = 2, m->s = 64, m->vocab = 256, m->vocab_div = 1;   // head size 32
    if (llama)
        m->g = 2, m->f = 128, m->mlp = MLP_SWIGLU, m->norm = NORM_RMSNORM, m->pos = POS_ROPE;
    else
        m->g = 2, m->f = 256, m->bias = true, m->tied = true;
    if (llama == 2)
        m->experts = 4, m->topk = 2, m->moe_ffn = 64, m->shared_ffn = 64, m->moe_freq = 2;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"gpus", no_argument, 0, 'g'}, {"model", required_argument, 0, 'm'}, {"data", required_argument, 0, 'd'},
        {"write", required_argument, 0, 'w'}, {"ref", required_argument, 0, 'r'}, {"tp", required_argument, 0, 't'},
        {"pp", required_argument, 0, 'p'}, {"dp", required_argument, 0, 'D'}, {"vp", required_argument, 0, 'v'},
        {"mbs", required_argument, 0, 'b'}, {"zero1", no_argument, 0, 'z'}, {"full", required_argument, 0, 'f'},
        {"sp", no_argument, 0, 's'}, {"zero2", no_argument, 0, '2'}, {"zero3", no_argument, 0, '3'},
        {"cp", required_argument, 0, 'c'}, {"ep", required_argument, 0, 'e'}, {0, 0, 0, 0}};
    const char *data = NULL, *write = NULL, *ref = NULL;
    int llama = 0, tp = 1, pp = 1, dp = 1, vp = 1, cp = 1, ep = 1, mbs = 2, zero = 0, full = 0, sp = 0, c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'g': printf("%d\n", kc_device_count()); return 0;
        case 'm': llama = !strcmp(optarg, "moe") ? 2 : !strcmp(optarg, "llama"); break;
        case 'e': ep = atoi(optarg); break;
        case 'd': data = optarg; break;
        case 'w': write = optarg; break;
        case 'r': ref = optarg; break;
        case 't': tp = atoi(optarg); break;
        case 'p': pp = atoi(optarg); break;
        case 'D': dp = atoi(optarg); break;
        case 'v': vp = atoi(optarg); break;
        case 'b': mbs = atoi(optarg); break;
        case 'z': zero = 1; break;
        case '2': zero = 2; break;
        case '3': zero = 3; break;
        case 'c': cp = atoi(optarg); break;
        case 'f': full = atoi(optarg); break;
        case 's': sp = 1; break;
        default: fprintf(stderr, "test_cuda_exec_mpi: bad option\n"); return 2;
        }
    }
    if (!data || (!write && !ref)) {
        fprintf(stderr, "test_cuda_exec_mpi: give --data and --write or --ref\n");
        return 2;
    }
    MPI_Init(&argc, &argv);
    int rank, world;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    int local_n = 1;
    dist_local_rank(&local_n);
    int enough = dist_world_min(kc_device_count() >= local_n);
    if (!enough) {
        if (rank == 0)
            printf("test_cuda_exec_mpi: fewer GPUs than ranks on a node, skipped\n");
        MPI_Finalize();
        return 77;
    }
    ModelSpec m;
    tiny(&m, llama);
    char err[512];
    Layout lo;
    layout_default(&lo);
    lo.tp = tp, lo.pp = pp, lo.dp = dp, lo.vp = vp, lo.cp = cp, lo.ep = ep, lo.mbs = mbs, lo.gbs = 8;
    static const OptimShard opt_of[] = {OPT_ZERO0, OPT_ZERO1, OPT_ZERO2, OPT_ZERO3};
    lo.opt = opt_of[zero];
    lo.sp = sp;
    if (spec_validate(&m, err, sizeof err) != 0 || layout_check(&lo, &m, NULL, err, sizeof err) != 0) {
        if (rank == 0)
            printf("FAIL: model/layout: %s\n", err);
        MPI_Finalize();
        return 1;
    }
    for (int s = 0; s < pp; s++)
        lo.full_rc[s] = full;
    TrainOpts o;
    exec_default_opts(&o);
    if (llama == 2)   // the dropless worst case: a skewed routing at init must not overflow the expert rows
        o.moe_imbalance = ep;
    CuExec e;
    int fails = 0;
    double loss[STEPS];
    int bad = cuexec_init(&e, &m, &lo, &o, data, err, sizeof err) != 0;
    if (bad)
        printf("FAIL: rank %d: cuexec_init: %s\n", rank, err);
    bad = !dist_world_min(!bad);
    if (!bad) {   /* the model states against the cost model, exactly (D = dp·cp shards) */
        HwProfile hw;
        memset(&hw, 0, sizeof hw);
        StageMem sm;
        memory_stage(&m, &hw, &e.lo, e.d.pp_rank, &sm);
        const int kinds[3][2] = {{XM_WEIGHTS, MEM_WEIGHTS}, {XM_GRADS, MEM_GRADS}, {XM_OPTIM, MEM_OPTIM}};
        for (int k = 0; k < 3; k++)
            if (e.mem[kinds[k][0]] != sm.bytes[kinds[k][1]]) {
                printf("FAIL: rank %d: %s: executor %.0f bytes, cost model %.0f\n", rank,
                       runfile_mem_name(kinds[k][0]), e.mem[kinds[k][0]], sm.bytes[kinds[k][1]]);
                fails++;
            }
    }
    for (int i = 0; i < STEPS && !bad; i++) {
        CuStepStats st;
        bad = cuexec_step(&e, &st, err, sizeof err) != 0;
        if (bad)
            printf("FAIL: rank %d step %d: %s\n", rank, i + 1, err);
        bad = !dist_world_min(!bad);
        loss[i] = st.loss;
        if (!bad && world > 1 && st.t[PH_FWD] <= 0)
            printf("FAIL: rank %d step %d: no forward time\n", rank, i + 1), fails++;
    }
    cuexec_free(&e);
    kc_free();
    fails += bad;
    if (!bad && rank == 0 && write) {
        FILE *f = fopen(write, "w");
        for (int i = 0; f && i < STEPS; i++)
            fprintf(f, "%.8f\n", loss[i]);
        fails += !f || fclose(f) != 0;
    }
    if (!bad && rank == 0 && ref) {
        FILE *f = fopen(ref, "r");
        for (int i = 0; i < STEPS; i++) {
            double want = NAN;
            if (!f || fscanf(f, "%lf", &want) != 1) {
                printf("FAIL: reference %s unreadable\n", ref);
                fails++;
                break;
            }
            int ok = fabs(loss[i] - want) <= 0.03 + 0.01 * fabs(want);
            printf("%s step %d: %.5f vs one GPU %.5f%s\n", m.name, i + 1, loss[i], want, ok ? "" : "  FAIL");
            fails += !ok;
        }
        if (f)
            fclose(f);
    }
    fails = dist_world_max(fails);
    if (rank == 0)
        printf("test_cuda_exec_mpi %s dp %d tp %d pp %d vp %d cp %d ep %d%s%s: %s\n", m.name, dp, tp, pp, vp, cp, ep,
               lo.sp ? " sp" : "", (const char *[]){"", " zero1", " zero2", " zero3"}[zero],
               fails ? "FAIL" : "ok");
    MPI_Finalize();
    return fails != 0;
}
