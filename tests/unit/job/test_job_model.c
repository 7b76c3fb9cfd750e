/* Unit tests of job/job_model: image datasets and convolutional models in the job document —
 * the seed CNN and a network of every layer with its defaults and inferred shapes, the shape
 * rule (job_conv_out), every refused document with the field it names, and round trips of the
 * resolved documents. */
#include "job/job.h"

#include <limits.h>
#include <stdlib.h>

#include "tests/unit/check.h"
#include "tests/unit/job/job_check.h"

#define URL "\"dataset_url\": \"https://data.example/cifar-10-binary.tar.gz\""
/* A document on format fmt with dataset members ds, model members model. */
#define IMG(fmt, ds, model)                                                                        \
    "{" URL ", \"hyperparameters\": {}, \"dataset\": {\"format\": \"" fmt "\"" ds "},"             \
    " \"model\": {" model "}}"
/* A model on 7×7×3 npz images with the given layers. */
#define NPZ(layers) IMG("npz", "", "\"input_shape\": [7, 7, 3], \"layers\": [" layers "]")
#define CONV(f, k)  "{\"type\": \"conv2d\", \"filters\": " #f ", \"kernel_size\": " k "}"
#define FLAT        "{\"type\": \"flatten\"}"
/* An 8×8×3 model on format fmt with dataset members ds. */
#define IMG8(fmt, ds) IMG(fmt, ds, "\"input_shape\": [8, 8, 3], \"layers\": [" FLAT "]")

/* The issue's seed: CIFAR-10 resized to 64×64, Conv2D(32, 3×3, relu) → MaxPooling2D(2×2) →
 * Flatten → Dense(10, softmax). */
static const char *seed_doc =
    "{\"name\": \"cifar10-cnn\", " URL ",\n"
    " \"dataset\": {\"format\": \"cifar10\", \"resize\": [64, 64]},\n"
    " \"model\": {\"input_shape\": [64, 64, 3], \"layers\": [\n"
    "   {\"type\": \"conv2d\", \"filters\": 32, \"kernel_size\": 3, \"activation\": \"relu\"},\n"
    "   {\"type\": \"maxpool2d\", \"pool_size\": 2},\n"
    "   {\"type\": \"flatten\"},\n"
    "   {\"type\": \"dense\", \"units\": 10, \"activation\": \"softmax\"}]},\n"
    " \"hyperparameters\": {\"epochs\": 10, \"batch_size\": 32, \"optimizer\": \"adam\"}}";

/* Every other layer and option: stride 2 and same padding on an odd size, batchnorm after a
 * conv and after a dense layer, average pooling with same padding, a 1×3 kernel, a 2×3 window
 * with stride 1, dropout on a map, global average pooling; the output follows from the task. */
static const char *net_doc =
    "{" URL ", \"hyperparameters\": {},\n"
    " \"dataset\": {\"format\": \"images\", \"scale\": \"standardize\",\n"
    "             \"augment\": {\"flip\": true, \"crop_padding\": 4}},\n"
    " \"model\": {\"input_shape\": [33, 33, 3], \"layers\": [\n"
    "   {\"type\": \"conv2d\", \"filters\": 16, \"kernel_size\": [3, 3], \"strides\": 2,\n"
    "    \"padding\": \"same\", \"use_bias\": false},\n"
    "   {\"type\": \"batchnorm\"},\n"
    "   {\"type\": \"avgpool2d\", \"pool_size\": 3, \"strides\": [2, 2], \"padding\": \"same\"},\n"
    "   {\"type\": \"conv2d\", \"filters\": 8, \"kernel_size\": [1, 3], \"activation\": "
    "\"tanh\"},\n"
    "   {\"type\": \"maxpool2d\", \"pool_size\": [2, 3], \"strides\": 1},\n"
    "   {\"type\": \"dropout\", \"rate\": 0.25},\n"
    "   {\"type\": \"global_avgpool2d\"},\n"
    "   {\"type\": \"dense\", \"units\": 4},\n"
    "   {\"type\": \"batchnorm\", \"momentum\": 0.9, \"epsilon\": 1e-5}]}}";

static void check_shape(const job_layer *l, int h, int w, int c, int line)
{
    if (l->out_h != h || l->out_w != w || l->out_c != c) {
        fprintf(stderr, "test_job_model.c:%d: shape %d×%d×%d, expected %d×%d×%d\n", line, l->out_h,
                l->out_w, l->out_c, h, w, c);
        check_failures++;
    }
}
#define CHECK_SHAPE(l, h, w, c) check_shape(l, h, w, c, __LINE__)

