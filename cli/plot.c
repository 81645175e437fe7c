/* plot.c — see plot.h. */
#include "plot.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int plot_begin(Plot *p, const char *png, char *err, int errlen)
{
    memset(p, 0, sizeof *p);
    p->png = png;
    if (system("command -v gnuplot >/dev/null 2>&1") != 0) {
        snprintf(err, errlen, "--plot: gnuplot not found (apt-get install gnuplot-nox); the rest of the output is unaffected");
        return -1;
    }
    if (snprintf(p->tmp_png, sizeof p->tmp_png, "%s.tmp.%ld", png, (long)getpid()) >= (int)sizeof p->tmp_png) {
        snprintf(err, errlen, "--plot: path too long");
        return -1;
    }
    snprintf(p->data_path, sizeof p->data_path, "/tmp/ultraplan-plot-XXXXXX");
    int fd = mkstemp(p->data_path);
    p->data = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!p->data) {
        if (fd >= 0) {
            close(fd);
            unlink(p->data_path);
        }
        snprintf(err, errlen, "--plot: cannot create a temporary data file");
        return -1;
    }
    return 0;
}

FILE *plot_script(Plot *p, int width, int height, char *err, int errlen)
{
    int bad = fclose(p->data) != 0;
    p->data = NULL;
    p->gp = bad ? NULL : popen("gnuplot 2>&1", "w");
    if (!p->gp) {
        snprintf(err, errlen, bad ? "--plot: cannot write the temporary data file" : "--plot: cannot run gnuplot");
        unlink(p->data_path);
        return NULL;
    }
    fprintf(p->gp, "set terminal pngcairo size %d,%d font ',11'\nset output '%s'\n", width, height, p->tmp_png);
    return p->gp;
}

int plot_end(Plot *p, char *err, int errlen)
{
    int rc = pclose(p->gp);
    p->gp = NULL;
    unlink(p->data_path);
    if (rc != 0 || rename(p->tmp_png, p->png) != 0) {
        unlink(p->tmp_png);
        snprintf(err, errlen, "--plot: gnuplot failed writing %s", p->png);
        return -1;
    }
    return 0;
}

void plot_abort(Plot *p)
{
    if (p->data)
        fclose(p->data);
    if (p->gp)
        pclose(p->gp);
    p->data = p->gp = NULL;
    if (p->data_path[0])
        unlink(p->data_path);
    if (p->tmp_png[0])
        unlink(p->tmp_png);
}
