/* sched.h — pipeline schedules as data: the ordered list of forward and
 * backward actions one pipeline stage runs in one optimizer step.
 *
 * 1F1B (PipeDream-Flush, Narayanan et al. 2021): stage s runs
 * min(p − s − 1, m) warm-up forwards, then alternates one forward and one
 * backward, then drains the backwards. Interleaved (Megatron-LM's
 * forward_backward_pipelining_with_interleaving): each stage holds vp model
 * chunks; micro-batches go in groups of p through chunk 0, then chunk 1, ...;
 * warm-up is 2(p − s − 1) + (vp − 1)·p chunk-forwards. Needs m % p == 0.
 */
#ifndef ULTRAPLAN_EXECUTOR_SCHED_H
#define ULTRAPLAN_EXECUTOR_SCHED_H

typedef enum { ACT_FWD, ACT_BWD } ActKind;

typedef struct {
    ActKind kind;
    int mb;      // micro-batch, 0..m-1
    int chunk;   // model chunk on this stage, 0..vp-1
} Action;

typedef struct {
    int n;            // actions (2·m·vp)
    Action *a;
    int max_live;     // most (chunk, micro-batch) activations held at once
} Schedule;

/* Returns 0, or -1 with err when the shape is not schedulable. */
int sched_build(Schedule *s, int pp, int stage, int m, int vp, char *err, int errlen);
void sched_free(Schedule *s);

#endif
