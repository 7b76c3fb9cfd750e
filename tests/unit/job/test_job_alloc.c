/* Fault tests of job/job: job_parse, job_from_json and job_to_json with the n-th allocation
 * failing (ours and jansson's), for every n until a run completes untouched. Each failing run
 * must return a clean error (-ENOMEM with a message on field "", or -EINVAL with the problems
 * for a bad document), leave *out as it was, and leak nothing (ASan). A run that succeeds must
 * give the same resolved document as the untouched one. */
#include "job/job.h"

#include <errno.h>

#include "tests/unit/alloc_fail.h"
#include "tests/unit/check.h"

/* Every section, dense and dropout layers, a label name, a checksum and credentials in the URL. */
static const char full_doc[] =
    "{\"name\": \"fault\", \"dataset_url\": \"https://user:pw@example.com/data.csv\","
    " \"dataset\": {\"label_column\": \"species\", \"header\": true,"
    "  \"sha256\": \"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\"},"
    " \"task\": \"classification\","
    " \"model\": {\"layers\": [{\"type\": \"dense\", \"units\": 16, \"activation\": \"tanh\"},"
    "  {\"type\": \"dropout\", \"rate\": 0.25}, {\"type\": \"dense\", \"units\": 8}]},"
    " \"hyperparameters\": {\"epochs\": 5, \"optimizer\": \"sgd\", \"momentum\": 0.9,"
    "  \"learning_rate\": 0.05, \"seed\": 42},"
    " \"resources\": {\"device\": \"cpu\"}, \"priority\": 3}";

/* An image job: every layer type, the image dataset's options, the output layer given. */
static const char cnn_doc[] =
    "{\"dataset_url\": \"https://example.com/cifar.tar.gz\", \"hyperparameters\": {},"
    " \"dataset\": {\"format\": \"cifar10\", \"resize\": [16, 16], \"scale\": \"standardize\","
    "  \"augment\": {\"flip\": true, \"crop_padding\": 2}},"
    " \"model\": {\"input_shape\": [16, 16, 3], \"layers\": ["
    "  {\"type\": \"conv2d\", \"filters\": 4, \"kernel_size\": 3, \"padding\": \"same\"},"
    "  {\"type\": \"batchnorm\"}, {\"type\": \"maxpool2d\"}, {\"type\": \"avgpool2d\"},"
    "  {\"type\": \"dropout\", \"rate\": 0.1}, {\"type\": \"global_avgpool2d\"},"
    "  {\"type\": \"flatten\"}, {\"type\": \"dense\", \"units\": 10, \"activation\": "
    "\"softmax\"}]}}";

/* A script job under seed 002's names: the code, its own hyperparameters, an s3:// dataset. */
static const char script_doc[] =
    "{\"model_name\": \"seed\", \"dataset_location\": \"s3://bucket/train.csv\","
    " \"training_script\": \"src/train.py\", \"code_url\": \"https://example.com/c.tar.gz\","
    " \"code_sha256\": \"0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef\","
    " \"dataset\": {\"sha256\": null}, \"hyperparameters\": {\"epochs\": 3, \"layers\": [64, 10],"
    " \"opt\": {\"lr\": 0.01}}, \"delete_checkpoint\": false}";

/* Three problems, one of them a URL quoted (redacted) in its message. */
static const char bad_doc[] =
    "{\"dataset_url\": \"ftp://user:pw@example.com/x.csv\", \"hyperparameters\": {\"epochs\": 0},"
    " \"colour\": \"red\"}";

#define UNTOUCHED ((job_spec *)1)

/* A failed parse: a negative code with at least one message, and *out untouched. */
static void check_failed(int rc, job_spec *s, const field_errors *errs, int allowed_einval)
{
    CHECK(rc == -ENOMEM || (allowed_einval && rc == -EINVAL));
    CHECK(s == UNTOUCHED);
    CHECK(errs->count >= 1 && errs->items[0].message[0] != '\0');
    if (rc == -ENOMEM) {
        int named = 0;
        for (size_t i = 0; i < errs->count; i++)
            named |= strstr(errs->items[i].message, "out of memory") != NULL;
        CHECK(named);
    }
}

/* A successful parse must give the document the untouched run gave. */
static void check_same(job_spec *s, const json_t *want)
{
    json_t *got = job_to_json(s);
    CHECK(got && json_equal(got, want));
    json_decref(got);
    job_free(s);
}

