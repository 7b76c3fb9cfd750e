/* gather.cl: row gather of 32-bit words by an index array (kern_gather_rows), used to build
 * shuffled mini-batches of features (float) and labels (int32 or float) on the device. Words are
 * moved as uint, so the bits of any 32-bit type pass through unchanged.
 *
 * One work-item per destination word, on a 2-D range (columns, rows): no division per word, and
 * a row segment is read contiguously. src_rows is the number of whole rows the source buffer
 * holds (the host derives it from the buffer's size): an index outside [0, src_rows) is never
 * read through; its destination row is filled with zeros instead. */

__kernel void gather_rows(int rows, int cols, __global const uint *src, int src_rows,
                          __global const int *idx, int start, __global uint *dst)
{
    int c = get_global_id(0), r = get_global_id(1);
    if (c >= cols || r >= rows)
        return;
    int s = idx[start + r];
    dst[r * cols + c] = s >= 0 && s < src_rows ? src[(size_t)s * cols + c] : 0u;
}
