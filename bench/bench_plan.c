/* bench_plan.c — planner speed on five requests, with and without pruning.
 *
 * Prints wall time, outer layouts enumerated / solved / pruned, ILPs solved
 * and layouts per second. Measure one core with `taskset -c 0`:
 *   taskset -c 0 ./build/bench/bench_plan [GPU [megatron|ultraplan]]
 * The target (default megatron, the planner's default) is the search's:
 * ultraplan is the ILP over every layout, megatron inner_megatron over what
 * Megatron-LM expresses. No memory margin: the whole GPU is usable.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "planner.h"
#include "presets.h"
#include "profile.h"

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
    int misses = 0;
    printf("%-14s %6s %-10s %9s %8s %9s %8s %6s %12s  %s\n", "model", "gpus", "search", "wall s", "layouts",
           "evaluated", "pruned", "ILPs", "layouts/s", "best (tp pp dp cp vp mbs, step s)");
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        ModelSpec m;
        if (presets_find(cases[i].model, &m, err, sizeof err) != 0) {
            fprintf(stderr, "bench_plan: %s\n", err);
            return 1;
        }
        for (int ex = 0; ex <= 1; ex++) {
            PlanRequest req;
            planner_request_default(&req);
            req.gpus = cases[i].gpus;
            req.base.gbs = (int)(4194304.0 / m.s + 0.5);
            req.exhaustive = ex;
            req.base.target = target;
            PlanResult res;
            double t0 = now_s();
            if (planner_search(&m, &hw, &o, &req, &res, err, sizeof err) != 0) {
                fprintf(stderr, "bench_plan: %s\n", err);
                return 1;
            }
            double wall = now_s() - t0;
            char best[96] = "none fits";
            if (res.n > 0) {
                const Layout *lo = &res.plans[0].layout;
                snprintf(best, sizeof best, "%d %d %d %d %d %d, %.3f", lo->tp, lo->pp, lo->dp, lo->cp, lo->vp,
                         lo->mbs, res.plans[0].cost.step_s);
            }
            bool miss = !ex && cases[i].target_s > 0 && wall > cases[i].target_s;
            misses += miss;
            printf("%-14s %6d %-10s %9.4f %8ld %9ld %8ld %6ld %12.0f  %s%s\n", m.name, req.gpus,
                   ex ? "exhaustive" : "pruned", wall, res.outer_total, res.outer_evaluated, res.outer_pruned,
                   res.ilp_solved, res.outer_total / wall, best,
                   miss ? "  (MISSES TARGET)" : cases[i].target_s > 0 && !ex ? "  (target met)" : "");
            planner_result_free(&res);
        }
    }
    return misses ? 1 : 0;
}
