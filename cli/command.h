/* command.h — one subcommand of the ultraplan binary.
 *
 * Each cli/cmd_NAME.c defines `const Command cmd_NAME`; CMake collects the
 * files into the dispatch table (commands.inc), so adding a subcommand is
 * adding a file. A command returns the process exit status: 0 ok, 1 a
 * failure of the work, 2 a usage error.
 */
#ifndef ULTRAPLAN_CLI_COMMAND_H
#define ULTRAPLAN_CLI_COMMAND_H

typedef struct {
    const char *name;      // as typed: "predict"
    const char *summary;   // one line for `ultraplan --help`
    int (*main)(int argc, char **argv);   // argv[0] is the command name
} Command;

/* Build a getopt_long table: the command's own options, then the shared
 * ones of args.h. Returns a malloc'd array the caller frees. */
struct option;
struct option *command_options(const struct option *own, int n_own);

/* After getopt_long returned '?' or ':': one line on stderr naming the
 * option that was unknown or lacked its value. */
void command_bad_option(const char *cmd, char **argv);

#endif
