/* cuckpt.c — checkpoints of the CUDA executor (cuexec.h) in the CPU
 * executor's format: the device state is copied to host buffers described by
 * a CkptState and written and read by ckpt.c, so the files, the manifest, the
 * checks and the fault behaviour are the same code as on the CPU.
 *
 * The file's weights are the stage's full fp32 parameters, as the CPU writes
 * them: the masters, or under ZeRO-1 every dp·cp rank's master shard all-
 * gathered (fp32, through the grad slab, which the next step zeroes), under
 * ZeRO-2/3 unit by unit through a temporary buffer; m and v are this rank's
 * optimizer shard in the layout's own order (ZeRO-1: the flat slab's slice;
 * ZeRO-2/3: its slices of every unit, cuplan_units), so a checkpoint loads
 * into the same ZeRO stage and group size only (the header's "opt" and dp).
 * On load each rank takes its shard of the masters from them and rebuilds
 * the bf16 copy the GEMMs read with kc_to_bf16 (round to nearest even, as
 * AdamW writes it; ZeRO-3: of its shard), so the resumed weights are the
 * uninterrupted run's bit for bit.
 *
 * What it doesn't: record cp in the header (CkptState has no field for it);
 * the layout shape check is ckpt.c's. */
#include <stdlib.h>

#include "ckpt.h"
#include "cuexec.h"
#include "cunet.h"

/* Host buffers of one rank's checkpoint; 0, or -1 if host memory ran out. */
static int host_state(const CuExec *e, CkptState *s)
{
    *s = (CkptState){
        .step = e->step, .world = e->d.world, .rank = e->d.rank,
        .dp = e->lo.dp, .tp = e->lo.tp, .pp = e->lo.pp, .vp = e->lo.vp, .opt = (int)e->lo.opt,
        .n_alloc = e->n_alloc, .opt_n = e->opt_n, .pos = data_get_pos(&e->dl),
        .model = &e->m, .lo = &e->lo,
    };
    s->w = malloc((e->n_alloc ? e->n_alloc : 1) * sizeof(float));
    s->m = malloc((e->opt_n ? e->opt_n : 1) * sizeof(float));
    s->v = malloc((e->opt_n ? e->opt_n : 1) * sizeof(float));
    return s->w && s->m && s->v ? 0 : -1;
}

static void host_free(CkptState *s)
{
    free(s->w);
    free(s->m);
    free(s->v);
    s->w = s->m = s->v = NULL;
}

/* The full fp32 weights (all-gathered over dp·cp when sharded), m and v
 * into s. Collective over dp·cp under ZeRO-1/2/3. */
static void download(CuExec *e, CkptState *s)
{
    size_t fb = sizeof(float);
    cuexec_get_weights(e, s->w);
    CHECK_CUDA(cudaMemcpyAsync(s->m, e->om, e->opt_n * fb, cudaMemcpyDeviceToHost, e->st));
    CHECK_CUDA(cudaMemcpyAsync(s->v, e->ov, e->opt_n * fb, cudaMemcpyDeviceToHost, e->st));
    CHECK_CUDA(cudaStreamSynchronize(e->st));
}

/* s's weights into the masters (this rank's shard) and the bf16 copy; m and
 * v as they are. */
static int upload(CuExec *e, const CkptState *s)
{
    size_t fb = sizeof(float);
    CHECK_CUDA(cudaStreamSynchronize(e->st));
    if (cuexec_put_weights(e, s->w) != 0)
        return -1;
    CHECK_CUDA(cudaMemcpyAsync(e->om, s->m, e->opt_n * fb, cudaMemcpyHostToDevice, e->st));
    CHECK_CUDA(cudaMemcpyAsync(e->ov, s->v, e->opt_n * fb, cudaMemcpyHostToDevice, e->st));
    CHECK_CUDA(cudaStreamSynchronize(e->st));
    return 0;
}

int cuexec_save(CuExec *e, const char *dir, char *err, int errlen)
{
    CkptState s;
    int bad = e->proxy || host_state(e, &s) != 0;
    if (bad)
        snprintf(err, errlen, e->proxy ? "checkpoint: the stage proxy has no training state to save"
                                       : "checkpoint: out of host memory for %zu weights", e->n_alloc);
    if (dist_world_agree(bad ? -1 : 0, err, errlen) != 0) {   // before download's all-gather
        if (!e->proxy)
            host_free(&s);
        return -1;
    }
    download(e, &s);
    int rc = ckpt_save(&s, dir, err, errlen);
    host_free(&s);
    return rc;
}

int cuexec_load(CuExec *e, const char *dir, char *err, int errlen)
{
    CkptState s;
    int bad = e->proxy || host_state(e, &s) != 0;
    if (bad)
        snprintf(err, errlen, e->proxy ? "resume: the stage proxy has no training state to load"
                                       : "resume: out of host memory for %zu weights", e->n_alloc);
    if (dist_world_agree(bad ? -1 : 0, err, errlen) != 0) {
        if (!e->proxy)
            host_free(&s);
        return -1;
    }
    int rc = ckpt_load(&s, dir, &e->dl, err, errlen);
    if (rc == 0 && upload(e, &s) != 0) {
        snprintf(err, errlen, "resume: out of host memory for the weight shard (%zu floats)", e->opt_n);
        rc = -1;
    }
    if (rc == 0)
        e->step = s.step;
    host_free(&s);
    return rc;
}
