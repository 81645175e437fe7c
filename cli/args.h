/* args.h — the flags that predict, plan, sweep and tui share: model,
 * hardware, layout and training budget.
 *
 * The layout and model-shape flags, their arguments, ranges and help come
 * from the knob table (scenario/knobs.h); the few others (--model,
 * --params, --gpu, --profile, --gpus, --gpus-per-node, --mem-margin,
 * --tokens, --mtbf, --restart-time, --json, -o) are listed here. Parsing fills a Scenario
 * and records which knobs the user fixed, so the planner searches only the
 * free ones. Errors go to an err buffer that names the flag and what was
 * expected; nothing here exits.
 */
#ifndef ULTRAPLAN_CLI_ARGS_H
#define ULTRAPLAN_CLI_ARGS_H

#include <getopt.h>
#include <stdbool.h>

#include "parse.h"
#include "scenario.h"

typedef struct {
    Scenario sc;               // what the question is
    bool json;                 // --json
    const char *out_path;      // -o FILE
} CliInputs;

/* Option ids of the shared flags start here; commands use ids below 1000. */
#define ARGS_OPT_BASE 1000

void args_init(CliInputs *in);

/* The shared long options (terminated by a zero entry). A command copies
 * them after its own into one table for getopt_long. */
const struct option *args_common_options(void);
int args_common_count(void);

/* Handle one shared option (id >= ARGS_OPT_BASE). 0 ok, -1 error in err. */
int args_handle(CliInputs *in, int id, const char *arg, char *err, int errlen);

/* After parsing: resolve model, profile, dp and defaults; check the layout
 * when `need_layout` (scenario_finish). 0 ok, -1 error in err. */
int args_finish(CliInputs *in, bool need_layout, char *err, int errlen);

/* Help text of the shared flags, for a command's --help. PREDICT: each
 * knob with its default; SEARCH (plan, sweep): the knobs the planner
 * searches say so instead of a default. */
typedef enum { ARGS_HELP_PREDICT, ARGS_HELP_SEARCH, ARGS_HELP_COUNT } ArgsHelpMode;
const char *args_help(ArgsHelpMode mode);
const char *args_common_help(void);   /* args_help(ARGS_HELP_PREDICT) */

/* The same without the lines of the flags in `skip` (names without "--",
 * NULL-terminated): for a command that gives those flags its own meaning
 * and documents them itself. Returns a static buffer. */
const char *args_help_except(ArgsHelpMode mode, const char *const *skip);

#endif
