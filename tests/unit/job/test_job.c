/* Unit tests of job/job: defaults of a minimal document, a full document, every kind of
 * error naming its field, several errors from one parse, the depth and size guards, and the
 * round trip job_to_json → job_from_json. */
#include "job/job.h"

#include <errno.h>

#include "tests/unit/check.h"
#include "tests/unit/job/job_check.h"

#define SHA_LOWER "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define SHA_UPPER "0123456789ABCDEF0123456789abcdef0123456789ABCDEF0123456789abcdef"

static void test_minimal_defaults(void)
{
    job_spec *s = parse_ok(DOC(""));
    if (!s)
        return;
    CHECK_STR(s->name, "job");
    CHECK_STR(s->dataset_url, "https://data.example/d.csv");
    CHECK(s->label_name == NULL);
    CHECK_INT(s->label_index, -1);
    CHECK_INT(s->header, -1);
    CHECK(s->sha256 == NULL);
    CHECK_INT(s->standardize, 1);
    CHECK_INT(s->task, JOB_TASK_CLASSIFICATION);
    CHECK_INT(s->binary, 0);
    CHECK_INT(s->n_layers, 0);
    CHECK_INT(s->epochs, 10);
    CHECK_INT(s->batch_size, 32);
    CHECK_INT(s->optimizer, JOB_OPT_ADAM);
    CHECK_NEAR(s->learning_rate, 0.001, 0);
    CHECK_NEAR(s->momentum, 0, 0);
    CHECK_NEAR(s->beta1, 0.9, 0);
    CHECK_NEAR(s->beta2, 0.999, 0);
    CHECK_NEAR(s->epsilon, 1e-7, 0);
    CHECK_NEAR(s->validation_split, 0, 0);
    CHECK_INT(s->shuffle, 1);
    CHECK_INT(s->seed, 0);
    CHECK_INT(s->device, JOB_DEVICE_ANY);
    CHECK_INT(s->max_attempts, 3);
    CHECK_INT(s->max_runtime_seconds, 86400);
    CHECK_INT(s->priority, 0);
    job_free(s);

    /* sgd's default learning rate differs from adam's. */
    s = parse_ok(DOC_HP("\"optimizer\": \"sgd\""));
    if (s) {
        CHECK_INT(s->optimizer, JOB_OPT_SGD);
        CHECK_NEAR(s->learning_rate, 0.01, 0);
        CHECK_NEAR(s->momentum, 0, 0);
    }
    job_free(s);

    /* A dense layer's activation defaults to relu; "model": {} means no hidden layers. */
    s = parse_ok(DOC(", \"model\": {\"layers\": [{\"type\": \"dense\", \"units\": 4}]}"));
    if (s) {
        CHECK_INT(s->n_layers, 1);
        CHECK_INT(s->layers[0].activation, JOB_ACT_RELU);
    }
    job_free(s);
    s = parse_ok(DOC(", \"model\": {}"));
    if (s)
        CHECK_INT(s->n_layers, 0);
    job_free(s);
}

static const char *full_doc =
    "{\"name\": \"digits mlp ü\",\n"
    " \"dataset_url\": \"file:///data/digits.csv.gz\",\n"
    " \"dataset\": {\"format\": \"csv\", \"label_column\": \"target\", \"header\": true,\n"
    "             \"sha256\": \"" SHA_UPPER "\", \"standardize\": false},\n"
    " \"task\": \"classification\", \"binary\": true,\n"
    " \"model\": {\"layers\": [{\"type\": \"dense\", \"units\": 128, \"activation\": \"tanh\"},\n"
    "                        {\"type\": \"dropout\", \"rate\": 0.25},\n"
    "                        {\"type\": \"dense\", \"units\": 65536, \"activation\": "
    "\"sigmoid\"},\n"
    "                        {\"type\": \"dense\", \"units\": 1, \"activation\": \"linear\"},\n"
    "                        {\"type\": \"dropout\", \"rate\": 0}]},\n"
    " \"hyperparameters\": {\"epochs\": 100000, \"batch_size\": 1048576,\n"
    "                     \"learning_rate\": 10, \"optimizer\": \"adam\", \"beta1\": 0.5,\n"
    "                     \"beta2\": 0, \"epsilon\": 1e-8, \"validation_split\": 0.2,\n"
    "                     \"shuffle\": false, \"seed\": 9223372036854775807},\n"
    " \"resources\": {\"device\": \"gpu\"},\n"
    " \"max_attempts\": 100, \"max_runtime_seconds\": 2592000, \"priority\": -100}";

