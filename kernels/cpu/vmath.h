/* vmath.h — exp over arrays for the kernels in this folder (not part of the
 * kernels.h contract). libm's expf is a scalar call that no loop around it
 * can vectorise; the softmax, cross-entropy and GELU loops were bound by it. */
#ifndef ULTRAPLAN_KERNELS_CPU_VMATH_H
#define ULTRAPLAN_KERNELS_CPU_VMATH_H

/* y[i] = exp(x[i]) for n elements, relative error below 3e-7; inputs are
 * clamped to [-87, 88], so exp of a very negative x is ~1e-38, not 0.
 * y may alias x. */
void vm_exp(float *y, const float *x, int n);

#endif
