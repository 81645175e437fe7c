/* plot.h — PNG plots through gnuplot, safely.
 *
 * gnuplot works in a private temporary directory: it reads its data from
 * there and writes the picture and its messages there, so no user-given
 * path is ever pasted into a gnuplot script (a name with a quote, a
 * backquote or an @ would otherwise end the string or run a command). Text
 * from users (titles, labels) goes in through plot_quote. The picture is
 * then put in place with util_write_atomic_bytes, so a failed plot (gnuplot
 * missing or failing, a full disk) leaves the old file as it was and
 * returns an error that says why.
 */
#ifndef ULTRAPLAN_CLI_PLOT_H
#define ULTRAPLAN_CLI_PLOT_H

#include <stdio.h>

typedef struct {
    const char *png;          // the file asked for
    char dir[64];             // private temporary directory
    char data_path[96];       // dir/data: what the script plots
    char out_path[96];        // dir/out.png: what gnuplot writes
    char log_path[96];        // dir/log: gnuplot's messages
    FILE *data;               // open between plot_begin and plot_script
    FILE *gp;                 // gnuplot's stdin, open between plot_script and plot_end
} Plot;

/* Before any long work: gnuplot exists and png can be written (its
 * directory exists and is writable). 0 ok, -1 with err naming --plot. */
int plot_check(const char *png, char *err, int errlen);
/* plot_check, then the temporary directory and its data file (p->data). */
int plot_begin(Plot *p, const char *png, char *err, int errlen);
/* Close the data file, start gnuplot with a width x height PNG terminal
 * and its output set; returns the pipe to write the rest of the script to. */
FILE *plot_script(Plot *p, int width, int height, char *err, int errlen);
/* Write s to the script as one single-quoted gnuplot string (quotes
 * doubled, line breaks as spaces): no substitution happens inside it. */
void plot_quote(FILE *gp, const char *s);
/* Tick marks for a log axis from lo to hi: 1, 2, 5 times the powers of ten
 * in the range, as a gnuplot tics list ("(50, 100, 200, 500)"), so a range
 * of one decade still has several labelled ticks. */
void plot_log_tics(FILE *gp, const char *axis, double lo, double hi);

/* Finish: wait for gnuplot, move the PNG in place, remove the temporaries. */
int plot_end(Plot *p, char *err, int errlen);
/* Give up after plot_begin or plot_script (on an error of the caller's). */
void plot_abort(Plot *p);

#endif