static void test_seed(void)
{
    job_spec *s = parse_ok(seed_doc);
    if (!s)
        return;
    CHECK_INT(s->format, JOB_FORMAT_CIFAR10);
    CHECK_INT(s->resize_h, 64);
    CHECK_INT(s->resize_w, 64);
    CHECK_INT(s->scale, JOB_SCALE_UNIT);
    CHECK_INT(s->augment_flip, 0);
    CHECK_INT(s->augment_crop, 0);
    CHECK_INT(s->in_h, 64);
    CHECK_INT(s->in_w, 64);
    CHECK_INT(s->in_c, 3);
    CHECK_INT(s->n_layers, 3);
    CHECK_INT(s->output_given, 1);
    CHECK_INT(s->output_units, 10);
    const job_layer *conv = &s->layers[0], *pool = &s->layers[1];
    CHECK_INT(conv->type, JOB_LAYER_CONV2D);
    CHECK_INT(conv->filters, 32);
    CHECK_INT(conv->kh, 3);
    CHECK_INT(conv->kw, 3);
    CHECK_INT(conv->sh, 1);
    CHECK_INT(conv->sw, 1);
    CHECK_INT(conv->padding, JOB_PAD_VALID);
    CHECK_INT(conv->use_bias, 1);
    CHECK_INT(conv->activation, JOB_ACT_RELU);
    CHECK_SHAPE(conv, 62, 62, 32);
    CHECK_INT(pool->type, JOB_LAYER_MAXPOOL2D);
    CHECK_INT(pool->kh, 2);
    CHECK_INT(pool->kw, 2);
    CHECK_INT(pool->sh, 2); /* strides default to the window */
    CHECK_INT(pool->sw, 2);
    CHECK_INT(pool->padding, JOB_PAD_VALID);
    CHECK_SHAPE(pool, 31, 31, 32);
    CHECK_INT(s->layers[2].type, JOB_LAYER_FLATTEN);
    CHECK_SHAPE(&s->layers[2], 1, 1, 31 * 31 * 32);
    const job_layer *out = &s->layers[3];
    CHECK_INT(out->type, JOB_LAYER_DENSE);
    CHECK_INT(out->units, 10);
    CHECK_INT(out->activation, JOB_ACT_SOFTMAX);
    CHECK_SHAPE(out, 1, 1, 10);
    CHECK_INT(job_layer_is_spatial(s, 0), 1);
    CHECK_INT(job_layer_is_spatial(s, 1), 1);
    CHECK_INT(job_layer_is_spatial(s, 2), 0);
    CHECK_INT(job_layer_is_spatial(s, 3), 0); /* the output layer */
    CHECK_INT(job_layer_is_spatial(NULL, 0), 0);
    job_free(s);

    /* Without resize, CIFAR-10's own 32×32; conv2d's activation defaults to linear. */
    s = parse_ok(IMG("cifar10", "",
                     "\"input_shape\": [32, 32, 3], \"layers\": [" CONV(
                         4, "3") ", "
                                 "{\"type\": \"global_avgpool2d\"}]"));
    if (s) {
        CHECK_INT(s->layers[0].activation, JOB_ACT_LINEAR);
        CHECK_SHAPE(&s->layers[0], 30, 30, 4);
        CHECK_SHAPE(&s->layers[1], 1, 1, 4);
        CHECK_INT(s->output_given, 0);
        CHECK_INT(s->output_units, 0);
    }
    job_free(s);
    /* MNIST is 28×28×1; npy takes any size. */
    s = parse_ok(IMG("mnist", "", "\"input_shape\": [28, 28, 1], \"layers\": [" FLAT "]"));
    if (s)
        CHECK_SHAPE(&s->layers[0], 1, 1, 784);
    job_free(s);
    s = parse_ok(IMG("npy", ", \"resize\": [20, 10]",
                     "\"input_shape\": [20, 10, 2], \"layers\": [" FLAT "]"));
    if (s)
        CHECK_SHAPE(&s->layers[0], 1, 1, 400);
    job_free(s);
}

