/* model_step: the enqueue sequence of a training step, of evaluation and of a forward pass,
 * and the totals they sum into (see model.h for the shape of the whole).
 *
 * A step for layers L0..Ln (Ln the output layer) enqueues:
 *   forward   dense: gemm NN (y = x·W) + bias_act_fwd; conv2d: conv2d_fwd + bias_act_fwd (skipped
 *             when there is neither bias nor activation, and moved after the pool when a max
 *             pool follows: 4× fewer elements for a 2×2 pool, the same numbers); a conv before
 *             a 2×2 stride-2 valid max pool on the direct conv path (fuse_pool): one
 *             conv2d_fwd_maxpool_act writes the pool's y and argmax with the bias and activation
 *             applied, and the pool enqueues nothing; pools: pool2d_fwd (max records its argmax
 *             while training); batchnorm: batchnorm_fwd_train (batch statistics, moving
 *             statistics updated) or _infer; dropout: dropout; flatten: nothing
 *   loss      softmax_xent | bce | mse, then two reduce_sum into the totals
 *   backward  last to first: dense: bias_act_bwd (dZ, db), gemm TN (dW = xᵀ·dZ) and gemm NT
 *             (dx = dZ·Wᵀ); conv2d: bias_act_bwd, conv2d_bwd_weights and conv2d_bwd_data; pools:
 *             pool2d_bwd, except after a fused conv that is the first layer with parameters:
 *             its conv2d_bwd_weights_maxpool reads the pool's dy and argmax; batchnorm:
 *             batchnorm_bwd (dx in place, dgamma, dbeta); dropout: dropout on dy in place.
 *             Backward stops at the first layer with parameters, which computes no dx:
 *             nothing reads it (a leading pool costs nothing).
 *   update    one sgd or adam over the whole parameter buffer (not the stats buffer)
 * Nothing in a step reads back from the device. Each layer remembers the buffers its last
 * forward read and wrote (x_cur, y_cur): flatten, and dropout outside training, pass their
 * input through, so "the previous layer's output" is not always a buffer of its own. */
#include "model/model_priv.h"

#include <math.h>

#include "util/err.h"

static int kfail(model *m, char *err)
{
    err_set(err, -EIO, "%s", kern_last_error(m->k));
    return -EIO; /* a constant the compiler sees: callers' outputs are set whenever this is not */
}

/* The stream offset of a dropout layer for the current step: distinct per step and layer, laid
 * out for capacity rows, of which this step's start at row m->row0 (a data-parallel rank's
 * share of a batch draws the masks the whole batch would). */
static uint64_t dropout_offset(const model *m, size_t layer)
{
    uint64_t at = ((uint64_t)m->step * (JOB_MAX_LAYERS + 1) + layer) * (uint64_t)m->capacity;
    return (at + (uint64_t)m->row0) * (uint64_t)m->layers[layer].out;
}

static int bias_act_needed(const model_layer *l)
{
    return l->use_bias || l->act != KERN_ACT_LINEAR;
}

/* The conv layer whose bias and activation the max pool i applies (after pooling), or NULL. */
static const model_layer *deferred_from(const model *m, size_t i)
{
    return i > 0 && m->layers[i - 1].defer ? &m->layers[i - 1] : NULL;
}

/* Bias and activation of a conv layer over rows·h·w rows of y (conv->oc columns). */
static int conv_bias_act_fwd(model *m, const model_layer *conv, int rows, cl_mem y)
{
    return kern_bias_act_fwd(m->k, rows, conv->oc, conv->act, y,
                             conv->use_bias ? conv->b : m->zeros);
}

static int conv_bias_act_bwd(model *m, const model_layer *conv, int rows, cl_mem y, cl_mem dy)
{
    return kern_bias_act_bwd(m->k, rows, conv->oc, conv->act, y, dy,
                             conv->use_bias ? conv->gb : m->discard);
}

