/* cucomm_none.c — cucomm.h in a build without NCCL: one GPU only. */
#include "cucomm.h"

#include <stdio.h>

int cucomm_available(void) { return 0; }

CuComm *cucomm_init(const Dist *d, int wrap, int tied, char *err, int errlen)
{
    (void)d, (void)wrap, (void)tied;
    snprintf(err, errlen, "this build has no NCCL (nccl.h and libnccl were not found at configure time): "
                          "the CUDA backend runs one GPU; rebuild with NCCL for dp, tp or pp above 1");
    return NULL;
}

void cucomm_free(CuComm *c) { (void)c; }

CuComm *cucomm_init_world(char *err, int errlen)
{
    snprintf(err, errlen, "this build has no NCCL: run calibrate --backend cuda as one process");
    return NULL;
}

int cucomm_init_local(int n, CuComm **comms, char *err, int errlen)
{
    (void)n, (void)comms;
    snprintf(err, errlen, "this build has no NCCL: no collectives between GPUs");
    return -1;
}

void cucomm_group_start(void) {}
void cucomm_group_end(void) {}
int cucomm_rank(const CuComm *c, CuGroup g) { (void)c, (void)g; return 0; }
void cucomm_allreduce_to(CuComm *c, CuGroup g, const void *in, void *out, size_t n, CuType t, CuOp op,
                         cudaStream_t st)
{
    (void)c, (void)g, (void)in, (void)out, (void)n, (void)t, (void)op, (void)st;
}
void cucomm_send_peer(CuComm *c, CuGroup g, int peer, const void *buf, size_t n, CuType t, cudaStream_t st)
{
    (void)c, (void)g, (void)peer, (void)buf, (void)n, (void)t, (void)st;
}
void cucomm_recv_peer(CuComm *c, CuGroup g, int peer, void *buf, size_t n, CuType t, cudaStream_t st)
{
    (void)c, (void)g, (void)peer, (void)buf, (void)n, (void)t, (void)st;
}
int cucomm_size(const CuComm *c, CuGroup g) { (void)c, (void)g; return 1; }
cudaStream_t cucomm_stream(const CuComm *c) { (void)c; return NULL; }
void cucomm_allreduce(CuComm *c, CuGroup g, void *x, size_t n, CuType t, CuOp op, cudaStream_t st)
{
    (void)c, (void)g, (void)x, (void)n, (void)t, (void)op, (void)st;
}
void cucomm_reduce_scatter(CuComm *c, CuGroup g, void *buf, size_t n_each, CuType t, cudaStream_t st)
{
    (void)c, (void)g, (void)buf, (void)n_each, (void)t, (void)st;
}
void cucomm_allgather(CuComm *c, CuGroup g, void *buf, size_t n_each, CuType t, cudaStream_t st)
{
    (void)c, (void)g, (void)buf, (void)n_each, (void)t, (void)st;
}
void cucomm_reduce_scatter_to(CuComm *c, CuGroup g, const void *in, void *out, size_t n_each, CuType t,
                              cudaStream_t st)
{
    (void)c, (void)g, (void)in, (void)out, (void)n_each, (void)t, (void)st;
}
void cucomm_allgather_from(CuComm *c, CuGroup g, const void *in, void *out, size_t n_each, CuType t,
                           cudaStream_t st)
{
    (void)c, (void)g, (void)in, (void)out, (void)n_each, (void)t, (void)st;
}
void cucomm_send(CuComm *c, CuLinkRole r, const void *buf, size_t n, CuType t, cudaStream_t st)
{
    (void)c, (void)r, (void)buf, (void)n, (void)t, (void)st;
}
void cucomm_recv(CuComm *c, CuLinkRole r, void *buf, size_t n, CuType t, cudaStream_t st)
{
    (void)c, (void)r, (void)buf, (void)n, (void)t, (void)st;
}
void cucomm_ring(CuComm *c, CuGroup g, const void *send, void *recv, size_t n, CuType t, cudaStream_t st)
{
    (void)c, (void)g, (void)send, (void)recv, (void)n, (void)t, (void)st;
}

int cucomm_init_moe(CuComm *c, const Dist *d, char *err, int errlen)
{
    (void)c, (void)d;
    snprintf(err, errlen, "this build has no NCCL: no expert-parallel groups");
    return -1;
}

void cucomm_alltoallv(CuComm *c, CuGroup g, const void *send, const size_t *scount, const size_t *sdispl,
                      void *recv, const size_t *rcount, const size_t *rdispl, CuType t, cudaStream_t st)
{
    (void)c, (void)g, (void)rcount;   // one rank: its own part
    size_t es = t == CC_F32 ? 4 : 2;
    if (scount[0])
        cudaMemcpyAsync((char *)recv + rdispl[0] * es, (const char *)send + sdispl[0] * es, scount[0] * es,
                        cudaMemcpyDeviceToDevice, st);
}