static void test_network(void)
{
    job_spec *s = parse_ok(net_doc);
    if (!s)
        return;
    CHECK_INT(s->format, JOB_FORMAT_IMAGES);
    CHECK_INT(s->scale, JOB_SCALE_STANDARDIZE);
    CHECK_INT(s->augment_flip, 1);
    CHECK_INT(s->augment_crop, 4);
    CHECK_INT(s->resize_h, 0);
    CHECK_INT(s->n_layers, 9);
    CHECK_INT(s->output_given, 0);
    const job_layer *l = s->layers;
    CHECK_INT(l[0].sh, 2);
    CHECK_INT(l[0].sw, 2);
    CHECK_INT(l[0].padding, JOB_PAD_SAME);
    CHECK_INT(l[0].use_bias, 0);
    CHECK_SHAPE(&l[0], 17, 17, 16); /* ceil(33 / 2) */
    CHECK_INT(l[1].type, JOB_LAYER_BATCHNORM);
    CHECK_NEAR(l[1].bn_momentum, 0.99, 0);
    CHECK_NEAR(l[1].bn_epsilon, 0.001, 0);
    CHECK_SHAPE(&l[1], 17, 17, 16);
    CHECK_INT(l[2].type, JOB_LAYER_AVGPOOL2D);
    CHECK_SHAPE(&l[2], 9, 9, 16);
    CHECK_INT(l[3].kh, 1);
    CHECK_INT(l[3].kw, 3);
    CHECK_INT(l[3].activation, JOB_ACT_TANH);
    CHECK_SHAPE(&l[3], 9, 7, 8);
    CHECK_INT(l[4].sh, 1);
    CHECK_INT(l[4].sw, 1);
    CHECK_SHAPE(&l[4], 8, 5, 8);
    CHECK_SHAPE(&l[5], 8, 5, 8);
    CHECK_SHAPE(&l[6], 1, 1, 8);
    CHECK_INT(l[7].activation, JOB_ACT_RELU);
    CHECK_SHAPE(&l[7], 1, 1, 4);
    CHECK_NEAR(l[8].bn_momentum, 0.9, 0);
    CHECK_NEAR(l[8].bn_epsilon, 1e-5, 0);
    CHECK_SHAPE(&l[8], 1, 1, 4);
    int spatial[] = {1, 1, 1, 1, 1, 1, 0, 0, 0};
    for (size_t i = 0; i < 9; i++)
        CHECK_INT(job_layer_is_spatial(s, i), spatial[i]);
    job_free(s);

    /* CSV: flat layers; a width that hangs on the data's columns is 0 until the worker reads
     * them. batchnorm takes a CSV row too. */
    s = parse_ok("{\"dataset_url\": \"http://h/x.csv\", \"hyperparameters\": {}, \"model\": "
                 "{\"layers\": [{\"type\": \"batchnorm\"}, {\"type\": \"dense\", \"units\": 5}, "
                 "{\"type\": \"dropout\", \"rate\": 0.5}]}}");
    if (s) {
        CHECK_INT(s->format, JOB_FORMAT_CSV);
        CHECK_INT(s->in_h, 0);
        CHECK_SHAPE(&s->layers[0], 1, 1, 0);
        CHECK_SHAPE(&s->layers[1], 1, 1, 5);
        CHECK_SHAPE(&s->layers[2], 1, 1, 5);
        CHECK_INT(job_layer_is_spatial(s, 0), 0);
    }
    job_free(s);

    /* A binary classifier may end with its sigmoid unit; without "binary" that layer is hidden. */
    const char *bin = "{\"dataset_url\": \"http://h/x.csv\", \"hyperparameters\": {}, %s"
                      "\"model\": {\"layers\": [{\"type\": \"dense\", \"units\": 8}, "
                      "{\"type\": \"dense\", \"units\": 1, \"activation\": \"sigmoid\"}]}}";
    char doc[512];
    snprintf(doc, sizeof doc, bin, "\"binary\": true, ");
    s = parse_ok(doc);
    if (s) {
        CHECK_INT(s->n_layers, 1);
        CHECK_INT(s->output_given, 1);
        CHECK_INT(s->output_units, 1);
        CHECK_INT(s->layers[1].activation, JOB_ACT_SIGMOID);
    }
    job_free(s);
    snprintf(doc, sizeof doc, bin, "");
    s = parse_ok(doc);
    if (s) {
        CHECK_INT(s->n_layers, 2);
        CHECK_INT(s->output_given, 0);
    }
    job_free(s);
}

static void test_conv_out(void)
{
    int pad = -1;
    CHECK_INT(job_conv_out(64, 3, 1, JOB_PAD_VALID, &pad), 62);
    CHECK_INT(pad, 0);
    CHECK_INT(job_conv_out(62, 2, 2, JOB_PAD_VALID, NULL), 31);
    CHECK_INT(job_conv_out(7, 2, 2, JOB_PAD_VALID, NULL), 3);
    CHECK_INT(job_conv_out(3, 5, 1, JOB_PAD_VALID, NULL), 0);
    CHECK_INT(job_conv_out(33, 3, 2, JOB_PAD_SAME, &pad), 17); /* pad 2: 1 before, 1 after */
    CHECK_INT(pad, 1);
    CHECK_INT(job_conv_out(4, 3, 2, JOB_PAD_SAME, &pad), 2); /* pad 1: 0 before, 1 after */
    CHECK_INT(pad, 0);
    CHECK_INT(job_conv_out(5, 4, 1, JOB_PAD_SAME, &pad), 5); /* pad 3: 1 before, 2 after */
    CHECK_INT(pad, 1);
    CHECK_INT(job_conv_out(6, 1, 4, JOB_PAD_SAME, &pad), 2); /* no padding needed */
    CHECK_INT(pad, 0);
    CHECK_INT(job_conv_out(1, 7, 1, JOB_PAD_SAME, &pad), 1);
    CHECK_INT(pad, 3);
    CHECK_INT(job_conv_out(0, 1, 1, JOB_PAD_VALID, NULL), 0);
    CHECK_INT(job_conv_out(5, 0, 1, JOB_PAD_SAME, NULL), 0);
    CHECK_INT(job_conv_out(5, 1, 0, JOB_PAD_SAME, NULL), 0);
    CHECK_INT(job_conv_out(5, 1, 1, 7, NULL), 0);
}