/* One layer's forward from x; *y is what it leaves for the next layer. */
static int layer_forward(model *m, size_t i, int rows, cl_mem x, int train, cl_mem *y)
{
    kern *k = m->k;
    model_layer *l = &m->layers[i];
    int rc = 0, spatial_rows = rows * l->oh * l->ow;
    *y = l->y;
    switch (l->type) {
    case JOB_LAYER_DENSE:
        rc = kern_gemm(k, 0, 0, rows, l->out, l->in, 1.0f, x, l->in, l->w, l->out, 0.0f, l->y,
                       l->out);
        if (rc == 0)
            rc = kern_bias_act_fwd(k, rows, l->out, l->act, l->y, l->b);
        break;
    case JOB_LAYER_CONV2D: {
        kern_conv g;
        model_conv_geom(l, rows, &g);
        if (l->fuse_pool) {
            /* the pool's output and argmax straight from the conv, with the bias and activation
             * the conv defers to the pool: the pool has nothing left to do */
            model_layer *p = &m->layers[i + 1];
            return kern_conv2d_fwd_maxpool_act(k, &g, x, l->w, p->y, train ? p->argmax : NULL,
                                               l->defer ? l->act : -1,
                                               l->use_bias ? l->b : m->zeros, m->work);
        }
        rc = kern_conv2d_fwd(k, &g, x, l->w, l->y, m->work);
        if (rc == 0 && bias_act_needed(l) && !l->defer)
            rc = conv_bias_act_fwd(m, l, spatial_rows, l->y);
        break;
    }
    case JOB_LAYER_MAXPOOL2D:
    case JOB_LAYER_AVGPOOL2D:
    case JOB_LAYER_GLOBAL_AVGPOOL2D: {
        kern_pool g;
        model_pool_geom(l, rows, &g);
        int max = l->type == JOB_LAYER_MAXPOOL2D;
        if (i > 0 && m->layers[i - 1].fuse_pool)
            break; /* the conv wrote y and argmax, and applied its bias and activation */
        rc = kern_pool2d_fwd(k, max ? KERN_POOL_MAX : KERN_POOL_AVG, &g, x, l->y,
                             max && train ? l->argmax : NULL);
        if (rc == 0 && deferred_from(m, i))
            rc = conv_bias_act_fwd(m, deferred_from(m, i), spatial_rows, l->y);
        break;
    }
    case JOB_LAYER_BATCHNORM:
        if (train)
            rc = kern_batchnorm_fwd_train(k, spatial_rows, l->oc, l->bn_momentum, l->bn_eps, x,
                                          l->w, l->b, l->mmean, l->mvar, l->save_mean,
                                          l->save_invstd, l->y);
        else
            rc = kern_batchnorm_fwd_infer(k, spatial_rows, l->oc, l->bn_eps, x, l->w, l->b,
                                          l->mmean, l->mvar, l->y);
        break;
    case JOB_LAYER_DROPOUT:
        if (train && l->rate > 0.0f)
            rc = kern_dropout(k, rows * l->out, l->rate, m->seed, dropout_offset(m, i), x, l->y);
        else
            *y = x; /* dropout is the identity outside training */
        break;
    default:
        *y = x; /* flatten: NHWC rows already are (h, w, c)-ordered features */
        break;
    }
    return rc;
}

/* Forward over rows of x; train enables dropout and batch statistics. *out is the output
 * layer's buffer. */
static int forward(model *m, int rows, cl_mem x, int train, cl_mem *out, char *err)
{
    cl_mem cur = x;
    for (size_t i = 0; i < m->n_layers; i++) {
        model_layer *l = &m->layers[i];
        l->x_cur = cur;
        if (layer_forward(m, i, rows, cur, train, &cur) < 0)
            return kfail(m, err);
        l->y_cur = cur;
    }
    *out = cur;
    return 0;
}

/* Loss over rows: per-row loss and correct flags, gradient into dlogits when not NULL, sums
 * added to totals[loss_at] and totals[loss_at + 1]. */
/* The loss gradient is scaled by 1/of_rows: the mean over a batch of that many rows, of which
 * these rows are a share (of_rows = rows but in a data-parallel step). */
static int loss(model *m, int rows, int of_rows, cl_mem logits, cl_mem targets, cl_mem dlogits,
                int loss_at, char *err)
{
    kern *k = m->k;
    float scale = 1.0f / (float)of_rows;
    int rc;
    if (m->loss == MODEL_LOSS_SOFTMAX_XENT)
        rc = kern_softmax_xent(k, rows, m->outputs, logits, targets, scale, dlogits, m->loss_rows,
                               m->correct_rows);
    else if (m->loss == MODEL_LOSS_BCE)
        rc = kern_bce(k, rows, logits, targets, scale, dlogits, m->loss_rows, m->correct_rows);
    else
        rc = kern_mse(k, rows, m->outputs, logits, targets, scale, dlogits, m->loss_rows);
    if (rc == 0)
        rc = kern_reduce_sum(k, rows, m->loss_rows, m->totals, loss_at, !m->fresh[loss_at]);
    if (rc == 0 && m->loss != MODEL_LOSS_MSE)
        rc = kern_reduce_sum(k, rows, m->correct_rows, m->totals, loss_at + 1,
                             !m->fresh[loss_at + 1]);
    m->fresh[loss_at] = m->fresh[loss_at + 1] = 0;
    return rc < 0 ? kfail(m, err) : 0;
}