static void test_full(void)
{
    job_spec *s = parse_ok(full_doc);
    if (!s)
        return;
    CHECK_STR(s->name, "digits mlp ü");
    CHECK_STR(s->dataset_url, "file:///data/digits.csv.gz");
    CHECK_STR(s->label_name, "target");
    CHECK_INT(s->header, 1);
    CHECK_STR(s->sha256, SHA_LOWER);
    CHECK_INT(s->standardize, 0);
    CHECK_INT(s->task, JOB_TASK_CLASSIFICATION);
    CHECK_INT(s->binary, 1);
    CHECK_INT(s->n_layers, 5);
    CHECK_INT(s->layers[0].type, JOB_LAYER_DENSE);
    CHECK_INT(s->layers[0].units, 128);
    CHECK_INT(s->layers[0].activation, JOB_ACT_TANH);
    CHECK_INT(s->layers[1].type, JOB_LAYER_DROPOUT);
    CHECK_NEAR(s->layers[1].rate, 0.25, 0);
    CHECK_INT(s->layers[2].units, 65536);
    CHECK_INT(s->layers[2].activation, JOB_ACT_SIGMOID);
    CHECK_INT(s->layers[3].activation, JOB_ACT_LINEAR);
    CHECK_NEAR(s->layers[4].rate, 0, 0);
    CHECK_INT(s->epochs, 100000);
    CHECK_INT(s->batch_size, 1 << 20);
    CHECK_NEAR(s->learning_rate, 10, 0);
    CHECK_INT(s->optimizer, JOB_OPT_ADAM);
    CHECK_NEAR(s->beta1, 0.5, 0);
    CHECK_NEAR(s->beta2, 0, 0);
    CHECK_NEAR(s->epsilon, 1e-8, 0);
    CHECK_NEAR(s->validation_split, 0.2, 0);
    CHECK_INT(s->shuffle, 0);
    CHECK(s->seed == 9223372036854775807ull);
    CHECK_INT(s->device, JOB_DEVICE_GPU);
    CHECK_INT(s->max_attempts, 100);
    CHECK_INT(s->max_runtime_seconds, 2592000);
    CHECK_INT(s->priority, -100);
    job_free(s);

    /* The other spellings: label by index, header "auto"/false, sgd with momentum, cpu. */
    s = parse_ok("{\"dataset_url\": \"http://h/x\", \"task\": \"regression\","
                 " \"dataset\": {\"label_column\": 0, \"header\": \"auto\", \"sha256\": null},"
                 " \"hyperparameters\": {\"optimizer\": \"sgd\", \"momentum\": 0.9,"
                 " \"learning_rate\": 0.5}, \"resources\": {\"device\": \"cpu\"}}");
    if (s) {
        CHECK(s->label_name == NULL);
        CHECK_INT(s->label_index, 0);
        CHECK_INT(s->header, -1);
        CHECK(s->sha256 == NULL);
        CHECK_INT(s->task, JOB_TASK_REGRESSION);
        CHECK_NEAR(s->momentum, 0.9, 0);
        CHECK_NEAR(s->learning_rate, 0.5, 0);
        CHECK_INT(s->device, JOB_DEVICE_CPU);
    }
    job_free(s);
    s = parse_ok("{\"dataset_url\": \"http://h/x\", \"dataset\": {\"label_column\": -3, "
                 "\"header\": false}, \"hyperparameters\": {}}");
    if (s) {
        CHECK_INT(s->label_index, -3);
        CHECK_INT(s->header, 0);
    }
    job_free(s);
}

static void test_unknown_fields(void)
{
    EXPECT_ERROR(DOC(", \"colour\": 1"), "colour", "unknown field");
    EXPECT_ERROR(DOC_HP("\"epoch\": 5"), "hyperparameters.epoch", "unknown field");
    EXPECT_ERROR(DOC(", \"dataset\": {\"labels\": \"y\"}"), "dataset.labels", "unknown field");
    EXPECT_ERROR(DOC(", \"resources\": {\"gpus\": 2}"), "resources.gpus", "unknown field");
    EXPECT_ERROR(DOC(", \"model\": {\"layer\": []}"), "model.layer", "unknown field");
    EXPECT_ERROR(DOC(", \"model\": {\"layers\": [{\"type\": \"dense\", \"units\": 3}, "
                     "{\"type\": \"dense\", \"units\": 3, \"rate\": 0.5}]}"),
                 "model.layers[1].rate", "unknown field");
    EXPECT_ERROR(DOC(", \"model\": {\"layers\": [{\"type\": \"dropout\", \"rate\": 0.1, "
                     "\"units\": 3}]}"),
                 "model.layers[0].units", "unknown field");
}

