/* dropout.cl: inverted dropout drawn from a counter-based random stream (kern_dropout).
 *
 * The stream is stateless: element i draws uniform(seed, offset + i), a pure function, so no
 * generator state lives on the device, any element can be drawn alone, and the backward pass
 * re-draws the same mask by repeating the call on dY. The function (ref_uniform in kernels/ref.c
 * is its host twin and must stay bit-identical):
 *
 *     mix64(z):  z ^= z >> 30; z *= 0xbf58476d1ce4e5b9; z ^= z >> 27; z *= 0x94d049bb133111eb;
 *                z ^= z >> 31                        (the splitmix64 finaliser)
 *     x    = mix64(mix64(seed) + (counter + 1) · 0x9e3779b97f4a7c15)   (mod 2^64)
 *     bits = high 32 bits of x;  uniform = (bits >> 8) · 2^-24  ∈ [0, 1), exact in float
 *
 * i.e. the counter-th output of splitmix64 started from the state mix64(seed) (common_uniform in
 * common.cl, shared with the image augmentation). Only integer
 * operations and one exact int→float conversion are involved, so every device gives the same
 * bits. The element is kept when uniform ≥ rate and scaled by `scale` = 1/(1 − rate), which the
 * host computes in float (0 when rate ≥ 1, 1 when rate ≤ 0). */

/* key = mix64(seed), computed here rather than on the host so that the formula lives in one
 * place per side. x and y may be the same buffer. */
__kernel void dropout_fwd(int n, float rate, float scale, ulong seed, ulong offset,
                          __global const float *x, __global float *y)
{
    int i = get_global_id(0);
    if (i >= n)
        return;
    float u = common_uniform(common_mix64(seed), offset + (ulong)i);
    y[i] = u >= rate ? x[i] * scale : 0.0f;
}