static void test_shape_errors(void)
{
    /* 7×7×3 → 3×3×32, where a 5×5 kernel does not fit. */
    EXPECT_ERROR(NPZ(CONV(32, "5") ", " CONV(8, "5") ", " FLAT), "model.layers[1]",
                 "conv2d with a 5×5 kernel (padding valid) does not fit its input 3×3×32");
    EXPECT_ERROR(NPZ(CONV(2, "[7, 1]") ", {\"type\": \"maxpool2d\"}, " FLAT), "model.layers[1]",
                 "maxpool2d with a 2×2 window (padding valid) does not fit its input 1×7×2");
    EXPECT_ERROR(NPZ(CONV(2, "[8, 1]") ", " FLAT), "model.layers[0]",
                 "conv2d with a 8×1 kernel (padding valid) does not fit its input 7×7×3");
    /* A dense layer, given output or the task's output after a map. */
    EXPECT_ERROR(NPZ(CONV(4, "3") ", {\"type\": \"dense\", \"units\": 3}, " FLAT),
                 "model.layers[1]",
                 "dense needs flat input, but model.layers[0] (conv2d) gives 5×5×4: add flatten or "
                 "global_avgpool2d before it");
    EXPECT_ERROR(NPZ(CONV(4, "3") ", {\"type\": \"dense\", \"units\": 3, \"activation\": "
                                  "\"softmax\"}"),
                 "model.layers[1]", "add flatten or global_avgpool2d");
    EXPECT_ERROR(NPZ(CONV(4, "3") ", {\"type\": \"dropout\", \"rate\": 0.5}"), "model.layers",
                 "the output layer (a dense layer added from \"task\") needs flat input, but "
                 "model.layers[1] (dropout) gives 5×5×4");
    EXPECT_ERROR(NPZ(""), "model.layers", "but the input gives 7×7×3");
    /* A map layer after the map is gone. */
    EXPECT_ERROR(NPZ(FLAT ", " CONV(4, "1")), "model.layers[1]",
                 "conv2d needs a height×width×channels input, but model.layers[0] (flatten) "
                 "gives 147 flat values");
    EXPECT_ERROR(NPZ("{\"type\": \"global_avgpool2d\"}, {\"type\": \"avgpool2d\"}"),
                 "model.layers[1]", "avgpool2d needs a height×width×channels input");
    EXPECT_ERROR(NPZ(FLAT ", {\"type\": \"dense\", \"units\": 3}, {\"type\": "
                          "\"global_avgpool2d\"}"),
                 "model.layers[2]", "model.layers[1] (dense) gives 3 flat values");
    /* Image layers on CSV rows. */
    EXPECT_ERROR(DOC(", \"model\": {\"layers\": [" CONV(4, "3") "]}"), "model.layers[0]",
                 "conv2d needs images: set dataset.format to an image format and "
                 "model.input_shape");
    EXPECT_ERROR(DOC(", \"model\": {\"layers\": [{\"type\": \"dense\", \"units\": 3}, " FLAT "]}"),
                 "model.layers[1]", "flatten needs images");
    /* Limits: the activations per sample, the weights of a layer. */
    EXPECT_ERROR(IMG("npz", "",
                     "\"input_shape\": [1024, 1024, 3], \"layers\": [{\"type\": "
                     "\"conv2d\", \"filters\": 64, \"kernel_size\": 3, \"padding\": "
                     "\"same\"}, " FLAT "]"),
                 "model.layers[0]",
                 "brings the activations to 70254592 values per sample (this layer gives "
                 "1024×1024×64); the limit is 67108864");
    EXPECT_ERROR(IMG("npz", "", "\"input_shape\": [4096, 4096, 5], \"layers\": [" FLAT "]"),
                 "model.input_shape", "holds 83886080 values per sample; the limit is 67108864");
    EXPECT_ERROR(IMG("npz", "",
                     "\"input_shape\": [64, 64, 3], \"layers\": [" FLAT
                     ", {\"type\": \"dense\", \"units\": 65536}]"),
                 "model.layers[1]", "would have 805306368 weights; the limit is 268435456");
    EXPECT_ERROR(IMG("npz", "",
                     "\"input_shape\": [31, 31, 4096], \"layers\": [" CONV(65536, "31") ", " FLAT
                                                                                        "]"),
                 "model.layers[0]", "would have 257966473216 weights");
    /* An input and a flatten of 2^25 values each are exactly the limit. */
    job_spec *s =
        parse_ok(IMG("npz", "", "\"input_shape\": [4096, 4096, 2], \"layers\": [" FLAT "]"));
    job_free(s);
}