static void test_wrong_types(void)
{
    EXPECT_ERROR(DOC(", \"name\": 5"), "name", "must be a string, got 5");
    EXPECT_ERROR("{\"dataset_url\": [], \"hyperparameters\": {}}", "dataset_url",
                 "must be a string, got an array");
    EXPECT_ERROR(DOC_HP("\"epochs\": \"10\""), "hyperparameters.epochs",
                 "must be an integer from 1 to 100000, got \"10\"");
    /* An integral real is an integer, as in JSON Schema; out of range it is still refused. */
    {
        field_errors errs = {0};
        job_spec *spec = NULL;
        const char *doc = DOC_HP("\"epochs\": 3.0");
        CHECK_INT(job_parse(doc, strlen(doc), &spec, &errs), 0);
        CHECK_INT(spec ? spec->epochs : -1, 3);
        job_free(spec);
    }
    EXPECT_ERROR(DOC_HP("\"epochs\": 1e300"), "hyperparameters.epochs",
                 "must be an integer from 1 to 100000, got 1e+300");
    EXPECT_ERROR(DOC_HP("\"epochs\": 2.5"), "hyperparameters.epochs",
                 "must be an integer from 1 to 100000, got 2.5");
    EXPECT_ERROR(DOC_HP("\"learning_rate\": \"fast\""), "hyperparameters.learning_rate",
                 "must be a number");
    EXPECT_ERROR(DOC_HP("\"shuffle\": 1"), "hyperparameters.shuffle",
                 "must be true or false, got 1");
    EXPECT_ERROR(DOC_HP("\"seed\": null"), "hyperparameters.seed",
                 "must be a non-negative integer, got null");
    EXPECT_ERROR("{\"dataset_url\": \"http://h/x\", \"hyperparameters\": []}", "hyperparameters",
                 "must be an object, got an array");
    EXPECT_ERROR(DOC(", \"dataset\": \"csv\""), "dataset", "must be an object");
    EXPECT_ERROR(DOC(", \"model\": {\"layers\": {}}"), "model.layers", "must be an array");
    EXPECT_ERROR(DOC(", \"model\": {\"layers\": [7]}"), "model.layers[0]", "must be an object");
    EXPECT_ERROR(DOC(", \"dataset\": {\"label_column\": true}"), "dataset.label_column",
                 "must be a column name (a string) or a column index");
    EXPECT_ERROR(DOC(", \"dataset\": {\"header\": \"yes\"}"), "dataset.header",
                 "must be true, false or \"auto\", got \"yes\"");
    EXPECT_ERROR(DOC(", \"binary\": \"true\""), "binary", "must be true or false");
    EXPECT_ERROR(DOC(", \"priority\": false"), "priority", "must be an integer from -100 to 100");
    EXPECT_ERROR(DOC(", \"delete_checkpoint\": \"no\""), "delete_checkpoint",
                 "must be true or false");
}

static void test_out_of_range(void)
{
    EXPECT_ERROR(DOC_HP("\"epochs\": 0"), "hyperparameters.epochs",
                 "must be an integer from 1 to 100000, got 0");
    EXPECT_ERROR(DOC_HP("\"epochs\": 100001"), "hyperparameters.epochs", "got 100001");
    EXPECT_ERROR(DOC_HP("\"batch_size\": 1048577"), "hyperparameters.batch_size",
                 "must be an integer from 1 to 1048576, got 1048577");
    EXPECT_ERROR(DOC_HP("\"learning_rate\": 0"), "hyperparameters.learning_rate",
                 "must be a number > 0 and <= 10, got 0");
    EXPECT_ERROR(DOC_HP("\"learning_rate\": 10.5"), "hyperparameters.learning_rate", "10.5");
    EXPECT_ERROR(DOC_HP("\"validation_split\": 1"), "hyperparameters.validation_split",
                 "must be a number >= 0 and < 1, got 1");
    EXPECT_ERROR(DOC_HP("\"beta2\": -0.1"), "hyperparameters.beta2", ">= 0 and < 1");
    EXPECT_ERROR(DOC_HP("\"epsilon\": 0"), "hyperparameters.epsilon", "> 0");
    EXPECT_ERROR(DOC_HP("\"optimizer\": \"sgd\", \"momentum\": 1"), "hyperparameters.momentum",
                 "must be a number >= 0 and < 1, got 1");
    EXPECT_ERROR(DOC_HP("\"seed\": -1"), "hyperparameters.seed",
                 "must be a non-negative integer, got -1");
    EXPECT_ERROR(DOC_HP("\"optimizer\": \"rmsprop\""), "hyperparameters.optimizer",
                 "must be \"sgd\" or \"adam\", got \"rmsprop\"");
    EXPECT_ERROR(DOC(", \"max_attempts\": 0"), "max_attempts",
                 "must be an integer from 1 to 100, got 0");
    EXPECT_ERROR(DOC(", \"max_runtime_seconds\": 2592001"), "max_runtime_seconds",
                 "must be an integer from 1 to 2592000");
    EXPECT_ERROR(DOC(", \"priority\": 101"), "priority", "got 101");
    EXPECT_ERROR(DOC(", \"task\": \"clustering\""), "task",
                 "must be \"classification\" or \"regression\", got \"clustering\"");
    EXPECT_ERROR(DOC(", \"resources\": {\"device\": \"tpu\"}"), "resources.device",
                 "must be \"gpu\", \"cpu\" or \"any\", got \"tpu\"");
    EXPECT_ERROR(DOC(", \"dataset\": {\"format\": \"parquet\"}"), "dataset.format",
                 "must be one of \"csv\", \"cifar10\", \"mnist\", \"npy\", \"npz\", \"images\", "
                 "got \"parquet\"");
    EXPECT_ERROR(DOC(", \"dataset\": {\"label_column\": \"\"}"), "dataset.label_column",
                 "1 to 1024 characters");
    EXPECT_ERROR(DOC(", \"dataset\": {\"label_column\": 1000000}"), "dataset.label_column",
                 "must be an integer from -1000000 to 999999");
    EXPECT_ERROR(DOC(", \"name\": \"\""), "name", "must be 1 to 128 characters long, got 0");
    EXPECT_ERROR(DOC(", \"name\": \"a\\tb\""), "name", "control characters");
    EXPECT_ERROR(DOC(", \"model\": {\"layers\": [{\"type\": \"dense\", \"units\": 0}]}"),
                 "model.layers[0].units", "must be an integer from 1 to 65536, got 0");
    EXPECT_ERROR(DOC(", \"model\": {\"layers\": [{\"type\": \"dense\", \"units\": 8}, "
                     "{\"type\": \"dense\", \"units\": 65537}]}"),
                 "model.layers[1].units", "got 65537");
    EXPECT_ERROR(DOC(", \"model\": {\"layers\": [{\"type\": \"dense\"}]}"), "model.layers[0].units",
                 "is required");
    EXPECT_ERROR(DOC(", \"model\": {\"layers\": [{\"type\": \"dropout\", \"rate\": 1}]}"),
                 "model.layers[0].rate", "must be a number >= 0 and < 1, got 1");
    EXPECT_ERROR(DOC(", \"model\": {\"layers\": [{\"type\": \"dropout\"}]}"),
                 "model.layers[0].rate", "is required");
    EXPECT_ERROR(DOC(", \"model\": {\"layers\": [{\"units\": 3}]}"), "model.layers[0].type",
                 "is required");
    EXPECT_ERROR(DOC(", \"model\": {\"layers\": [{\"type\": \"conv3d\"}]}"), "model.layers[0].type",
                 "must be one of \"dense\", \"dropout\", \"conv2d\", \"maxpool2d\", "
                 "\"avgpool2d\", \"global_avgpool2d\", \"flatten\", \"batchnorm\", got \"conv3d\"");
    EXPECT_ERROR(DOC(", \"model\": {\"layers\": [{\"type\": \"dense\", \"units\": 3, "
                     "\"activation\": \"gelu\"}]}"),
                 "model.layers[0].activation", "got \"gelu\"");

    /* 33 layers: one too many. */
    char doc[4096] = DOC(", \"model\": {\"layers\": [");
    doc[strlen(doc) - 1] = '\0'; /* drop DOC's closing brace to append */
    for (int i = 0; i < JOB_MAX_LAYERS + 1; i++)
        strcat(doc, i ? ", {\"type\": \"dropout\", \"rate\": 0.1}"
                      : "{\"type\": \"dropout\", \"rate\": 0.1}");
    strcat(doc, "]}}");
    EXPECT_ERROR(doc, "model.layers", "must have at most 32 layers, got 33");
}

