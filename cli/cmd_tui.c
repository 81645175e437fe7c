/* cmd_tui.c — `ultraplan tui`: interactive what-if planning in the terminal. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "command.h"
#include "follow.h"
#include "planfile.h"
#include "state.h"
#include "tui.h"

/* the shared flags tui has no use for: it writes with s and m */
static const char *const no_output[] = {"json", "output", "price", NULL};   /* --price: its own, default $2 */

static void help(FILE *f)
{
    fprintf(f, "usage: ultraplan tui [model] [hardware] [layout] [--price USD] [--follow run.json]\n"
               "       ultraplan tui PLAN.json [...]   (a saved plan: its model, hardware and layout)\n"
               "                     [--no-color] [--no-plans] [--save FILE]\n"
               "                     [--snapshot [--rows N] [--cols N] [--keys KEYS]]\n\n"
               "A full-screen what-if view: change the model, GPUs, GPU type, batch, budget and every layout\n"
               "knob with the arrow keys (or type a value) and see memory per pipeline stage, the step time\n"
               "by phase, MFU, days and cost change on every key; the planner's best plans for the inputs\n"
               "(Tab, Enter loads one); p pins a baseline and every number shows its difference from it;\n"
               "s saves plan.json, m the Megatron-LM arguments; ? lists the keys. Needs 64x22 or more.\n\n"
               "TUI options:\n"
               "  --price USD             price of one GPU-hour for the cost line (default 2.00)\n"
               "  --follow FILE           show a running execution's run.json beside the prediction\n"
               "  --no-color              monochrome\n"
               "  --no-plans              do not run the planner\n"
               "  --save FILE             where s writes the plan (default plan.json)\n"
               "  --snapshot              print the panes as plain text and exit (no terminal needed)\n"
               "  --rows N --cols N       the snapshot's size (default 40 x 120)\n"
               "  --keys KEYS             snapshot: press these keys first; <up> <down> <left> <right>\n"
               "                          <enter> <tab> <esc> <bs> <lt> name the special ones\n\n%s\n"
               "example: ultraplan tui --params 175B --gpus 512 --tp 8 --pp 8\n",
            args_help_except(ARGS_HELP_PREDICT, no_output));
}

enum { O_PRICE = 1, O_FOLLOW, O_NO_COLOR, O_NO_PLANS, O_SAVE, O_SNAPSHOT, O_ROWS, O_COLS, O_KEYS };

