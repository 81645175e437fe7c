/* fuzz_cli.c — the command line of each subcommand, through the real
 * command table (cli/main.c, its main renamed ultraplan_main).
 *
 * Input: argument tokens separated by newlines; an empty line ends them and
 * the rest of the input becomes a file whose path replaces every token "@"
 * (a CSV for validate, a profile for --profile). The fuzzed binary's table
 * holds only commands that neither write files nor run long (predict,
 * models, validate: see CMakeLists.txt), and tokens that could make them
 * write (-o, --output, --plot) or read other files (anything with a '/')
 * are dropped. stdout goes to /dev/null; run with -close_fd_mask=2 to
 * silence the error lines too.
 */
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "command.h"
#include "common.h"
#include "report.h"

int ultraplan_main(int argc, char **argv);

#define MAX_ARGS 48

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc; (void)argv;
    int fd = open("/dev/null", O_WRONLY);
    if (fd >= 0) {
        dup2(fd, STDOUT_FILENO);
        close(fd);
    }
    return 0;
}

/* --name that getopt_long would take as an abbreviation of `full` */
static int abbreviates(const char *tok, const char *full)
{
    if (strncmp(tok, "--", 2) != 0 || !tok[2])
        return 0;
    size_t n = strcspn(tok + 2, "=");
    return n <= strlen(full) && strncmp(tok + 2, full, n) == 0;
}

static int dropped(const char *tok)
{
    if (strchr(tok, '/'))
        return 1;
    if (tok[0] == '-' && tok[1] != '-' && strchr(tok, 'o'))
        return 1;   /* -o FILE, also inside a group like -ho */
    return abbreviates(tok, "output") || abbreviates(tok, "plot");
}

/* glibc keeps a pointer into the previous argv between getopt calls; a
 * scan with optind = 0 forgets it (the real binary parses argv once). */
static void reset_getopt(void)
{
    static char name[] = "x";
    char *av[] = {name, NULL};
    optind = 0;
    opterr = 0;
    while (getopt(1, av, "") != -1) {
    }
}

/* What predict would print, checked: the flags it accepts must give a
 * finite cost and JSON without null. Mirrors predict_main's parse. */
static void check_predict(int argc, char **argv)
{
    static const struct option own[] = {{"help", no_argument, 0, 'h'}};
    struct option *opts = command_options(own, 1);
    CliInputs in;
    args_init(&in);
    char err[512];
    int c, ok = 1;
    reset_getopt();
    optind = 1;
    while (ok && (c = getopt_long(argc, argv, "ho:", opts, NULL)) != -1)
        if (c == 'h' || c == 'o' || c == '?' || c == ':' || args_handle(&in, c, optarg, err, sizeof err) != 0)
            ok = 0;
    free(opts);
    if (!ok || optind < argc || args_finish(&in, true, err, sizeof err) != 0)
        return;
    Cost cst;
    cost(&in.sc.model, &in.sc.hw, &in.sc.layout, &in.sc.opts, &cst);
    fz_check_cost(&in.sc.model, &in.sc.layout, &cst);
    cJSON *j = report_predict_json(&in.sc.model, &in.sc.hw, &in.sc.layout, &cst, in.sc.model_rule);
    fz_check_json(j, "predict json");
    cJSON_Delete(j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 8192)
        return 0;
    char *text = fz_strndup(data, size);
    for (size_t i = 0; i < size; i++)
        if (text[i] == 0)
            text[i] = '\n';
    char *file = strstr(text, "\n\n");
    const char *path = NULL;
    if (file) {
        *file = 0;
        file += 2;
        path = fz_temp_file("cli", (const uint8_t *)file, strlen(file));
    }
    static char prog[] = "ultraplan";
    char *argv[MAX_ARGS + 2];
    int argc = 0;
    argv[argc++] = prog;
    for (char *tok = strtok(text, "\n"); tok && argc < MAX_ARGS; tok = strtok(NULL, "\n")) {
        if (strcmp(tok, "@") == 0) {
            if (!path)
                continue;
            tok = (char *)path;
        } else if (dropped(tok)) {
            continue;
        }
        argv[argc++] = tok;
    }
    argv[argc] = NULL;
    /* the command table is what we fuzz, not --help of every command */
    reset_getopt();
    ultraplan_main(argc, argv);
    fflush(stdout);
    if (argc > 1 && strcmp(argv[1], "predict") == 0)
        check_predict(argc - 1, argv + 1);
    free(text);
    return 0;
}
