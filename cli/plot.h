/* plot.h — PNG plots through gnuplot: a temporary data file, a script on a
 * pipe, and the picture written to a temporary name then renamed, so a
 * failed plot never leaves half a file. */
#ifndef ULTRAPLAN_CLI_PLOT_H
#define ULTRAPLAN_CLI_PLOT_H

#include <stdio.h>

typedef struct {
    const char *png;          // the file asked for
    char tmp_png[4096];       // gnuplot writes here first
    char data_path[64];       // temporary data file
    FILE *data;               // open between plot_begin and plot_script
    FILE *gp;                 // gnuplot's stdin, open between plot_script and plot_end
} Plot;

/* Check that gnuplot exists and open the data file (p->data). */
int plot_begin(Plot *p, const char *png, char *err, int errlen);
/* Close the data file, start gnuplot with a width x height PNG terminal
 * and its output set; returns the pipe to write the rest of the script to. */
FILE *plot_script(Plot *p, int width, int height, char *err, int errlen);
/* Finish: wait for gnuplot, remove the data file, move the PNG in place. */
int plot_end(Plot *p, char *err, int errlen);
/* Give up after plot_begin or plot_script (on an error of the caller's). */
void plot_abort(Plot *p);

#endif