void model_row_probabilities(int loss, float *row, int k)
{
    if (loss == MODEL_LOSS_BCE) {
        row[0] = (float)(1.0 / (1.0 + exp(-(double)row[0])));
    } else if (loss == MODEL_LOSS_SOFTMAX_XENT) {
        double top = row[0], sum = 0;
        for (int j = 1; j < k; j++)
            top = row[j] > top ? row[j] : top;
        for (int j = 0; j < k; j++)
            sum += exp((double)row[j] - top);
        for (int j = 0; j < k; j++)
            row[j] = (float)(exp((double)row[j] - top) / sum);
    }
}

/* Whether conv layer i takes its weight gradient straight from the max pool's dy and argmax
 * after it (kern_conv2d_bwd_weights_maxpool), so that the pool writes no conv-sized dx: the
 * forward was fused, and the conv is the first layer with parameters (it needs no dx of its
 * own, which would want the whole dy). */
static int bwd_through_pool(const model *m, size_t i)
{
    return m->layers[i].fuse_pool && i == m->first_param;
}

/* One layer's backward: dy (the gradient of its output) in, its parameters' gradients out, and
 * the gradient of its input into dx, or into dy itself (*moved 0) for the layers that work in
 * place. The first layer with parameters computes no input gradient: nobody reads it. */
static int layer_backward(model *m, size_t n, int rows, cl_mem dy, cl_mem dx, int *moved)
{
    kern *k = m->k;
    model_layer *l = &m->layers[n];
    int rc = 0, first = n == m->first_param, spatial_rows = rows * l->oh * l->ow;
    *moved = 0;
    switch (l->type) {
    case JOB_LAYER_DENSE:
        rc = kern_bias_act_bwd(k, rows, l->out, l->act, l->y, dy, l->gb);
        if (rc == 0)
            rc = kern_gemm(k, 1, 0, l->in, l->out, rows, 1.0f, l->x_cur, l->in, dy, l->out, 0.0f,
                           l->gw, l->out);
        if (rc == 0 && !first) {
            rc = kern_gemm(k, 0, 1, rows, l->in, l->out, 1.0f, dy, l->out, l->w, l->out, 0.0f, dx,
                           l->in);
            *moved = 1;
        }
        break;
    case JOB_LAYER_CONV2D: {
        kern_conv g;
        model_conv_geom(l, rows, &g);
        if (bias_act_needed(l) && !l->defer)
            rc = conv_bias_act_bwd(m, l, spatial_rows, l->y, dy);
        if (rc == 0 && bwd_through_pool(m, n))
            return kern_conv2d_bwd_weights_maxpool(k, &g, l->x_cur, dy, m->layers[n + 1].argmax,
                                                   l->gw, 0, m->work);
        if (rc == 0)
            rc = kern_conv2d_bwd_weights(k, &g, l->x_cur, dy, l->gw, 0, m->work);
        if (rc == 0 && !first) {
            rc = kern_conv2d_bwd_data(k, &g, dy, l->w, dx, m->work);
            *moved = 1;
        }
        break;
    }
    case JOB_LAYER_MAXPOOL2D:
    case JOB_LAYER_AVGPOOL2D:
    case JOB_LAYER_GLOBAL_AVGPOOL2D: {
        kern_pool g;
        model_pool_geom(l, rows, &g);
        int mode = l->type == JOB_LAYER_MAXPOOL2D ? KERN_POOL_MAX : KERN_POOL_AVG;
        if (deferred_from(m, n))
            rc = conv_bias_act_bwd(m, deferred_from(m, n), spatial_rows, l->y, dy);
        if (rc == 0 && !first && !(n > 0 && bwd_through_pool(m, n - 1))) {
            rc = kern_pool2d_bwd(k, mode, &g, dy, mode == KERN_POOL_MAX ? l->argmax : NULL, dx);
            *moved = 1;
        }
        break;
    }
    case JOB_LAYER_BATCHNORM:
        rc = kern_batchnorm_bwd(k, spatial_rows, l->oc, l->x_cur, dy, l->w, l->save_mean,
                                l->save_invstd, dy, l->gw, l->gb);
        break;
    case JOB_LAYER_DROPOUT:
        if (l->rate > 0.0f && !first)
            rc = kern_dropout(k, rows * l->out, l->rate, m->seed, dropout_offset(m, n), dy, dy);
        break;
    default:
        break; /* flatten: the gradient is already in the input's layout */
    }
    return rc;
}