/* Our allocations only: every failure must be a clean -ENOMEM. */
static void test_parse(const char *doc)
{
    job_spec *ref = NULL;
    field_errors errs;
    CHECK_INT(job_parse(doc, strlen(doc), &ref, &errs), 0);
    json_t *want = job_to_json(ref);
    CHECK(want != NULL);
    long points = 0;
    alloc_fail_jansson(0);
    ALLOC_FAIL_LOOP(&points, {
        job_spec *s = UNTOUCHED;
        int rc = job_parse(doc, strlen(doc), &s, &errs);
        int hit = alloc_fail_off();
        if (rc == 0 && !hit)
            check_same(s, want);
        else
            check_failed(rc, s, &errs, 0);
    });
    alloc_fail_jansson(1);
    printf("job_parse: %ld failure points of ours\n", points);
    CHECK(points >= 3); /* the spec, its name and its URL */
    json_decref(want);
    job_free(ref);
}

/* jansson's too. Its lexer (2.14) reports a failed string copy as a syntax error and drops a
 * byte when growing a string's buffer fails, so here a run may end in -EINVAL "invalid JSON",
 * or even succeed with a byte missing; every run must still end without a crash or a leak,
 * with a message on failure and *out untouched. */
static void test_parse_jansson(void)
{
    long points = 0, nomem = 0, syntax = 0, passed = 0;
    ALLOC_FAIL_LOOP(&points, {
        job_spec *s = UNTOUCHED;
        field_errors errs;
        int rc = job_parse(full_doc, strlen(full_doc), &s, &errs);
        alloc_fail_off();
        if (rc == 0) {
            passed++;
            job_free(s);
        } else {
            check_failed(rc, s, &errs, 1);
            nomem += rc == -ENOMEM;
            syntax += rc == -EINVAL;
        }
    });
    printf("job_parse with jansson's allocations: %ld failure points, %ld -ENOMEM, %ld -EINVAL,"
           " %ld passed\n",
           points, nomem, syntax, passed - 1);
    CHECK(points > 50);
    CHECK(nomem > points / 2);
}

static void test_from_json(void)
{
    json_t *doc = json_loads(full_doc, 0, NULL);
    job_spec *ref = NULL;
    CHECK_INT(job_from_json(doc, &ref, NULL), 0);
    json_t *want = job_to_json(ref);
    long points = 0;
    ALLOC_FAIL_LOOP(&points, {
        job_spec *s = UNTOUCHED;
        field_errors errs;
        int rc = job_from_json(doc, &s, &errs);
        int hit = alloc_fail_off();
        if (rc == 0 && !hit)
            check_same(s, want);
        else
            check_failed(rc, s, &errs, 0);
    });
    printf("job_from_json: %ld failure points\n", points);
    CHECK(points > 3);
    json_decref(want);
    json_decref(doc);
    job_free(ref);
}

static void test_bad_document(void)
{
    long points = 0;
    ALLOC_FAIL_LOOP(&points, {
        job_spec *s = UNTOUCHED;
        field_errors errs;
        int rc = job_parse(bad_doc, strlen(bad_doc), &s, &errs);
        alloc_fail_off();
        check_failed(rc, s, &errs, 1);
    });
    printf("job_parse (bad document): %ld failure points\n", points);
    CHECK(points > 3);
}

static void test_to_json(const char *doc)
{
    job_spec *ref = NULL;
    CHECK_INT(job_parse(doc, strlen(doc), &ref, NULL), 0);
    json_t *want = job_to_json(ref);
    long points = 0;
    ALLOC_FAIL_LOOP(&points, {
        json_t *got = job_to_json(ref);
        int hit = alloc_fail_off();
        CHECK(hit ? got == NULL : json_equal(got, want));
        json_decref(got);
    });
    printf("job_to_json: %ld failure points\n", points);
    CHECK(points > 20);
    json_decref(want);
    job_free(ref);
}

int main(void)
{
    CHECK_INT(alloc_fail_init(), 0);
    test_parse(full_doc);
    test_parse(cnn_doc);
    test_parse(script_doc);
    test_parse_jansson();
    test_from_json();
    test_bad_document();
    test_to_json(full_doc);
    test_to_json(cnn_doc);
    test_to_json(script_doc);
    return check_exit();
}