static void test_layer_errors(void)
{
    EXPECT_ERROR(NPZ("{\"type\": \"conv2d\", \"kernel_size\": 3}, " FLAT),
                 "model.layers[0].filters", "is required for this layer");
    EXPECT_ERROR(NPZ("{\"type\": \"conv2d\", \"filters\": 3}, " FLAT),
                 "model.layers[0].kernel_size", "is required for this layer");
    EXPECT_ERROR(NPZ(CONV(0, "3") ", " FLAT), "model.layers[0].filters",
                 "must be an integer from 1 to 65536, got 0");
    EXPECT_ERROR(NPZ(CONV(65537, "3") ", " FLAT), "model.layers[0].filters", "got 65537");
    EXPECT_ERROR(NPZ(CONV(3, "0") ", " FLAT), "model.layers[0].kernel_size",
                 "must be an integer from 1 to 31 or [height, width] of such integers, got 0");
    EXPECT_ERROR(NPZ(CONV(3, "32") ", " FLAT), "model.layers[0].kernel_size", "got 32");
    EXPECT_ERROR(NPZ(CONV(3, "[3]") ", " FLAT), "model.layers[0].kernel_size", "got [3]");
    EXPECT_ERROR(NPZ(CONV(3, "[3, 3, 3]") ", " FLAT), "model.layers[0].kernel_size",
                 "got [3, 3, 3]");
    EXPECT_ERROR(NPZ(CONV(3, "[3, 2.5]") ", " FLAT), "model.layers[0].kernel_size", "got [3, 2.5]");
    EXPECT_ERROR(NPZ(CONV(3, "\"3\"") ", " FLAT), "model.layers[0].kernel_size", "got \"3\"");
    EXPECT_ERROR(NPZ("{\"type\": \"conv2d\", \"filters\": 3, \"kernel_size\": 3, \"strides\": 0}"
                     ", " FLAT),
                 "model.layers[0].strides", "got 0");
    EXPECT_ERROR(NPZ("{\"type\": \"conv2d\", \"filters\": 3, \"kernel_size\": 3, \"padding\": "
                     "\"full\"}, " FLAT),
                 "model.layers[0].padding", "must be \"valid\" or \"same\", got \"full\"");
    EXPECT_ERROR(NPZ("{\"type\": \"conv2d\", \"filters\": 3, \"kernel_size\": 3, \"use_bias\": "
                     "1}, " FLAT),
                 "model.layers[0].use_bias", "must be true or false");
    EXPECT_ERROR(NPZ("{\"type\": \"conv2d\", \"filters\": 3, \"kernel_size\": 3, \"activation\": "
                     "\"softmax\"}, " FLAT),
                 "model.layers[0].activation", "softmax is only for the output");
    EXPECT_ERROR(NPZ("{\"type\": \"conv2d\", \"filters\": 3, \"kernel_size\": 3, \"activation\": "
                     "\"gelu\"}, " FLAT),
                 "model.layers[0].activation",
                 "must be one of \"relu\", \"tanh\", \"sigmoid\", \"linear\", got \"gelu\"");
    EXPECT_ERROR(NPZ("{\"type\": \"maxpool2d\", \"pool_size\": 32}, " FLAT),
                 "model.layers[0].pool_size", "got 32");
    EXPECT_ERROR(NPZ("{\"type\": \"avgpool2d\", \"strides\": [1, 0]}, " FLAT),
                 "model.layers[0].strides",
                 "must be an integer from 1 to 31 or [height, width] of such integers, got [1, 0]");
    EXPECT_ERROR(NPZ("{\"type\": \"batchnorm\", \"momentum\": 1}, " FLAT),
                 "model.layers[0].momentum", "must be a number >= 0 and < 1, got 1");
    EXPECT_ERROR(NPZ("{\"type\": \"batchnorm\", \"epsilon\": 0}, " FLAT), "model.layers[0].epsilon",
                 "must be a number > 0 and <= 1, got 0");
    /* Options of other layer types are named as such. */
    EXPECT_ERROR(NPZ("{\"type\": \"maxpool2d\", \"filters\": 3}, " FLAT), "model.layers[0].filters",
                 "unknown field for a maxpool2d layer (it is an option of conv2d)");
    EXPECT_ERROR(NPZ(FLAT ", {\"type\": \"dense\", \"units\": 3, \"kernel_size\": 3}"),
                 "model.layers[1].kernel_size",
                 "unknown field for a dense layer (it is an option of conv2d)");
    EXPECT_ERROR(NPZ(FLAT ", {\"type\": \"dense\", \"units\": 3, \"strides\": 3}"),
                 "model.layers[1].strides",
                 "unknown field for a dense layer (it is an option of conv2d, maxpool2d, "
                 "avgpool2d)");
    EXPECT_ERROR(NPZ("{\"type\": \"flatten\", \"units\": 3}"), "model.layers[0].units",
                 "(it is an option of dense)");
    EXPECT_ERROR(NPZ("{\"type\": \"global_avgpool2d\", \"pool_size\": 2}"),
                 "model.layers[0].pool_size", "(it is an option of maxpool2d, avgpool2d)");
    EXPECT_ERROR(NPZ("{\"type\": \"batchnorm\", \"rate\": 0.1}, " FLAT), "model.layers[0].rate",
                 "(it is an option of dropout)");
    EXPECT_ERROR(NPZ(CONV(3, "3") ", " FLAT ", {\"type\": \"dense\", \"units\": 3, \"momentum\": "
                                  "0.5}"),
                 "model.layers[2].momentum", "(it is an option of batchnorm)");
    EXPECT_ERROR(NPZ("{\"type\": \"conv2d\", \"filters\": 3, \"kernel_size\": 3, \"dilation\": "
                     "2}, " FLAT),
                 "model.layers[0].dilation", "unknown field");
    /* The given output layer. */
    EXPECT_ERROR(DOC(", \"task\": \"regression\", \"model\": {\"layers\": [{\"type\": \"dense\", "
                     "\"units\": 3, \"activation\": \"softmax\"}]}"),
                 "model.layers[0].activation", "softmax is a classification output");
    EXPECT_ERROR(DOC(", \"binary\": true, \"model\": {\"layers\": [{\"type\": \"dense\", "
                     "\"units\": 2, \"activation\": \"softmax\"}]}"),
                 "model.layers[0].activation", "softmax does not go with \"binary\": true");
    EXPECT_ERROR(DOC(", \"model\": {\"layers\": [{\"type\": \"dense\", \"units\": 1, "
                     "\"activation\": \"softmax\"}]}"),
                 "model.layers[0]", "a softmax output needs one unit per class, at least 2; got 1");
}

