/* profile.h — hardware profiles as JSON: the builtin ones embedded from
 * profiles/gpus/NAME.json at build time, or a file (written by calibrate or fit).
 *
 * Format "ultraplan.profile/1": one object whose fields map 1:1 onto HwProfile
 * (model/hw.h). Every number may carry its source in a sibling string field
 * named <field>_src; the builtin files always do. Unknown fields are ignored so
 * that older binaries read newer files. A bad file gives one error line that
 * names the origin, the field and what was expected; it never crashes and
 * never leaves a half-filled profile behind.
 *
 *   format        "ultraplan.profile/1"                          required
 *   name          string, < 48 chars                             required
 *   desc          string, < 128 chars                            optional
 *   peak          {fp32, bf16, fp16, fp8}: FLOP/s >= 0, one > 0  required
 *   hbm_bytes, hbm_bw                          > 0
 *   gpus_per_node                              integer >= 1 (GPUs in one NVLink domain)
 *   gpus_per_host            integer >= 1, optional (default gpus_per_node): GPUs
 *                 in one host, what a Slurm node holds (GB200 NVL72: 4 of 72)
 *   intra, inter  {bw > 0 bytes/s one direction, lat >= 0 s}
 *   gemm_eff, attn_eff, mem_eff   [[size, eff], ...]: 1..HW_MAX_EFF_POINTS
 *                 points, size > 0 strictly ascending, eff in (0, 1]
 *   act_bytes_per_layer, cuda_context_bytes, nccl_buf_bytes   >= 0
 *   alloc_frag                                 in [0, 1)
 *   tp_overlap, dp_overlap, pp_overlap         in [0, 1]
 *   fail_per_gpu_hour, restart_s               >= 0
 *   ckpt_bw_per_node                           > 0
 *   kernel_lat, coll_lat     >= 0, optional (default 0)
 *   coll_eff                 in (0, 1], optional (default 1)
 *   sm_count, gemm_tile_m, gemm_tile_n >= 0, optional (default 0: no wave quantization)
 *   eff_ref_peak, eff_ref_hbm_bw  >= 0, optional (default 0: the curves' sizes are
 *                 stated for this GPU); else the bf16 FLOP/s and HBM bytes/s of the
 *                 GPU they are stated for, read here at equal duration (model/timing.c)
 *   compute_capability  >= 0, optional (default 0: not known, nothing checked); else the
 *                 CUDA compute capability (8.0, 9.0, 10.0, 10.3), which the fp8 recipes
 *                 are checked against (model/layout.c: mxfp8 needs 10.0, blockwise 9.0)
 *   stack         string, optional: the builtin software stack (profiles/stacks.h)
 *                 the profile was written under. Its scaled curves are the file's;
 *                 the fields it sets outright (zero3, ce_fused, pp_p2p_serial,
 *                 rc_early_stop) are not written but re-applied from the stack on read.
 *
 * Every number besides fractions and gpus_per_node also lies in
 * [1e-12, 1e30] where it is not 0, so that no cost the model derives from a
 * profile can overflow or turn NaN.
 *
 * All functions return 0 on success or -1 with err filled (one line).
 */
#ifndef ULTRAPLAN_PROFILES_PROFILE_H
#define ULTRAPLAN_PROFILES_PROFILE_H

#include "hw.h"

#define PROFILE_FORMAT "ultraplan.profile/1"

/* A builtin by name ("h100-sxm") or alias ("h100", "a100" = a100-80g,
 * "A100-80GB"); case-insensitive. */
int profile_load_builtin(const char *name, HwProfile *out, char *err, int errlen);

int profile_load_file(const char *path, HwProfile *out, char *err, int errlen);

/* Parse JSON text; origin names it in errors (a path or "h100-sxm.json"). */
int profile_parse_json(const char *text, const char *origin, HwProfile *out,
                       char *err, int errlen);

/* Write atomically: a temp file beside path, fsync, rename over path. */
int profile_write_json(const HwProfile *hw, const char *path, char *err, int errlen);

/* The profile as JSON text (no _src fields); malloc'd, caller frees.
 * NULL only when out of memory. */
char *profile_to_json(const HwProfile *hw);

int profile_builtin_count(void);
const char *profile_builtin_name(int i);   // NULL when i is out of range

#endif