static void test_required_and_rules(void)
{
    EXPECT_ERROR("{\"hyperparameters\": {}}", "dataset_url", "is required");
    EXPECT_ERROR("{\"dataset_url\": \"http://h/x\"}", "hyperparameters", "is required");
    EXPECT_ERROR(DOC(", \"model\": {\"layers\": [{\"type\": \"dense\", \"units\": 3, "
                     "\"activation\": \"softmax\"}, {\"type\": \"dropout\", \"rate\": 0.5}]}"),
                 "model.layers[0].activation", "softmax is only for the output, the last layer");
    EXPECT_ERROR(DOC_HP("\"momentum\": 0.9"), "hyperparameters.momentum",
                 "applies only to optimizer \"sgd\"");
    EXPECT_ERROR(DOC_HP("\"optimizer\": \"adam\", \"momentum\": 0.9"), "hyperparameters.momentum",
                 "applies only to optimizer \"sgd\"; this job uses \"adam\"");
    EXPECT_ERROR(DOC_HP("\"optimizer\": \"sgd\", \"beta1\": 0.9"), "hyperparameters.beta1",
                 "applies only to optimizer \"adam\"");
    EXPECT_ERROR(DOC(", \"task\": \"regression\", \"binary\": true"), "binary",
                 "applies only to \"task\": \"classification\"");
    EXPECT_ERROR(DOC(", \"task\": \"regression\", \"binary\": false"), "binary", "applies only");
    /* A bad optimizer does not produce a second, misleading "applies only" error. */
    EXPECT_ERROR(DOC_HP("\"optimizer\": \"SGD\", \"momentum\": 0.9"), "hyperparameters.optimizer",
                 "got \"SGD\"");

    /* sha256 */
    EXPECT_ERROR(DOC(", \"dataset\": {\"sha256\": \"abc\"}"), "dataset.sha256",
                 "64 hexadecimal digits");
    EXPECT_ERROR(DOC(", \"dataset\": {\"sha256\": \"" SHA_LOWER "0\"}"), "dataset.sha256",
                 "got 65 characters");
    EXPECT_ERROR(DOC(", \"dataset\": {\"sha256\": "
                     "\"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdeg\"}"),
                 "dataset.sha256", "non-hexadecimal character at position 64");
    EXPECT_ERROR(DOC(", \"dataset\": {\"sha256\": 12}"), "dataset.sha256", "got 12");

    /* URLs */
    const char *bad_urls[] = {"ftp://h/x", "HTTP://h/x", "/data/x.csv", "httpx://h",
                              "file:/x",   "",           " http://h/x"};
    for (size_t i = 0; i < sizeof bad_urls / sizeof bad_urls[0]; i++) {
        char doc[256];
        snprintf(doc, sizeof doc, "{\"dataset_url\": \"%s\", \"hyperparameters\": {}}",
                 bad_urls[i]);
        EXPECT_ERROR(doc, "dataset_url",
                     "must be a URL starting with http://, https://, file:// or s3://");
    }
    EXPECT_ERROR("{\"dataset_url\": \"https://\", \"hyperparameters\": {}}", "dataset_url",
                 "nothing after the scheme");
    EXPECT_ERROR("{\"dataset_url\": \"https://h/a b\", \"hyperparameters\": {}}", "dataset_url",
                 "spaces, control or non-ASCII characters");
    EXPECT_ERROR("{\"dataset_url\": \"https://h/caf\u00e9.csv\", \"hyperparameters\": {}}",
                 "dataset_url", "non-ASCII");
    EXPECT_ERROR("{\"dataset_url\": \"http://[::1/x.csv\", \"hyperparameters\": {}}", "dataset_url",
                 "is not a valid URL");
    EXPECT_ERROR("{\"dataset_url\": \"http://host:99999/x.csv\", \"hyperparameters\": {}}",
                 "dataset_url", "is not a valid URL");
    char big[4200 + 100];
    strcpy(big, "{\"hyperparameters\": {}, \"dataset_url\": \"https://h/");
    size_t n = strlen(big);
    memset(big + n, 'a', 4090);
    strcpy(big + n + 4090, "\"}");
    EXPECT_ERROR(big, "dataset_url", "at most 4096 bytes");
}

