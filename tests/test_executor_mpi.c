/* test_executor_mpi.c — one layout of a tiny GPT or Llama, run under mpirun
 * for a few steps:
 *   - writes its per-step losses (--write FILE) or checks them against a
 *     single-rank run's file (--ref FILE) within a relative tolerance;
 *   - checks that the bytes the executor allocated per category equal the
 *     cost model's: weights, grads and optimizer states exactly, activations
 *     within 10 %.
 * --moe makes the model a tiny mixture of experts (4 experts, top 2, expert
 * FFN 64, no biases; --shared N a shared expert of N, --first-dense K dense
 * leading layers, --capacity F a capacity factor, --experts N another
 * count, --groups G,KG group-limited routing) laid out with --ep and
 * --etp; it checks the load-balancing loss against the reference too.
 * The MoE expectations are model/memory.c's at the imbalance the executor
 * sized its expert buffers for. --mla Q gives a llama model multi-head
 * latent attention (q_lora_rank Q, 0 for no q compression; kv_lora_rank
 * 32, qk nope 16 + rope 8 per head, v_head_dim 16). --mtp D adds D
 * multi-token-prediction modules; their loss is checked against the
 * reference too.
 * Exit 0 when every check passes, 1 otherwise (on every rank).
 *
 * usage: test_executor_mpi --model gpt|llama --dir TMPDIR [--dp N --tp N --pp N --vp N --cp N --sp
 *        --zero1 --zero2 --zero3 --distopt --no-overlap-grad --mbs N --gbs N --stages a,b,.. --full a,b,.. --sel a,b,.. --steps K]
 *        [--write FILE | --ref FILE] [--rtol X] [--acts-tol X]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost.h"
#include "exec.h"

static int parse_list(const char *s, int *out)
{
    int n = 0;
    while (s && *s && n < LAYOUT_MAX_PP) {
        out[n++] = atoi(s);
        s = strchr(s, ',');
        if (s)
            s++;
    }
    return n;
}

static void tiny_model(ModelSpec *m, const char *kind)
{
    memset(m, 0, sizeof *m);
    strcpy(m->name, kind);
    m->L = 4, m->h = 64, m->a = 4, m->s = 32, m->vocab = 60, m->vocab_div = 8;
    if (strcmp(kind, "llama") == 0) {
        m->g = 2, m->f = 128, m->mlp = MLP_SWIGLU, m->norm = NORM_RMSNORM, m->pos = POS_ROPE;
        m->bias = false, m->tied = false;
    } else {
        m->g = 4, m->f = 256, m->mlp = MLP_GELU, m->norm = NORM_LAYERNORM, m->pos = POS_LEARNED;
        m->bias = true, m->tied = true;
    }
}

/* A deterministic llm.c shard of uint16 tokens below vocab. */
static int write_shard(const char *path, int vocab, int ntok)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    int hdr[256] = {DATA_MAGIC_U16, 1, ntok};
    fwrite(hdr, sizeof hdr, 1, f);
    unsigned x = 12345;
    for (int i = 0; i < ntok; i++) {
        x = x * 1103515245u + 12345u;
        /* some structure so the loss falls: mostly the previous token + 1 */
        static unsigned short prev;
        unsigned short t = (x >> 16) % 4 == 0 ? (unsigned short)((x >> 8) % vocab) : (unsigned short)((prev + 1) % vocab);
        prev = t;
        fwrite(&t, 2, 1, f);
    }
    return fclose(f);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const char *kind = "gpt", *dir = "/tmp", *wfile = NULL, *rfile = NULL;
    int steps = 5, full[LAYOUT_MAX_PP] = {0}, sel[LAYOUT_MAX_PP] = {0}, stages[LAYOUT_MAX_PP] = {0};
    double rtol = 1e-5, acts_tol = 0.10, capacity = 0;
    int moe = 0, shared = 0, first_dense = 0, ep = 1, etp = 0, mla = -1, mtp = 0, experts = 4, groups = 0, gtopk = 0;
    int window = 0, sinks = 0;
    double clamp = 0;
    Layout lo;
    layout_default(&lo);
    lo.prec = PREC_FP32;
    lo.sp = false;
    lo.mbs = 2, lo.gbs = 8;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(a, "--model")) kind = v, i++;
        else if (!strcmp(a, "--dir")) dir = v, i++;
        else if (!strcmp(a, "--dp")) lo.dp = atoi(v), i++;
        else if (!strcmp(a, "--tp")) lo.tp = atoi(v), i++;
        else if (!strcmp(a, "--pp")) lo.pp = atoi(v), i++;
        else if (!strcmp(a, "--vp")) lo.vp = atoi(v), i++;
        else if (!strcmp(a, "--cp")) lo.cp = atoi(v), i++;
        else if (!strcmp(a, "--mbs")) lo.mbs = atoi(v), i++;
        else if (!strcmp(a, "--gbs")) lo.gbs = atoi(v), i++;
        else if (!strcmp(a, "--no-overlap-grad")) lo.overlap_grad = false;
        else if (!strcmp(a, "--steps")) steps = atoi(v), i++;
        else if (!strcmp(a, "--stages")) parse_list(v, stages), i++;
        else if (!strcmp(a, "--full")) parse_list(v, full), i++;
        else if (!strcmp(a, "--sel")) parse_list(v, sel), i++;
        else if (!strcmp(a, "--write")) wfile = v, i++;
        else if (!strcmp(a, "--ref")) rfile = v, i++;
        else if (!strcmp(a, "--rtol")) rtol = atof(v), i++;
        else if (!strcmp(a, "--acts-tol")) acts_tol = atof(v), i++;
        else if (!strcmp(a, "--sp")) lo.sp = true;
        else if (!strcmp(a, "--zero1")) lo.opt = OPT_ZERO1;
        else if (!strcmp(a, "--zero2")) lo.opt = OPT_ZERO2;
        else if (!strcmp(a, "--zero3")) lo.opt = OPT_ZERO3;
        else if (!strcmp(a, "--distopt")) lo.opt = OPT_DISTOPT;
        else if (!strcmp(a, "--moe")) moe = 1;
        else if (!strcmp(a, "--mla")) mla = atoi(v), i++;
        else if (!strcmp(a, "--mtp")) mtp = atoi(v), i++;
        else if (!strcmp(a, "--shared")) shared = atoi(v), i++;
        else if (!strcmp(a, "--first-dense")) first_dense = atoi(v), i++;
        else if (!strcmp(a, "--capacity")) capacity = atof(v), i++;
        else if (!strcmp(a, "--experts")) experts = atoi(v), i++;
        else if (!strcmp(a, "--groups")) sscanf(v, "%d,%d", &groups, &gtopk), i++;
        else if (!strcmp(a, "--ep")) ep = atoi(v), i++;
        else if (!strcmp(a, "--window")) window = atoi(v), i++;   /* GPT-OSS's pattern: every other layer */
        else if (!strcmp(a, "--sinks")) sinks = 1;
        else if (!strcmp(a, "--clamp")) clamp = atof(v), i++;
        else if (!strcmp(a, "--etp")) etp = atoi(v), i++;
        else {
            if (rank == 0)
                fprintf(stderr, "test_executor_mpi: unknown argument %s\n", a);
            MPI_Finalize();
            return 2;
        }
    }
    ModelSpec m;
    tiny_model(&m, kind);
    ModelSpec dense = m;
    if (moe) {
        m.bias = false;
        dense.bias = false;
        m.experts = experts, m.topk = 2, m.moe_ffn = 64, m.shared_ffn = shared, m.moe_freq = 1;
        m.moe_first_dense = first_dense, m.capacity_factor = capacity;
        m.router_groups = groups, m.router_group_topk = gtopk;
        lo.ep = ep, lo.etp = etp;
    }
    if (mla >= 0)
        m.attn = ATTN_MLA, m.q_lora_rank = mla, m.kv_lora_rank = 32, m.qk_nope_dim = 16, m.qk_rope_dim = 8,
        m.v_head_dim = 16;
    m.mtp_layers = mtp;
    m.window = window, m.window_skip_freq = window > 0 ? 2 : 0, m.sinks = sinks, m.act_clamp = clamp;
    char err[512];
    if (spec_validate(&m, err, sizeof err) != 0 || spec_validate(&dense, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    memcpy(lo.layers, stages, sizeof stages);
    memcpy(lo.full_rc, full, sizeof full);
    memcpy(lo.sel_rc, sel, sizeof sel);
    if (layout_check(&lo, &m, NULL, err, sizeof err) != 0) {
        if (rank == 0)
            fprintf(stderr, "layout: %s\n", err);
        MPI_Finalize();
        return 1;
    }
    char data[1024];
    snprintf(data, sizeof data, "%s/tiny_%s.bin", dir, kind);
    if (rank == 0 && write_shard(data, m.vocab, 40000) != 0) {
        fprintf(stderr, "cannot write %s\n", data);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Barrier(MPI_COMM_WORLD);

    TrainOpts o;
    exec_default_opts(&o);
    Exec e;
    if (exec_init(&e, &m, &lo, &o, data, err, sizeof err) != 0) {
        fprintf(stderr, "[rank %d] exec_init: %s\n", rank, err);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    int fails = 0;

    /* memory: the executor's slabs against the cost model */
    HwProfile hw;
    memset(&hw, 0, sizeof hw);
    StageMem sm;
    Layout clo = e.lo;
    clo.target = TARGET_ULTRAPLAN;   /* priced as this executor keeps it (memory_executor_accounting) */
    if (moe)   /* the cost model at the imbalance the executor sized its expert buffers for */
        clo.moe_imbalance = o.moe_imbalance;
    memory_stage(&m, &hw, &clo, e.d.pp_rank, &sm);
    double mem[XM_COUNT];
    exec_memory(&e, mem);
    const int kinds[3][2] = {{XM_WEIGHTS, MEM_WEIGHTS}, {XM_GRADS, MEM_GRADS}, {XM_OPTIM, MEM_OPTIM}};
    for (int k = 0; k < 3; k++)
        if (mem[kinds[k][0]] != sm.bytes[kinds[k][1]]) {
            fprintf(stderr, "[rank %d] %s: executor %.0f bytes, cost model %.0f\n", rank,
                    runfile_mem_name(kinds[k][0]), mem[kinds[k][0]], sm.bytes[kinds[k][1]]);
            fails++;
        }
    double acts_err = fabs(mem[XM_ACTS] - sm.bytes[MEM_ACTS]) / sm.bytes[MEM_ACTS];
    if (acts_err > acts_tol) {
        fprintf(stderr, "[rank %d] acts: executor %.0f bytes, cost model %.0f (%.1f %% off)\n", rank,
                mem[XM_ACTS], sm.bytes[MEM_ACTS], 100 * acts_err);
        fails++;
    }

    double ref[64] = {0}, aref[64] = {0}, mref[64] = {0};
    if (rfile && rank == 0) {
        FILE *f = fopen(rfile, "r");
        for (int i = 0; f && i < steps; i++)
            if (fscanf(f, "%lf %lf %lf", &ref[i], &aref[i], &mref[i]) != 3)
                break;
        if (f)
            fclose(f);
    }
    FILE *wf = wfile && rank == 0 ? fopen(wfile, "w") : NULL;
    for (int i = 0; i < steps && i < 64; i++) {
        StepStats st;
        if (exec_step(&e, &st, err, sizeof err) != 0) {
            fprintf(stderr, "[rank %d] step: %s\n", rank, err);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        if (rank == 0) {
            printf("step %d loss %.7f (%.1f ms)", i + 1, st.loss, 1e3 * st.step_s);
            if (moe)
                printf(" aux %.9f", st.aux_loss);
            if (mtp)
                printf(" mtp %.9f", st.mtp_loss);
            if (rfile) {
                double rel = fabs(st.loss - ref[i]) / fabs(ref[i]);
                printf("  ref %.7f rel %.2e", ref[i], rel);
                if (!(rel <= rtol))
                    fails++, printf("  FAIL");
                double arel = aref[i] != 0 ? fabs(st.aux_loss - aref[i]) / fabs(aref[i]) : fabs(st.aux_loss);
                if (moe) {
                    printf("  aux rel %.2e", arel);
                    if (!(arel <= rtol) || !(st.aux_loss > 0))
                        fails++, printf("  FAIL(aux)");
                }
                if (mtp) {
                    double mrel = fabs(st.mtp_loss - mref[i]) / fabs(mref[i]);
                    printf("  mtp rel %.2e", mrel);
                    if (!(mrel <= rtol) || !(st.mtp_loss > 0))
                        fails++, printf("  FAIL(mtp)");
                }
            }
            printf("\n");
            if (wf)
                fprintf(wf, "%.9f %.12g %.12g\n", st.loss, st.aux_loss, st.mtp_loss);
        }
    }
    if (wf)
        fclose(wf);
    MPI_Allreduce(MPI_IN_PLACE, &fails, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("%s%s%s%s: dp %d tp %d pp %d vp %d cp %d sp %d ep %d etp %d %s%s — %s\n", kind, moe ? " moe" : "", mla >= 0 ? " mla" : "", mtp ? " mtp" : "", lo.dp,
               lo.tp, lo.pp, lo.vp, lo.cp, e.lo.sp, lo.ep, layout_etp(&lo), layout_opt_name(lo.opt),
               lo.overlap_grad ? "" : " no-overlap-grad", fails ? "FAILED" : "ok");
    exec_free(&e);
    MPI_Finalize();
    return fails ? 1 : 0;
}
