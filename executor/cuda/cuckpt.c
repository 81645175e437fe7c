/* cuckpt.c — checkpoints of the CUDA executor (cuexec.h) in the CPU
 * executor's format: the device state is copied to host buffers described by
 * a CkptState and written and read by ckpt.c, so the files, the manifest, the
 * checks and the fault behaviour are the same code as on the CPU.
 *
 * The file's weights are the stage's full fp32 parameters, as the CPU writes
 * them: the masters, or under ZeRO-1 every dp rank's master shard all-gathered
 * (fp32, through the grad slab, which the next step zeroes). On load each
 * rank takes its shard of the masters from them and rebuilds the bf16 copy
 * the GEMMs read with kc_to_bf16 (round to nearest even, as AdamW writes it),
 * so the resumed weights are the uninterrupted run's bit for bit. */
#include <stdlib.h>

#include "ckpt.h"
#include "cuexec.h"

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

/* Device masters (all-gathered under ZeRO-1), m and v into s. Collective
 * over dp under ZeRO-1. */
static void download(CuExec *e, CkptState *s)
{
    size_t fb = sizeof(float);
    CHECK_CUDA(cudaStreamSynchronize(e->st));
    const float *w = e->w32;
    if (e->zero1) {
        CHECK_CUDA(cudaMemcpyAsync(e->g + e->opt_off, e->w32, e->opt_n * fb, cudaMemcpyDeviceToDevice, e->st));
        cucomm_allgather(e->cc, CC_DP, e->g, e->opt_n, CC_F32, e->st);
        w = e->g;
    }
    CHECK_CUDA(cudaMemcpyAsync(s->w, w, e->n_alloc * fb, cudaMemcpyDeviceToHost, e->st));
    CHECK_CUDA(cudaMemcpyAsync(s->m, e->om, e->opt_n * fb, cudaMemcpyDeviceToHost, e->st));
    CHECK_CUDA(cudaMemcpyAsync(s->v, e->ov, e->opt_n * fb, cudaMemcpyDeviceToHost, e->st));
    CHECK_CUDA(cudaStreamSynchronize(e->st));
}

/* s's weights through the grad slab into the bf16 copy and this rank's
 * master shard; m and v as they are. */
static void upload(CuExec *e, const CkptState *s)
{
    size_t fb = sizeof(float);
    CHECK_CUDA(cudaStreamSynchronize(e->st));
    CHECK_CUDA(cudaMemcpyAsync(e->g, s->w, e->n_alloc * fb, cudaMemcpyHostToDevice, e->st));   // ordered on e->st
    kc_to_bf16(e->wb, e->g, e->n_alloc, e->st);
    CHECK_CUDA(cudaMemcpyAsync(e->w32, e->g + e->opt_off, e->opt_n * fb, cudaMemcpyDeviceToDevice, e->st));
    CHECK_CUDA(cudaMemcpyAsync(e->om, s->m, e->opt_n * fb, cudaMemcpyHostToDevice, e->st));
    CHECK_CUDA(cudaMemcpyAsync(e->ov, s->v, e->opt_n * fb, cudaMemcpyHostToDevice, e->st));
    CHECK_CUDA(cudaStreamSynchronize(e->st));
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
    if (rc == 0) {
        upload(e, &s);
        e->step = s.step;
    }
    host_free(&s);
    return rc;
}