static void test_dataset_errors(void)
{
    EXPECT_ERROR(IMG("cifar10", ", \"label_column\": 0",
                     "\"input_shape\": [32, 32, 3], "
                     "\"layers\": [" FLAT "]"),
                 "dataset.label_column",
                 "applies only to dataset.format \"csv\"; this job's is \"cifar10\"");
    EXPECT_ERROR(IMG8("images", ", \"header\": true"), "dataset.header",
                 "applies only to dataset.format \"csv\"");
    EXPECT_ERROR(IMG("mnist", ", \"standardize\": true",
                     "\"input_shape\": [28, 28, 1], "
                     "\"layers\": [" FLAT "]"),
                 "dataset.standardize", "(images use dataset.scale)");
    EXPECT_ERROR(DOC(", \"dataset\": {\"resize\": [64, 64]}"), "dataset.resize",
                 "applies only to image formats (\"cifar10\", \"mnist\", \"npy\", \"npz\", "
                 "\"images\"); this job's dataset.format is \"csv\"");
    EXPECT_ERROR(DOC(", \"dataset\": {\"format\": \"csv\", \"scale\": \"unit\"}"), "dataset.scale",
                 "applies only to image formats");
    EXPECT_ERROR(DOC(", \"dataset\": {\"augment\": {}}"), "dataset.augment",
                 "applies only to image formats");
    EXPECT_ERROR(DOC(", \"dataset\": {\"resize\": null}"), "dataset.resize",
                 "applies only to image formats");
    EXPECT_ERROR(IMG8("npz", ", \"scale\": \"minmax\""), "dataset.scale",
                 "must be \"unit\" or \"standardize\", got \"minmax\"");
    EXPECT_ERROR(IMG8("npz", ", \"resize\": [0, 4]"), "dataset.resize",
                 "must be [height, width], each an integer from 1 to 4096, got [0, 4]");
    EXPECT_ERROR(IMG8("npz", ", \"resize\": 8"), "dataset.resize", "got 8");
    EXPECT_ERROR(IMG8("npz", ", \"augment\": {\"flip\": 1}"), "dataset.augment.flip",
                 "must be true or false, got 1");
    EXPECT_ERROR(IMG8("npz", ", \"augment\": {\"crop_padding\": 65}"),
                 "dataset.augment.crop_padding", "must be an integer from 0 to 64, got 65");
    EXPECT_ERROR(IMG8("npz", ", \"augment\": {\"rotate\": 10}"), "dataset.augment.rotate",
                 "unknown field");
    EXPECT_ERROR(IMG8("npz", ", \"augment\": true"), "dataset.augment",
                 "must be an object, got true");

    /* input_shape: required for images, refused for CSV, checked against the format. */
    EXPECT_ERROR(IMG("npz", "", "\"layers\": [" FLAT "]"), "model.input_shape",
                 "is required for dataset.format \"npz\": [height, width, channels]");
    /* No model at all: the output layer would meet the image too. */
    EXPECT_ERRORS("{" URL ", \"hyperparameters\": {}, \"dataset\": {\"format\": \"images\"}}",
                  "model.input_shape", "is required for dataset.format \"images\"");
    EXPECT_ERROR(DOC(", \"model\": {\"input_shape\": [8, 8, 3]}"), "model.input_shape",
                 "applies only to image formats");
    EXPECT_ERROR(IMG("cifar10", "", "\"input_shape\": [64, 64, 3], \"layers\": [" FLAT "]"),
                 "model.input_shape",
                 "must be [32, 32, 3] for dataset.format \"cifar10\" (its images are 32×32; "
                 "dataset.resize changes that), got [64, 64, 3]");
    EXPECT_ERROR(IMG("cifar10", ", \"resize\": [64, 64]",
                     "\"input_shape\": [64, 64, 1], \"layers\": [" FLAT "]"),
                 "model.input_shape",
                 "must have 3 channels for dataset.format \"cifar10\", got [64, 64, 1]");
    EXPECT_ERROR(IMG("mnist", ", \"resize\": [32, 32]",
                     "\"input_shape\": [28, 28, 1], \"layers\": [" FLAT "]"),
                 "model.input_shape",
                 "must have the height and width of dataset.resize [32, 32], got [28, 28, 1]");
    EXPECT_ERROR(IMG("mnist", "", "\"input_shape\": [28, 28, 3], \"layers\": [" FLAT "]"),
                 "model.input_shape", "must have 1 channel for dataset.format \"mnist\"");
    EXPECT_ERROR(IMG("images", ", \"resize\": [16, 16]",
                     "\"input_shape\": [16, 8, 3], \"layers\": [" FLAT "]"),
                 "model.input_shape", "dataset.resize [16, 16]");
    const char *bad_shapes[] = {"[0, 4, 3]",    "[4, 4]",        "5",   "[4097, 1, 1]",
                                "[1, 1, 4097]", "[4, 4, \"3\"]", "null"};
    for (size_t i = 0; i < sizeof bad_shapes / sizeof bad_shapes[0]; i++) {
        char doc[512];
        snprintf(doc, sizeof doc, IMG("npz", "", "\"input_shape\": %s, \"layers\": [" FLAT "]"),
                 bad_shapes[i]);
        EXPECT_ERROR(doc, "model.input_shape",
                     "must be [height, width, channels], each an integer from 1 to 4096, got");
    }
}

