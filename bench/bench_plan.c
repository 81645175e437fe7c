/* bench_plan.c — planner speed on ten requests (five dense, five
 * mixture-of-experts, whose search adds ep and etp; DeepSeek-V3, Kimi K2
 * and Llama 4 Maverick have dense layers among the MoE ones), with and
 * without pruning; the pruned best must equal the exhaustive best (exit 1
 * if not).
 *
 * Prints wall time, outer layouts enumerated / solved / pruned, ILPs solved
 * and layouts per second. Measure one core with `taskset -c 0`:
 *   taskset -c 0 ./build/bench/bench_plan [GPU [megatron|ultraplan]]
 * The target (default megatron, the planner's default) is the search's:
 * ultraplan is the ILP over every layout, megatron inner_megatron over what
 * Megatron-LM expresses. The memory margin is `plan`'s default (5 % of
 * the GPU kept free), so the best plans are the ones `plan` prints.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "planner.h"
#include "presets.h"
#include "profile.h"
#include "scenario.h"

typedef struct {
    const char *model;
    int gpus;
    double target_s;   // pruned search, one core; 0 = none
} Case;

static const Case cases[] = {
    {"llama2-7b", 8, 0},
    {"gpt3-175b", 512, 0.5},
    {"gpt3-175b", 1024, 0},
    {"megatron-1t", 3072, 0},
    {"llama3.1-405b", 16384, 2.0},
    /* mixture of experts (issue 20: DeepSeek-V3 on 2,048 H100s in under 2 s on one core) */
    {"deepseek-v3", 2048, 2.0},
    {"mixtral-8x22b", 256, 0},
    {"qwen3-235b-a22b", 1024, 0},
    {"kimi-k2", 2048, 0},
    {"llama4-maverick", 1024, 0},
};

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    const char *gpu = argc > 1 ? argv[1] : "h100-sxm";
    HwProfile hw;
    char err[256];
    Target target = TARGET_MEGATRON;
    if (argc > 2 && layout_parse_target(argv[2], &target) != 0) {
        fprintf(stderr, "bench_plan: target: expected megatron or ultraplan, got \"%s\"\n", argv[2]);
        return 2;
    }
    printf("target %s\n", layout_target_name(target));
    if (profile_load_builtin(gpu, &hw, err, sizeof err) != 0) {
        fprintf(stderr, "bench_plan: %s\n", err);
        return 1;
    }
    CostOpts o;
    cost_opts_default(&o);
    int misses = 0, differ = 0;
    printf("%-15s %6s %-10s %9s %8s %9s %8s %6s %12s  %s\n", "model", "gpus", "search", "wall s", "layouts",
           "evaluated", "pruned", "ILPs", "layouts/s", "best (tp pp dp cp vp mbs [ep etp], step s)");
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        ModelSpec m;
        if (presets_find(cases[i].model, &m, err, sizeof err) != 0) {
            fprintf(stderr, "bench_plan: %s\n", err);
            return 1;
        }
        double pruned_step = 0;
        for (int ex = 0; ex <= 1; ex++) {
            PlanRequest req;
            planner_request_default(&req);
            req.gpus = cases[i].gpus;
            req.base.gbs = (int)(4194304.0 / m.s + 0.5);
            req.exhaustive = ex;
            req.mem_margin_bytes = SCENARIO_MEM_MARGIN_DEFAULT * hw.hbm_bytes;
            req.base.target = target;
            PlanResult res;
            double t0 = now_s();
            if (planner_search(&m, &hw, &o, &req, &res, err, sizeof err) != 0) {
                fprintf(stderr, "bench_plan: %s\n", err);
                return 1;
            }
            double wall = now_s() - t0;
            char best[1100];
            /* no plan: the planner's reason (a model the target's executor refuses, or none fits) */
            snprintf(best, sizeof best, "none: %s", res.infeasible[0] ? res.infeasible : "no layout fits");
            if (res.n > 0) {
                const Layout *lo = &res.plans[0].layout;
                char ep[24] = "";
                if (spec_is_moe(&m))
                    snprintf(ep, sizeof ep, " %d %d", lo->ep, layout_etp(lo));
                snprintf(best, sizeof best, "%d %d %d %d %d %d%s, %.3f", lo->tp, lo->pp, lo->dp, lo->cp, lo->vp,
                         lo->mbs, ep, res.plans[0].cost.step_s);
            }
            double step = res.n > 0 ? res.plans[0].cost.step_s : 0;
            bool diff = ex && step != pruned_step;   /* pruning must not lose the best plan */
            differ += diff;
            if (!ex)
                pruned_step = step;
            bool miss = !ex && cases[i].target_s > 0 && wall > cases[i].target_s;
            bool timed = !ex && cases[i].target_s > 0 && res.n > 0;   /* a target says nothing of a refusal */
            misses += miss;
            printf("%-15s %6d %-10s %9.4f %8ld %9ld %8ld %6ld %12.0f  %s%s%s\n", m.name, req.gpus,
                   ex ? "exhaustive" : "pruned", wall, res.outer_total, res.outer_evaluated, res.outer_pruned,
                   res.ilp_solved, res.outer_total / wall, best,
                   miss ? "  (MISSES TARGET)" : timed ? "  (target met)" : "",
                   diff ? "  (DIFFERS FROM PRUNED)" : "");
            planner_result_free(&res);
        }
    }
    if (differ)
        fprintf(stderr, "bench_plan: %d case(s) where the pruned best differs from the exhaustive best\n", differ);
    return misses || differ ? 1 : 0;
}
