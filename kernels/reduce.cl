/* reduce.cl: the sum of n floats into one element of a buffer (kern_reduce_sum).
 *
 * Two passes, no atomics, so the result is the same bits on every run for a given n and local
 * size. reduce_sum_part: work-group g owns x[g·chunk, (g+1)·chunk); each work-item adds every
 * local-size-th element of it (chunk / local size values, coalesced), then the work-group adds
 * its items as a tree and writes part[g]. reduce_sum_final: one work-group does the same over
 * the partial sums and stores (or adds into) out[index]. Short inputs skip the first pass: the
 * final kernel runs directly on x. The rounding error grows with the serial length per work-item
 * (a few dozen) plus two tree depths, instead of with n as one long float sum would. */

__kernel void reduce_sum_part(int n, int chunk, __global const float *x, __global float *part,
                              __local float *s)
{
    int lid = get_local_id(0), lsz = get_local_size(0), g = get_group_id(0);
    int i0 = g * chunk;
    int i1 = n - i0 < chunk ? n : i0 + chunk;
    float acc = 0.0f;
    for (int i = i0 + lid; i < i1; i += lsz)
        acc += x[i];
    s[lid] = acc;
    common_local_sum(s, lid, lsz);
    if (lid == 0)
        part[g] = s[0];
}

/* Run as a single work-group. n may be 0: out[index] = 0 (or is left as it was). */
__kernel void reduce_sum_final(int n, __global const float *x, __global float *out, int index,
                               int accumulate, __local float *s)
{
    int lid = get_local_id(0), lsz = get_local_size(0);
    float acc = 0.0f;
    for (int i = lid; i < n; i += lsz)
        acc += x[i];
    s[lid] = acc;
    common_local_sum(s, lid, lsz);
    if (lid == 0)
        out[index] = accumulate ? out[index] + s[0] : s[0];
}