/* All problems at once: the bad format does not bring input_shape errors with it, every layer's
 * own problems are reported, and the shapes are checked up to the first bad layer. */
static void test_many_errors_model(void)
{
    const char *text = IMG(
        "tiff", ", \"label_column\": \"x\", \"resize\": [0, 1]",
        "\"input_shape\": [7, 7, 3], \"layers\": [" CONV(8, "5") ", " CONV(
            2, "5") ", "
                    "{\"type\": \"conv2d\", \"filters\": 0, \"kernel_size\": 40}, "
                    "{\"type\": \"dense\", \"units\": 4, \"activation\": \"softmax\"}, " FLAT "]");
    field_errors errs;
    job_spec *s = NULL;
    CHECK_INT(job_parse(text, strlen(text), &s, &errs), -EINVAL);
    CHECK(s == NULL);
    CHECK(find_error(&errs, "dataset.format", "got \"tiff\"") >= 0);
    CHECK(find_error(&errs, "dataset.resize", "got [0, 1]") >= 0);
    CHECK(find_error(&errs, "model.layers[1]",
                     "5×5 kernel (padding valid) does not fit its input "
                     "3×3×8") >= 0);
    CHECK(find_error(&errs, "model.layers[2].filters", "got 0") >= 0);
    CHECK(find_error(&errs, "model.layers[2].kernel_size", "got 40") >= 0);
    CHECK(find_error(&errs, "model.layers[3].activation", "softmax is only for the output") >= 0);
    CHECK_INT(errs.count, 6);
    if (errs.count != 6)
        dump_errors(&errs);
}