static int tui_main(int argc, char **argv)
{
    static const struct option own[] = {
        {"help", no_argument, 0, 'h'},
        {"price", required_argument, 0, O_PRICE},
        {"follow", required_argument, 0, O_FOLLOW},
        {"no-color", no_argument, 0, O_NO_COLOR},
        {"no-plans", no_argument, 0, O_NO_PLANS},
        {"save", required_argument, 0, O_SAVE},
        {"snapshot", no_argument, 0, O_SNAPSHOT},
        {"rows", required_argument, 0, O_ROWS},
        {"cols", required_argument, 0, O_COLS},
        {"keys", required_argument, 0, O_KEYS},
    };
    struct option *opts = command_options(own, (int)(sizeof own / sizeof *own));
    CliInputs in;
    args_init(&in);
    TuiOptions to;
    tui_options_default(&to);
    double price = 2.0;
    const char *follow = NULL, *save = NULL;
    bool snapshot = false;
    char err[512];
    int c, rc = 2;
    TuiState *st = NULL;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "ho:", opts, NULL)) != -1) {
        char *end;
        switch (c) {
        case 'h': help(stdout); rc = 0; goto out;
        case 'o':
            fprintf(stderr, "ultraplan tui: -o does nothing here: s saves the plan (--save FILE names it)\n");
            goto out;
        case O_PRICE:
            price = strtod(optarg, &end);
            if (end == optarg || *end || !(price >= 0 && price < 1e9)) {
                fprintf(stderr, "ultraplan tui: --price: expected dollars per GPU-hour >= 0, got \"%s\"\n", optarg);
                goto out;
            }
            break;
        case O_FOLLOW: follow = optarg; break;
        case O_NO_COLOR: to.color = false; break;
        case O_NO_PLANS: to.plans = false; break;
        case O_SAVE: save = optarg; break;
        case O_SNAPSHOT: snapshot = true; break;
        case O_ROWS: case O_COLS: {
            int v;
            if (util_parse_int(optarg, &v) != 0 || v < 1 || v > 1000) {
                fprintf(stderr, "ultraplan tui: --%s: expected 1..1000, got \"%s\"\n", c == O_ROWS ? "rows" : "cols",
                        optarg);
                goto out;
            }
            *(c == O_ROWS ? &to.rows : &to.cols) = v;
            break;
        }
        case O_KEYS: to.keys = optarg; break;
        case '?': case ':':
            command_bad_option("tui", argv);
            goto out;
        default:
            if (args_handle(&in, c, optarg, err, sizeof err) != 0) {
                fprintf(stderr, "ultraplan tui: %s\n", err);
                goto out;
            }
        }
    }
    if (in.json) {
        fprintf(stderr, "ultraplan tui: --json does nothing here: use predict --json or plan --json\n");
        goto out;
    }
    const char *plan = NULL;
    if (optind < argc)
        plan = argv[optind++];
    if (optind < argc) {
        fprintf(stderr, "ultraplan tui: unexpected argument \"%s\" (one plan file at most; see --help)\n",
                argv[optind]);
        goto out;
    }
    if (plan) {
        /* a saved plan: its model, hardware, layout and budget, as it was saved */
        if (in.sc.given || in.sc.model_name || in.sc.params > 0 || in.sc.gpu_name || in.sc.profile_path ||
            in.sc.gpus) {
            fprintf(stderr, "ultraplan tui: %s: a plan file brings its own model, hardware and layout; give it "
                            "alone (and change the knobs in the TUI)\n", plan);
            goto out;
        }
        PlanFile *pf = malloc(sizeof *pf);
        if (!pf || planfile_read(plan, pf, err, sizeof err) != 0) {
            fprintf(stderr, "ultraplan tui: %s\n", pf ? err : "out of memory");
            free(pf);
            rc = 1;
            goto out;
        }
        in.sc.model = pf->model;
        in.sc.hw = pf->hw;
        in.sc.layout = pf->layout;
        in.sc.opts = pf->opts;
        in.sc.gpus = layout_gpus(&pf->layout);
        in.sc.fixed = FIX_GBS;   /* the plan's global batch is the problem's */
        scenario_resolve_margin(&in.sc);   /* --mem-margin, or the default, against the plan's GPU */
        free(pf);
    } else if (args_finish(&in, true, err, sizeof err) != 0) {
        fprintf(stderr, "ultraplan tui: %s\n", err);
        goto out;
    }
    st = malloc(sizeof *st);
    if (!st) {
        fprintf(stderr, "ultraplan tui: out of memory\n");
        rc = 1;
        goto out;
    }
    state_init(st, &in.sc, price);
    /* no layout knob given: open on the planner's best plan, not on tp 1 pp 1 */
    st->load_best = !plan && (in.sc.fixed & ~(unsigned)FIX_GBS) == 0;
    if (save)
        snprintf(st->save_path, sizeof st->save_path, "%s", save);
    if (follow)
        follow_init(&st->run, follow);
    if (snapshot)
        rc = tui_snapshot(st, &to, stdout, err, sizeof err);
    else
        rc = tui_run(st, &to, err, sizeof err);
    if (rc != 0)
        fprintf(stderr, "ultraplan tui: %s\n", err);
out:
    free(st);
    free(opts);
    return rc;
}

const Command cmd_tui = {"tui", "interactive what-if planning in the terminal", tui_main};
