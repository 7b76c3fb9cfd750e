/* loss.cl: the output losses with their gradients, fused: softmax + sparse categorical
 * cross-entropy, sigmoid + binary cross-entropy, mean squared error.
 *
 * One work-item per row: the rows of a batch are independent and class counts are small (the
 * trainer's output layers), so a row is a short serial loop and no local memory is needed.
 * Optional gradient outputs come with an explicit has_* flag, so no kernel relies on comparing a
 * NULL buffer argument with 0. The gradient may be written over its input (dlogits = logits,
 * dpred = pred): each element is read before it is written by the same work-item.
 *
 * Numerics: softmax subtracts the row maximum before exp, so exp never overflows and the
 * loss is log Σ exp(z − max) − (z[label] − max). BCE uses max(z,0) − z·y + log1p(exp(−|z|)),
 * finite for any finite z. A label outside [0, cols) is never used as an index (see kernels.h). */

#define LOSS_BAD_LABEL 87.33654475f /* −ln(FLT_MIN): the loss of a probability of FLT_MIN */

__kernel void loss_softmax_xent(int rows, int cols, __global const float *logits,
                                __global const int *labels, float scale, int has_dlogits,
                                __global float *dlogits, __global float *loss,
                                __global float *correct)
{
    int r = get_global_id(0);
    if (r >= rows)
        return;
    int base = r * cols;
    int best = 0;
    float zmax = logits[base];
    for (int c = 1; c < cols; c++) {
        float z = logits[base + c];
        if (z > zmax) { /* strictly greater: ties keep the first maximum */
            zmax = z;
            best = c;
        }
    }
    float sum = 0.0f;
    for (int c = 0; c < cols; c++)
        sum += exp(logits[base + c] - zmax);
    int label = labels[r];
    int valid = label >= 0 && label < cols;
    loss[r] = valid ? log(sum) - (logits[base + label] - zmax) : LOSS_BAD_LABEL;
    correct[r] = valid && best == label ? 1.0f : 0.0f;
    if (!has_dlogits)
        return;
    float k = valid ? scale / sum : 0.0f;
    float kl = valid ? scale : 0.0f;
    for (int c = 0; c < cols; c++) {
        float p = exp(logits[base + c] - zmax) * k;
        dlogits[base + c] = c == label ? p - kl : p;
    }
}

__kernel void loss_bce(int rows, __global const float *logits, __global const float *labels,
                       float scale, int has_dlogits, __global float *dlogits,
                       __global float *loss, __global float *correct)
{
    int r = get_global_id(0);
    if (r >= rows)
        return;
    float z = logits[r], y = labels[r];
    float e = exp(-fabs(z)); /* in (0, 1]: never overflows */
    loss[r] = fmax(z, 0.0f) - z * y + log1p(e);
    correct[r] = (z > 0.0f) == (y > 0.5f) ? 1.0f : 0.0f;
    if (has_dlogits) {
        float sig = z >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);
        dlogits[r] = (sig - y) * scale;
    }
}

/* k2 = 2·scale/cols, computed once on the host. */
__kernel void loss_mse(int rows, int cols, __global const float *pred,
                       __global const float *target, float k2, int has_dpred,
                       __global float *dpred, __global float *loss)
{
    int r = get_global_id(0);
    if (r >= rows)
        return;
    int base = r * cols;
    float s = 0.0f;
    for (int c = 0; c < cols; c++) {
        float d = pred[base + c] - target[base + c];
        s += d * d;
        if (has_dpred)
            dpred[base + c] = d * k2;
    }
    loss[r] = s / (float)cols;
}