static void test_round_trips(void)
{
    round_trip(seed_doc);
    round_trip(net_doc);
    round_trip(IMG("mnist", "", "\"input_shape\": [28, 28, 1], \"layers\": [" FLAT "]"));
    round_trip(IMG("npy", ", \"resize\": [9, 5], \"augment\": {\"crop_padding\": 2}",
                   "\"input_shape\": [9, 5, 1], \"layers\": [{\"type\": \"avgpool2d\", "
                   "\"pool_size\": [2, 1], \"strides\": [1, 2], \"padding\": \"same\"}, "
                   "{\"type\": \"global_avgpool2d\"}]"));
    round_trip("{\"dataset_url\": \"http://h/x\", \"binary\": true, \"hyperparameters\": {}, "
               "\"model\": {\"layers\": [{\"type\": \"batchnorm\", \"momentum\": 0}, "
               "{\"type\": \"dense\", \"units\": 1, \"activation\": \"sigmoid\"}]}}");

    /* The resolved seed spells every default out: windows and strides as [h, w]. */
    job_spec *s = parse_ok(seed_doc);
    json_t *doc = job_to_json(s);
    char *text = json_dumps(json_object_get(doc, "dataset"), JSON_COMPACT);
    CHECK_STR(text, "{\"format\":\"cifar10\",\"sha256\":null,\"resize\":[64,64],\"scale\":\"unit\","
                    "\"augment\":{\"flip\":false,\"crop_padding\":0}}");
    free(text);
    text = json_dumps(json_object_get(doc, "model"), JSON_COMPACT);
    CHECK_STR(
        text,
        "{\"input_shape\":[64,64,3],\"layers\":["
        "{\"type\":\"conv2d\",\"filters\":32,\"kernel_size\":[3,3],\"strides\":[1,1],"
        "\"padding\":\"valid\",\"activation\":\"relu\",\"use_bias\":true},"
        "{\"type\":\"maxpool2d\",\"pool_size\":[2,2],\"strides\":[2,2],\"padding\":\"valid\"},"
        "{\"type\":\"flatten\"},"
        "{\"type\":\"dense\",\"units\":10,\"activation\":\"softmax\"}]}");
    free(text);
    json_decref(doc);
    job_free(s);

    /* Without resize it is null, which parses back as none. */
    s = parse_ok(IMG("mnist", "", "\"input_shape\": [28, 28, 1], \"layers\": [" FLAT "]"));
    doc = job_to_json(s);
    CHECK(json_is_null(json_object_get(json_object_get(doc, "dataset"), "resize")));
    json_decref(doc);
    job_free(s);
}

/* The text of the repository file rel (under $TRAINYARD_SOURCE_ROOT, else the current folder),
 * with @ROOT@ replaced by that folder's absolute path as the README does; NULL if unreadable. */
static char *read_doc(const char *rel)
{
    const char *env = getenv("TRAINYARD_SOURCE_ROOT");
    char root[PATH_MAX], path[PATH_MAX + 64];
    if (!realpath(env ? env : ".", root)) {
        check_failures++;
        return NULL;
    }
    snprintf(path, sizeof path, "%s/%s", root, rel);
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot read %s (TRAINYARD_SOURCE_ROOT)\n", path);
        check_failures++;
        return NULL;
    }
    char raw[8192];
    size_t n = fread(raw, 1, sizeof raw - 1, f);
    fclose(f);
    raw[n] = '\0';
    size_t cap = sizeof raw + sizeof root;
    char *out = malloc(cap);
    const char *at = strstr(raw, "@ROOT@");
    if (out && at)
        snprintf(out, cap, "%.*s%s%s", (int)(at - raw), raw, root, at + strlen("@ROOT@"));
    else if (out)
        memcpy(out, raw, n + 1);
    return out;
}

/* The job documents the repository ships: the seed's, and the example the README runs. */
static void test_shipped_documents(void)
{
    char *text = read_doc("docs/cifar10-job.json");
    job_spec *s = text ? parse_ok(text) : NULL;
    if (s) {
        CHECK_INT(s->format, JOB_FORMAT_CIFAR10);
        CHECK_INT(s->resize_h, 64);
        CHECK_INT(s->in_c, 3);
        CHECK_INT(s->n_layers, 3);
        CHECK_SHAPE(&s->layers[0], 62, 62, 32);
        CHECK_SHAPE(&s->layers[2], 1, 1, 31 * 31 * 32);
        CHECK_INT(s->output_units, 10);
        CHECK_INT(s->optimizer, JOB_OPT_ADAM);
        CHECK_INT(s->epochs, 10);
        CHECK_INT(s->batch_size, 32);
    }
    job_free(s);
    free(text);
    text = read_doc("examples/shapes-job.json");
    s = text ? parse_ok(text) : NULL;
    if (s) {
        CHECK_INT(s->format, JOB_FORMAT_CIFAR10);
        CHECK_INT(s->output_units, 4);
        CHECK_SHAPE(&s->layers[4], 1, 1, 8 * 8 * 32);
    }
    job_free(s);
    free(text);
}

static void test_names(void)
{
    CHECK_STR(job_activation_name(JOB_ACT_SOFTMAX), "softmax");
    CHECK_STR(job_layer_type_name(JOB_LAYER_GLOBAL_AVGPOOL2D), "global_avgpool2d");
    CHECK_STR(job_layer_type_name(JOB_LAYER_BATCHNORM), "batchnorm");
    CHECK(job_layer_type_name(8) == NULL);
    CHECK_STR(job_format_name(JOB_FORMAT_CIFAR10), "cifar10");
    CHECK_STR(job_format_name(JOB_FORMAT_IMAGES), "images");
    CHECK(job_format_name(-1) == NULL);
}

int main(void)
{
    test_seed();
    test_network();
    test_conv_out();
    test_shape_errors();
    test_layer_errors();
    test_dataset_errors();
    test_many_errors_model();
    test_round_trips();
    test_shipped_documents();
    test_names();
    return check_exit();
}
