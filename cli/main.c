/* main.c — dispatch `ultraplan COMMAND ...` through the command table. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "command.h"
#include "suggest.h"

#include "commands.inc"   /* generated: extern declarations and `commands[]` */

/* The flag names of the table command_options built last, for
 * command_bad_option's suggestions. A copy: the command frees its table,
 * and in one process (the fuzzer) the next command may have none. */
#define MAX_SUGGEST 512
static const char *last_names[MAX_SUGGEST];
static int n_last_names;

struct option *command_options(const struct option *own, int n_own)
{
    int n_common = args_common_count();
    struct option *o = calloc((size_t)(n_own + n_common + 1), sizeof *o);
    if (!o) {
        fprintf(stderr, "ultraplan: out of memory\n");
        exit(1);
    }
    memcpy(o, own, (size_t)n_own * sizeof *o);
    memcpy(o + n_own, args_common_options(), (size_t)n_common * sizeof *o);
    n_last_names = 0;
    for (int i = 0; i < n_own + n_common && n_last_names < MAX_SUGGEST; i++)
        if (o[i].name)
            last_names[n_last_names++] = o[i].name;   /* string literals and the static knob table */
    return o;
}

void command_bad_option(const char *cmd, char **argv)
{
    /* a long option (unknown, or lacking its value) is the argument getopt
     * just passed; optopt is then the option's id, not a character */
    const char *a = optind > 0 ? argv[optind - 1] : NULL;
    if (a && a[0] == '-' && a[1] == '-') {
        char name[64];
        snprintf(name, sizeof name, "%s", a + 2);
        char *eq = strchr(name, '=');
        if (eq)
            *eq = 0;
        const char *near = util_closest(name, last_names, n_last_names);
        for (int i = 0; near && i < n_last_names; i++)   /* a known flag that lacks its value is not a typo */
            if (!strcmp(last_names[i], name))
                near = NULL;
        if (near)
            fprintf(stderr, "ultraplan %s: option %s: unknown (did you mean --%s?) or missing its value (see --help)\n",
                    cmd, a, near);
        else
            fprintf(stderr, "ultraplan %s: option %s: unknown or missing its value (see --help)\n", cmd, a);
    }
    else if (optopt > ' ' && optopt < 127)
        fprintf(stderr, "ultraplan %s: option -%c: unknown or missing its value (see --help)\n", cmd, optopt);
    else
        fprintf(stderr, "ultraplan %s: option %s: unknown or missing its value (see --help)\n", cmd, a ? a : "?");
}

static void usage(FILE *f)
{
    fprintf(f, "ultraplan %s — plan LLM pretraining on GPU clusters, then prove the plan by running it\n\n"
               "usage: ultraplan COMMAND [options]   (ultraplan COMMAND --help for its options)\n\ncommands:\n",
            ULTRAPLAN_VERSION);
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        fprintf(f, "  %-10s %s\n", commands[i]->name, commands[i]->summary);
    fprintf(f, "\nexample: ultraplan plan --gpus 512 --params 175B\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("ultraplan %s\n", ULTRAPLAN_VERSION);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        if (!strcmp(argv[1], commands[i]->name)) {
            n_last_names = 0;   /* a command with its own table suggests nothing from another's */
            return commands[i]->main(argc - 1, argv + 1);
        }
    const char *names[sizeof commands / sizeof *commands];
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        names[i] = commands[i]->name;
    const char *near = util_closest(argv[1], names, (int)(sizeof commands / sizeof *commands));
    if (near)
        fprintf(stderr, "ultraplan: unknown command \"%s\" (did you mean %s?)\n", argv[1], near);
    else
        fprintf(stderr, "ultraplan: unknown command \"%s\" (try ultraplan --help)\n", argv[1]);
    return 2;
}