static void test_document_level(void)
{
    /* Syntax errors: one error on field "", with jansson's position. */
    EXPECT_ERROR("{\"dataset_url\": \"http://h/x\",\n \"hyperparameters\": {},}", "",
                 "invalid JSON at line 2, column");
    EXPECT_ERROR("", "", "invalid JSON at line");
    EXPECT_ERROR(DOC(", \"name\": \"a\", \"name\": \"b\""), "", "duplicate object key");
    /* Not an object. */
    EXPECT_ERROR("[1, 2]", "", "must be a JSON object (the job), got [1, 2]");
    EXPECT_ERROR("[[1]]", "", "must be a JSON object (the job), got an array");
    EXPECT_ERROR("3", "", "must be a JSON object (the job), got 3");
    EXPECT_ERROR("\"job\"", "", "must be a JSON object");
    field_errors errs;
    job_spec *s = NULL;
    CHECK_INT(job_from_json(NULL, &s, &errs), -EINVAL);
    CHECK_INT(errs.count, 1);
    json_t *arr = json_array();
    CHECK_INT(job_from_json(arr, &s, &errs), -EINVAL);
    CHECK(find_error(&errs, "", "got an array") == 0);
    json_decref(arr);
    CHECK(s == NULL);

    /* Depth: 16 levels pass the guard (and fail later on the field), 17 do not. */
    char doc[256];
    char open16[17], close16[17];
    memset(open16, '[', 15);
    open16[15] = '\0';
    memset(close16, ']', 15);
    close16[15] = '\0';
    snprintf(doc, sizeof doc, DOC(", \"name\": %s%s"), open16, close16);
    EXPECT_ERROR(doc, "name", "must be a string");
    snprintf(doc, sizeof doc, DOC(", \"name\": [%s%s]"), open16, close16);
    EXPECT_ERROR(doc, "", "nested more than 16 levels");
    /* Brackets and escaped quotes inside strings do not count. */
    s = parse_ok(DOC(", \"name\": \"[[[[[[[[[[\\\"{{{{{{{{{{{{{{{{{{{{\\\\\""));
    if (s)
        CHECK_STR(s->name, "[[[[[[[[[[\"{{{{{{{{{{{{{{{{{{{{\\");
    job_free(s);

    /* A 1 MiB run of '[' is refused by the scan, before jansson sees it. */
    size_t big = JOB_MAX_DOC_BYTES;
    char *deep = malloc(big);
    memset(deep, '[', big);
    s = NULL;
    CHECK_INT(job_parse(deep, big, &s, &errs), -EINVAL);
    CHECK(find_error(&errs, "", "nested more than") == 0);
    CHECK_INT(errs.count, 1);
    /* One byte more is over the size cap. */
    char *bigger = malloc(big + 1);
    memset(bigger, ' ', big + 1);
    CHECK_INT(job_parse(bigger, big + 1, &s, &errs), -EINVAL);
    CHECK(find_error(&errs, "", "the limit is 1048576") == 0);
    free(bigger);
    free(deep);

    /* Text need not be NUL-terminated; only len bytes are read. */
    const char *text = DOC("") "garbage";
    s = NULL;
    CHECK_INT(job_parse(text, strlen(text) - strlen("garbage"), &s, NULL), 0);
    job_free(s);
    CHECK_INT(job_parse(NULL, 0, &s, &errs), -EINVAL);
}