static int backward(model *m, int rows, char *err)
{
    int cur = 0; /* dbuf[cur] holds the gradient of the current layer's output */
    for (size_t n = m->n_layers; n-- > m->first_param;) {
        int moved = 0;
        if (layer_backward(m, n, rows, m->dbuf[cur], m->dbuf[1 - cur], &moved) < 0)
            return kfail(m, err);
        if (moved)
            cur = 1 - cur;
    }
    return 0;
}

int model_update(model *m, char *err)
{
    int n = (int)m->n_params;
    int rc;
    m->step++;
    if (m->optimizer == JOB_OPT_SGD) {
        rc = kern_sgd(m->k, n, m->lr, m->momentum, m->params, m->grads,
                      m->momentum > 0.0f ? m->moment1 : NULL);
    } else {
        float bc1 = 1.0f - (float)pow(m->beta1, (double)m->step);
        float bc2 = 1.0f - (float)pow(m->beta2, (double)m->step);
        rc = kern_adam(m->k, n, m->lr, m->beta1, m->beta2, m->eps, bc1, bc2, m->params, m->grads,
                       m->moment1, m->moment2);
    }
    return rc < 0 ? kfail(m, err) : 0;
}

static int check_rows(const model *m, int rows, char *err)
{
    if (rows < 1 || rows > m->capacity)
        return err_set(err, -EINVAL, "%d rows do not fit the model's batches (1..%d)", rows,
                       m->capacity);
    return 0;
}

int model_backprop_share(model *m, int rows, int of_rows, int row0, cl_mem x, cl_mem targets,
                         char *err)
{
    cl_mem logits;
    int rc = model_check_training(m, err);
    if (rc == 0)
        rc = check_rows(m, rows, err);
    if (rc == 0 && (row0 < 0 || of_rows < rows || row0 > of_rows - rows || of_rows > m->capacity))
        rc = err_set(err, -EINVAL, "rows %d..%d are not a share of a batch of %d (capacity %d)",
                     row0, row0 + rows, of_rows, m->capacity);
    if (rc < 0)
        return rc;
    m->row0 = row0;
    rc = forward(m, rows, x, 1, &logits, err);
    /* The loss gradient goes straight into the first ping-pong buffer that backward reads. */
    if (rc == 0)
        rc = loss(m, rows, of_rows, logits, targets, m->dbuf[0], MODEL_TRAIN_LOSS, err);
    if (rc == 0)
        rc = backward(m, rows, err);
    m->row0 = 0;
    return rc;
}

int model_backprop(model *m, int rows, cl_mem x, cl_mem targets, char *err)
{
    return model_backprop_share(m, rows, rows, 0, x, targets, err);
}

int model_train_step(model *m, int rows, cl_mem x, cl_mem targets, char *err)
{
    int rc = model_backprop(m, rows, x, targets, err);
    if (rc == 0)
        rc = model_update(m, err);
    return rc;
}

int model_evaluate(model *m, int rows, cl_mem x, cl_mem targets, char *err)
{
    cl_mem logits;
    int rc = model_check_training(m, err);
    if (rc == 0)
        rc = check_rows(m, rows, err);
    if (rc < 0)
        return rc;
    rc = forward(m, rows, x, 0, &logits, err);
    if (rc < 0)
        return rc;
    return loss(m, rows, rows, logits, targets, NULL, MODEL_VAL_LOSS, err);
}

int model_forward(model *m, int rows, cl_mem x, cl_mem *out, char *err)
{
    int rc = check_rows(m, rows, err);
    if (rc == 0)
        rc = forward(m, rows, x, 0, out, err);
    return rc;
}

int model_reset_totals(model *m, char *err)
{
    (void)err;
    for (int i = 0; i < MODEL_TOTALS; i++)
        m->fresh[i] = 1;
    return 0;
}

int model_read_totals(model *m, double t[MODEL_TOTALS], char *err)
{
    if (model_check_training(m, err) < 0)
        return -EINVAL;
    float host[MODEL_TOTALS];
    int rc = ocl_read(m->c, m->totals, 0, sizeof host, host, err);
    if (rc < 0)
        return rc;
    for (int i = 0; i < MODEL_TOTALS; i++)
        t[i] = m->fresh[i] ? 0.0 : host[i]; /* nothing summed into it since the reset */
    return 0;
}
