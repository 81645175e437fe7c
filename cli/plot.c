/* plot.c — see plot.h. */
#include "plot.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fileio.h"

int plot_check(const char *png, char *err, int errlen)
{
    if (system("command -v gnuplot >/dev/null 2>&1") != 0) {
        snprintf(err, errlen, "--plot: gnuplot not found (apt-get install gnuplot-nox)");
        return -1;
    }
    char e2[512];
    if (util_check_writable(png, e2, sizeof e2) != 0) {
        snprintf(err, errlen, "--plot: %s", e2);
        return -1;
    }
    return 0;
}

static void remove_temps(Plot *p)
{
    if (!p->dir[0])
        return;
    unlink(p->data_path);
    unlink(p->out_path);
    unlink(p->log_path);
    rmdir(p->dir);
    p->dir[0] = 0;
}

int plot_begin(Plot *p, const char *png, char *err, int errlen)
{
    memset(p, 0, sizeof *p);
    p->png = png;
    if (plot_check(png, err, errlen) != 0)
        return -1;
    snprintf(p->dir, sizeof p->dir, "/tmp/ultraplan-plot-XXXXXX");
    if (!mkdtemp(p->dir)) {
        p->dir[0] = 0;
        snprintf(err, errlen, "--plot: cannot create a temporary directory in /tmp");
        return -1;
    }
    snprintf(p->data_path, sizeof p->data_path, "%s/data", p->dir);
    snprintf(p->out_path, sizeof p->out_path, "%s/out.png", p->dir);
    snprintf(p->log_path, sizeof p->log_path, "%s/log", p->dir);
    p->data = fopen(p->data_path, "w");
    if (!p->data) {
        remove_temps(p);
        snprintf(err, errlen, "--plot: cannot create a temporary data file");
        return -1;
    }
    return 0;
}

FILE *plot_script(Plot *p, int width, int height, char *err, int errlen)
{
    int bad = fclose(p->data) != 0;
    p->data = NULL;
    char cmd[256];
    /* every path here is ours: /tmp/ultraplan-plot-XXXXXX/... */
    snprintf(cmd, sizeof cmd, "gnuplot >'%s' 2>&1", p->log_path);
    p->gp = bad ? NULL : popen(cmd, "w");
    if (!p->gp) {
        snprintf(err, errlen, bad ? "--plot: cannot write the temporary data file" : "--plot: cannot run gnuplot");
        remove_temps(p);
        return NULL;
    }
    fprintf(p->gp, "set terminal pngcairo size %d,%d font ',11'\nset output '%s'\n", width, height, p->out_path);
    return p->gp;
}

void plot_log_tics(FILE *gp, const char *axis, double lo, double hi)
{
    static const double steps[] = {1, 2, 5};
    fprintf(gp, "set %s (", axis);
    int n = 0;
    for (int e = (int)floor(log10(lo)) - 1; e <= (int)ceil(log10(hi)) && n < 40; e++)
        for (int k = 0; k < 3; k++) {
            double v = steps[k] * pow(10.0, e);
            if (v >= lo && v <= hi)
                fprintf(gp, "%s%g", n++ ? ", " : "", v);
        }
    fprintf(gp, ")\n");
}

void plot_quote(FILE *gp, const char *s)
{
    fputc('\'', gp);
    for (; *s; s++) {
        if (*s == '\'')
            fputs("''", gp);
        else if (*s == '\n' || *s == '\r')
            fputc(' ', gp);
        else
            fputc(*s, gp);
    }
    fputc('\'', gp);
}

/* The last line gnuplot printed, for an error message. */
static void last_log_line(const Plot *p, char *buf, int len)
{
    char e2[64];
    size_t n = 0;
    char *log = util_slurp(p->log_path, 1 << 20, &n, e2, sizeof e2);
    buf[0] = 0;
    if (!log)
        return;
    while (n && (log[n - 1] == '\n' || log[n - 1] == ' '))
        log[--n] = 0;
    char *nl = strrchr(log, '\n');
    snprintf(buf, len, "%s", nl ? nl + 1 : log);
    free(log);
}

int plot_end(Plot *p, char *err, int errlen)
{
    int rc = pclose(p->gp);
    p->gp = NULL;
    char why[200] = "", e2[512];
    size_t n = 0;
    char *png = NULL;
    if (rc != 0)
        last_log_line(p, why, sizeof why);
    else if (!(png = util_slurp(p->out_path, 0, &n, e2, sizeof e2)) || n == 0)
        snprintf(why, sizeof why, "gnuplot wrote no picture");
    int ok = rc == 0 && png && n > 0;
    if (ok && util_write_atomic_bytes(p->png, png, n, e2, sizeof e2) != 0) {
        ok = 0;
        snprintf(err, errlen, "--plot: %s", e2);
    } else if (!ok) {
        snprintf(err, errlen, "--plot: gnuplot failed drawing %s%s%s", p->png, why[0] ? ": " : "", why);
    }
    free(png);
    remove_temps(p);
    return ok ? 0 : -1;
}

void plot_abort(Plot *p)
{
    if (p->data)
        fclose(p->data);
    if (p->gp)
        pclose(p->gp);
    p->data = p->gp = NULL;
    remove_temps(p);
}