static void test_many_errors(void)
{
    const char *text =
        "{\"name\": 7, \"dataset_url\": \"gopher://x\", \"extra\": 1,\n"
        " \"dataset\": {\"sha256\": \"zz\", \"format\": \"tsv\"},\n"
        " \"model\": {\"layers\": [{\"type\": \"dense\", \"units\": -1, \"activation\": "
        "\"softmax\"}, {\"type\": \"dropout\", \"rate\": 0}]},\n"
        " \"hyperparameters\": {\"epochs\": 0, \"optimizer\": \"adam\", \"momentum\": 0.5},\n"
        " \"priority\": 1000}";
    field_errors errs;
    job_spec *s = NULL;
    CHECK_INT(job_parse(text, strlen(text), &s, &errs), -EINVAL);
    CHECK(s == NULL);
    CHECK_INT(errs.count, 10);
    CHECK(find_error(&errs, "name", "must be a string") >= 0);
    CHECK(find_error(&errs, "dataset_url", "http://") >= 0);
    CHECK(find_error(&errs, "extra", "unknown field") >= 0);
    CHECK(find_error(&errs, "dataset.sha256", "hexadecimal") >= 0);
    CHECK(find_error(&errs, "dataset.format", "\"csv\"") >= 0);
    CHECK(find_error(&errs, "model.layers[0].units", "got -1") >= 0);
    CHECK(find_error(&errs, "model.layers[0].activation", "softmax") >= 0);
    CHECK(find_error(&errs, "hyperparameters.epochs", "got 0") >= 0);
    CHECK(find_error(&errs, "hyperparameters.momentum", "applies only") >= 0);
    CHECK(find_error(&errs, "priority", "got 1000") >= 0);
    if (errs.count != 10)
        dump_errors(&errs);

    /* More problems than slots: the last slot says there are more. */
    char doc[8192] = "{";
    for (int i = 0; i < 50; i++) {
        char member[32];
        snprintf(member, sizeof member, "\"x%d\": 0, ", i);
        strcat(doc, member);
    }
    strcat(doc, "\"dataset_url\": \"http://h/x\", \"hyperparameters\": {}}");
    CHECK_INT(job_parse(doc, strlen(doc), &s, &errs), -EINVAL);
    CHECK_INT(errs.count, FIELD_ERRORS_MAX);
    CHECK_STR(errs.items[0].field, "x0");
    CHECK_STR(errs.items[FIELD_ERRORS_MAX - 2].field, "x30");
    CHECK_STR(errs.items[FIELD_ERRORS_MAX - 1].field, "");
    CHECK(strstr(errs.items[FIELD_ERRORS_MAX - 1].message, "more than 31 problems") != NULL);

    /* A long unknown key is cut to fit the field, never inside a UTF-8 character. */
    char key[400] = "";
    for (int i = 0; i < 100; i++)
        strcat(key, "é"); /* 2 bytes each */
    snprintf(doc, sizeof doc, DOC(", \"a%s\": 1"), key);
    CHECK_INT(job_parse(doc, strlen(doc), &s, &errs), -EINVAL);
    CHECK_INT(errs.count, 1);
    json_t *field = json_string(errs.items[0].field); /* NULL if not valid UTF-8 */
    CHECK(field != NULL);
    CHECK_INT(strlen(errs.items[0].field), 127);
    json_decref(field);
}

static void test_round_trip(void)
{
    round_trip(DOC(""));
    round_trip(full_doc);
    round_trip("{\"dataset_url\": \"http://h/x\", \"task\": \"regression\","
               " \"dataset\": {\"label_column\": 2, \"header\": false},"
               " \"model\": {\"layers\": [{\"type\": \"dropout\", \"rate\": 0.1},"
               " {\"type\": \"dense\", \"units\": 7}]},"
               " \"hyperparameters\": {\"optimizer\": \"sgd\", \"momentum\": 0.3,"
               " \"learning_rate\": 0.1, \"seed\": 12345, \"validation_split\": 0.15},"
               " \"delete_checkpoint\": false}");

    /* The resolved document spells every default out. */
    job_spec *s = parse_ok(DOC(""));
    json_t *doc = job_to_json(s);
    char *text = json_dumps(doc, JSON_COMPACT);
    CHECK_STR(text, "{\"name\":\"job\",\"dataset_url\":\"https://data.example/d.csv\","
                    "\"dataset\":{\"format\":\"csv\",\"label_column\":-1,\"header\":\"auto\","
                    "\"sha256\":null,\"standardize\":true},\"task\":\"classification\","
                    "\"binary\":false,\"model\":{\"layers\":[]},\"hyperparameters\":{"
                    "\"epochs\":10,\"batch_size\":32,\"learning_rate\":0.001,"
                    "\"optimizer\":\"adam\",\"beta1\":0.90000000000000002,"
                    "\"beta2\":0.999,\"epsilon\":9.9999999999999995e-8,"
                    "\"validation_split\":0.0,\"shuffle\":true,\"seed\":0},"
                    "\"resources\":{\"device\":\"any\"},\"max_attempts\":3,"
                    "\"max_runtime_seconds\":86400,\"priority\":0,"
                    "\"delete_checkpoint\":true}");
    free(text);
    json_decref(doc);
    job_free(s);
    CHECK(job_to_json(NULL) == NULL);
}

static void test_activation_names(void)
{
    CHECK_STR(job_activation_name(JOB_ACT_RELU), "relu");
    CHECK_STR(job_activation_name(JOB_ACT_TANH), "tanh");
    CHECK_STR(job_activation_name(JOB_ACT_SIGMOID), "sigmoid");
    CHECK_STR(job_activation_name(JOB_ACT_LINEAR), "linear");
    CHECK(job_activation_name(99) == NULL);
    job_free(NULL);
}

/* Credentials in dataset_url stay in the spec for the fetch; the document shows ***@. */
static void test_url_credentials(void)
{
    job_spec *s = parse_ok("{\"dataset_url\": \"https://u:p%40ss@data.example/d.csv?sig=1\","
                           " \"hyperparameters\": {}}");
    CHECK_STR(s->dataset_url, "https://u:p%40ss@data.example/d.csv?sig=1");
    json_t *doc = job_to_json(s);
    CHECK_STR(json_string_value(json_object_get(doc, "dataset_url")),
              "https://***@data.example/d.csv?sig=1");
    /* A shown document cannot stand in for the real one. */
    job_spec *back = (job_spec *)1;
    field_errors errs;
    CHECK_INT(job_from_json(doc, &back, &errs), -EINVAL);
    CHECK(find_error(&errs, "dataset_url", "redacted") >= 0);
    json_decref(doc);
    job_free(s);
    /* A wrong scheme is quoted without the credentials. */
    job_parse(DOC_X_URL("ftp://u:secret@h/d.csv"), strlen(DOC_X_URL("ftp://u:secret@h/d.csv")),
              &back, &errs);
    int at = find_error(&errs, "dataset_url", "ftp://***@h/d.csv");
    CHECK(at >= 0 && !strstr(errs.items[at].message, "secret"));
}

/* The experiment sections: early_stopping (Keras's defaults, "auto" resolved, the monitor checked
 * against what the job reports), init_from, tensorboard, notify and keep; round trips included. */
static void test_experiment(void)
{
    job_spec *s = parse_ok(DOC(""));
    if (s) {
        CHECK_INT(s->early_stopping.enabled, 0);
        CHECK(s->init_from == NULL);
        CHECK_INT(s->n_notify, 0);
        CHECK_INT(s->keep, 0);
        CHECK_INT(s->tb_histograms, 0);
    }
    job_free(s);

#define HPV     "\"hyperparameters\": {\"validation_split\": 0.2}"
#define VDOC(x) "{\"dataset_url\": \"https://data.example/d.csv\", " HPV x "}"
    s = parse_ok(VDOC(", \"early_stopping\": {}"));
    if (s) {
        CHECK_INT(s->early_stopping.enabled, 1);
        CHECK_STR(s->early_stopping.monitor, "val_loss");
        CHECK_INT(s->early_stopping.mode, JOB_ES_MIN);
        CHECK_INT(s->early_stopping.patience, 0);
        CHECK_INT(s->early_stopping.restore_best, 0);
    }
    job_free(s);
    s = parse_ok(VDOC(", \"early_stopping\": {\"monitor\": \"val_accuracy\", \"patience\": 5,"
                      " \"min_delta\": 0.01, \"baseline\": 0.5, \"start_from_epoch\": 2,"
                      " \"restore_best\": true}"));
    if (s) {
        CHECK_INT(s->early_stopping.mode, JOB_ES_MAX); /* auto: an accuracy grows */
        CHECK_INT(s->early_stopping.patience, 5);
        CHECK(s->early_stopping.min_delta == 0.01);
        CHECK_INT(s->early_stopping.has_baseline, 1);
        CHECK(s->early_stopping.baseline == 0.5);
        CHECK_INT(s->early_stopping.start_from_epoch, 2);
        CHECK_INT(s->early_stopping.restore_best, 1);
    }
    job_free(s);
    s = parse_ok(DOC(", \"early_stopping\": {\"monitor\": \"loss\", \"mode\": \"max\"}"));
    if (s)
        CHECK_INT(s->early_stopping.mode, JOB_ES_MAX);
    job_free(s);
    EXPECT_ERROR(DOC(", \"early_stopping\": {}"), "early_stopping.monitor", "validation_split");
    EXPECT_ERROR(DOC(", \"early_stopping\": {\"monitor\": \"f1\"}"), "early_stopping.monitor",
                 "\"val_accuracy\"");
    EXPECT_ERROR(DOC(", \"task\": \"regression\", \"early_stopping\": {\"monitor\": \"accuracy\"}"),
                 "early_stopping.monitor", "classification");
    EXPECT_ERROR(VDOC(", \"early_stopping\": {\"patience\": -1}"), "early_stopping.patience", "");
    EXPECT_ERROR(VDOC(", \"early_stopping\": {\"min_delta\": -0.1}"), "early_stopping.min_delta",
                 "");
    EXPECT_ERROR(VDOC(", \"early_stopping\": {\"mode\": \"up\"}"), "early_stopping.mode", "");
    EXPECT_ERROR(VDOC(", \"early_stopping\": {\"patients\": 3}"), "early_stopping.patients",
                 "unknown");
    EXPECT_ERROR(VDOC(", \"early_stopping\": 5"), "early_stopping", "");
    /* A script reports metrics of its own: any name is taken; restore_best is not. */
    const char *script = "{\"training_script\": \"train.py\", \"code\": \"sha256:"
                         "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\"";
    char buf[1024];
    snprintf(buf, sizeof buf, "%s, \"early_stopping\": {\"monitor\": \"f1\", \"patience\": 2}}",
             script);
    s = parse_ok(buf);
    if (s) {
        CHECK_STR(s->early_stopping.monitor, "f1");
        CHECK_INT(s->early_stopping.mode, JOB_ES_MIN);
    }
    job_free(s);
    round_trip(buf);
    snprintf(buf, sizeof buf, "%s, \"early_stopping\": {\"restore_best\": true}}", script);
    EXPECT_ERROR(buf, "early_stopping.restore_best", "built-in");
    snprintf(buf, sizeof buf, "%s, \"init_from\": \"0123456789abcdef0123456789abcdef\"}", script);
    EXPECT_ERROR(buf, "init_from", "built-in");
    snprintf(buf, sizeof buf, "%s, \"tensorboard\": {\"histograms\": true}}", script);
    EXPECT_ERROR(buf, "tensorboard.histograms", "built-in");

    s = parse_ok(DOC(", \"init_from\": \"0123456789abcdef0123456789abcdef\","
                     " \"tensorboard\": {\"histograms\": true}, \"keep\": true"));
    if (s) {
        CHECK_STR(s->init_from, "0123456789abcdef0123456789abcdef");
        CHECK_INT(s->tb_histograms, 1);
        CHECK_INT(s->keep, 1);
    }
    job_free(s);
    EXPECT_ERROR(DOC(", \"init_from\": \"0123456789ABCDEF0123456789abcdef\""), "init_from", "hex");
    EXPECT_ERROR(DOC(", \"init_from\": 7"), "init_from", "");
    EXPECT_ERROR(DOC(", \"tensorboard\": {\"scalars\": true}"), "tensorboard.scalars", "unknown");
    EXPECT_ERROR(DOC(", \"keep\": \"yes\""), "keep", "");

    s = parse_ok(
        DOC(", \"notify\": [{\"url\": \"https://hooks.example/a\"},"
            " {\"url\": \"http://h.example:81/b?x=1\", \"events\": [\"failed\", \"running\"]}]"));
    if (s) {
        CHECK_INT(s->n_notify, 2);
        CHECK_STR(s->notify[0].url, "https://hooks.example/a");
        CHECK_INT(s->notify[0].events,
                  JOB_EVENT_SUCCEEDED | JOB_EVENT_FAILED | JOB_EVENT_CANCELLED);
        CHECK_INT(s->notify[1].events, JOB_EVENT_FAILED | JOB_EVENT_RUNNING);
        json_t *list = job_notify_to_json(s);
        char *text = json_dumps(list, JSON_COMPACT);
        CHECK_STR(text, "[{\"url\":\"https://hooks.example/a\",\"events\":[\"succeeded\","
                        "\"failed\",\"cancelled\"]},{\"url\":\"http://h.example:81/b?x=1\","
                        "\"events\":[\"failed\",\"running\"]}]");
        free(text);
        json_decref(list);
    }
    job_free(s);
    EXPECT_ERROR(DOC(", \"notify\": [{\"url\": \"ftp://h/x\"}]"), "notify[0].url", "http");
    EXPECT_ERROR(DOC(", \"notify\": [{\"url\": \"https://u:p@h/x\"}]"), "notify[0].url",
                 "credentials");
    EXPECT_ERROR(DOC(", \"notify\": [{\"events\": [\"failed\"]}]"), "notify[0].url", "required");
    EXPECT_ERROR(DOC(", \"notify\": [{\"url\": \"https://h/\", \"events\": [\"done\"]}]"),
                 "notify[0].events[0]", "");
    EXPECT_ERROR(DOC(", \"notify\": [{\"url\": \"https://h/\", \"events\": []}]"),
                 "notify[0].events", "");
    EXPECT_ERROR(DOC(", \"notify\": [{\"url\": \"https://h/\","
                     " \"events\": [\"failed\", \"failed\"]}]"),
                 "notify[0].events[1]", "twice");
    EXPECT_ERROR(DOC(", \"notify\": {\"url\": \"https://h/\"}"), "notify", "array");
    EXPECT_ERROR(DOC(", \"notify\": [{},{},{},{},{},{},{},{},{}]"), "notify", "at most 8");

    round_trip(VDOC(", \"early_stopping\": {\"monitor\": \"val_accuracy\", \"patience\": 5,"
                    " \"min_delta\": 0.01, \"baseline\": 0.5, \"restore_best\": true},"
                    " \"init_from\": \"0123456789abcdef0123456789abcdef\","
                    " \"tensorboard\": {\"histograms\": true}, \"keep\": true,"
                    " \"notify\": [{\"url\": \"https://h/x\", \"events\": [\"succeeded\"]}]"));
#undef VDOC
#undef HPV
}

int main(void)
{
    test_minimal_defaults();
    test_full();
    test_unknown_fields();
    test_wrong_types();
    test_out_of_range();
    test_required_and_rules();
    test_document_level();
    test_many_errors();
    test_round_trip();
    test_activation_names();
    test_url_credentials();
    test_experiment();
    return check_exit();
}
