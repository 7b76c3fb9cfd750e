/* Unit tests of script jobs in the job document (job/job_script.c and the parts of job/job.c
 * both kinds share): training_script and the code fields, seed 002's aliases model_name and
 * dataset_location, s3:// dataset URLs, what a script job may not say, and the round trip
 * job_to_json → job_from_json. */
#include "job/job.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check.h"
#include "tests/unit/job/job_check.h"

#define HEX64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define CODE  "\"code\": \"sha256:" HEX64 "\""
/* A script job with the given members after training_script and code. */
#define SCRIPT(extra) "{\"training_script\": \"train.py\", " CODE extra "}"

static void test_seed_request(void)
{
    /* Seed 002's request, as its client sends it. */
    job_spec *s = parse_ok("{\"model_name\": \"mlp\", \"dataset_location\": "
                           "\"s3://my-bucket/data/train.csv\", \"training_script\": \"train.py\","
                           " " CODE ", \"hyperparameters\": {\"epochs\": 3, \"lr\": 0.01,"
                           " \"layers\": [64, 10], \"opt\": {\"name\": \"adam\"}}}");
    if (!s)
        return;
    CHECK(job_is_script(s));
    CHECK_STR(s->name, "mlp");
    CHECK_STR(s->dataset_url, "s3://my-bucket/data/train.csv");
    CHECK_STR(s->script, "train.py");
    CHECK_STR(s->code, "sha256:" HEX64);
    CHECK(s->code_url == NULL);
    CHECK_STR(s->hyperparameters_json,
              "{\"epochs\":3,\"lr\":0.01,\"layers\":[64,10],\"opt\":{\"name\":\"adam\"}}");
    /* The resolved document uses the canonical names only. */
    json_t *doc = job_to_json(s);
    CHECK_STR(json_string_value(json_object_get(doc, "name")), "mlp");
    CHECK_STR(json_string_value(json_object_get(doc, "dataset_url")),
              "s3://my-bucket/data/train.csv");
    CHECK(json_object_get(doc, "model_name") == NULL);
    CHECK(json_object_get(doc, "dataset_location") == NULL);
    CHECK(json_object_get(doc, "model") == NULL);
    CHECK(json_object_get(doc, "task") == NULL);
    CHECK_INT(
        json_integer_value(json_object_get(json_object_get(doc, "hyperparameters"), "epochs")), 3);
    json_decref(doc);
    job_free(s);
}

static void test_defaults(void)
{
    job_spec *s = parse_ok(SCRIPT(""));
    if (!s)
        return;
    CHECK_STR(s->name, "job");
    CHECK(s->dataset_url == NULL);
    CHECK(s->sha256 == NULL);
    CHECK_STR(s->hyperparameters_json, "{}");
    CHECK_INT(s->max_attempts, 3);
    CHECK_INT(s->delete_checkpoint, 1);
    json_t *doc = job_to_json(s);
    CHECK(json_is_null(json_object_get(doc, "dataset_url")));
    CHECK(json_is_null(json_object_get(json_object_get(doc, "dataset"), "sha256")));
    CHECK_INT(json_object_size(json_object_get(doc, "hyperparameters")), 0);
    CHECK(json_is_object(json_object_get(doc, "resources")));
    json_decref(doc);
    job_free(s);
    /* A built-in job is not a script job and keeps no script fields. */
    s = parse_ok("{\"dataset_url\": \"http://h/x.csv\", \"hyperparameters\": {}}");
    if (s) {
        CHECK(!job_is_script(s));
        CHECK(s->hyperparameters_json == NULL);
        doc = job_to_json(s);
        CHECK(json_object_get(doc, "training_script") == NULL);
        json_decref(doc);
    }
    job_free(s);
}

static void test_training_script(void)
{
    job_free(parse_ok("{\"training_script\": \"src/jobs/train v2.py\", " CODE "}"));
    job_free(parse_ok("{\"training_script\": \"./run.sh\", " CODE "}"));
    job_free(parse_ok("{\"training_script\": \"a..b/c\", " CODE "}"));
    EXPECT_ERROR("{\"training_script\": \"\", " CODE "}", "training_script", "1 to 255 bytes");
    EXPECT_ERROR("{\"training_script\": \"/etc/passwd\", " CODE "}", "training_script",
                 "no leading '/'");
    EXPECT_ERROR("{\"training_script\": \"../x.py\", " CODE "}", "training_script", "\"..\"");
    EXPECT_ERROR("{\"training_script\": \"a/../../x.py\", " CODE "}", "training_script", "\"..\"");
    EXPECT_ERROR("{\"training_script\": \"a/..\", " CODE "}", "training_script", "\"..\"");
    EXPECT_ERROR("{\"training_script\": \"a\\\\b.py\", " CODE "}", "training_script", "backslash");
    EXPECT_ERROR("{\"training_script\": \"caf\u00e9.py\", " CODE "}", "training_script",
                 "printable ASCII");
    EXPECT_ERROR("{\"training_script\": \"a\\tb\", " CODE "}", "training_script",
                 "printable ASCII");
    EXPECT_ERROR("{\"training_script\": 3, " CODE "}", "training_script", "a string");
    char big[400];
    snprintf(big, sizeof big, "{\"training_script\": \"%0256d\", " CODE "}", 0);
    EXPECT_ERROR(big, "training_script", "1 to 255 bytes");
}

static void test_code(void)
{
    EXPECT_ERROR("{\"training_script\": \"t.py\"}", "code",
                 "a script job needs its code: upload a .tar.gz of the folder with POST /code "
                 "and give its address as code, or give code_url");
    EXPECT_ERROR("{\"training_script\": \"t.py\", \"code\": \"sha256:abc\"}", "code",
                 "\"sha256:\" and 64 lower-case");
    EXPECT_ERROR("{\"training_script\": \"t.py\", \"code\": \"" HEX64 "\"}", "code", "sha256:");
    EXPECT_ERROR("{\"training_script\": \"t.py\", \"code\": \"sha256:"
                 "0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef\"}",
                 "code", "lower-case");
    EXPECT_ERROR(SCRIPT(", \"code_url\": \"https://h/c.tar.gz\""), "code_url", "not both");
    EXPECT_ERROR(SCRIPT(", \"code_sha256\": \"" HEX64 "\""), "code_sha256", "code_url only");
    /* code_url: http, https, file, s3; code_sha256 optional, lower-cased. */
    job_spec *s = parse_ok("{\"training_script\": \"t.py\", \"code_url\": "
                           "\"https://h/c.tar.gz\", \"code_sha256\": \""
                           "0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef\"}");
    if (s) {
        CHECK_STR(s->code_url, "https://h/c.tar.gz");
        CHECK_STR(s->code_sha256, HEX64);
        CHECK(s->code == NULL);
    }
    job_free(s);
    job_free(parse_ok("{\"training_script\": \"t.py\", \"code_url\": \"s3://code-b/x.tar.gz\"}"));
    job_free(parse_ok("{\"training_script\": \"t.py\", \"code_url\": \"file:///srv/c.tar.gz\","
                      " \"code_sha256\": null}"));
    EXPECT_ERROR("{\"training_script\": \"t.py\", \"code_url\": \"ftp://h/c.tar.gz\"}", "code_url",
                 "s3://");
    EXPECT_ERROR("{\"training_script\": \"t.py\", \"code_url\": \"https://u:p@h/c.tar.gz\"}",
                 "code_url", "credentials");
    EXPECT_ERROR("{\"training_script\": \"t.py\", \"code_url\": \"https://h/c.tar.gz\","
                 " \"code_sha256\": \"abc\"}",
                 "code_sha256", "64 hexadecimal");
    /* The code fields belong to script jobs only. */
    EXPECT_ERROR("{\"dataset_url\": \"http://h/x\", \"hyperparameters\": {}, " CODE "}", "code",
                 "only with training_script");
    EXPECT_ERROR("{\"dataset_url\": \"http://h/x\", \"hyperparameters\": {},"
                 " \"code_url\": \"http://h/c.tar.gz\"}",
                 "code_url", "only with training_script");
}

static void test_script_refusals(void)
{
    EXPECT_ERROR(SCRIPT(", \"model\": {\"layers\": []}"), "model",
                 "is for built-in jobs; a script job builds its own model");
    EXPECT_ERROR(SCRIPT(", \"task\": \"regression\""), "task", "is for built-in jobs");
    EXPECT_ERROR(SCRIPT(", \"binary\": true"), "binary", "is for built-in jobs");
    EXPECT_ERROR(SCRIPT(", \"dataset\": {\"format\": \"csv\"}"), "dataset.format",
                 "may hold only sha256");
    EXPECT_ERROR(SCRIPT(", \"dataset\": {\"sha256\": \"abc\"}"), "dataset.sha256",
                 "64 hexadecimal");
    EXPECT_ERROR(SCRIPT(", \"hyperparameters\": [1]"), "hyperparameters", "an object");
    EXPECT_ERROR(SCRIPT(", \"resources\": {\"device\": \"tpu\"}"), "resources.device", "\"gpu\"");
    EXPECT_ERROR(SCRIPT(", \"max_attempts\": 0"), "max_attempts", "1 to 100");
    /* A script's hyperparameters are its own: any members, any depth the parser takes. */
    job_spec *s = parse_ok(SCRIPT(", \"hyperparameters\": {\"momentum\": 5, \"x\": [null, \"y\"]},"
                                  " \"dataset\": {\"sha256\": \"" HEX64 "\"},"
                                  " \"dataset_url\": \"https://h/d.bin\","
                                  " \"resources\": {\"device\": \"gpu\"}, \"priority\": 7,"
                                  " \"delete_checkpoint\": false"));
    if (s) {
        CHECK_STR(s->hyperparameters_json, "{\"momentum\":5,\"x\":[null,\"y\"]}");
        CHECK_STR(s->sha256, HEX64);
        CHECK_INT(s->device, JOB_DEVICE_GPU);
        CHECK_INT(s->priority, 7);
        CHECK_INT(s->delete_checkpoint, 0);
    }
    job_free(s);
}

static void test_aliases(void)
{
    job_spec *s = parse_ok("{\"model_name\": \"m\", \"dataset_location\": \"http://h/x.csv\","
                           " \"hyperparameters\": {}}");
    if (s) {
        CHECK_STR(s->name, "m");
        CHECK_STR(s->dataset_url, "http://h/x.csv");
    }
    job_free(s);
    EXPECT_ERROR("{\"name\": \"a\", \"model_name\": \"b\", \"dataset_url\": \"http://h/x\","
                 " \"hyperparameters\": {}}",
                 "model_name", "give name or model_name, not both");
    EXPECT_ERROR("{\"dataset_url\": \"http://h/x\", \"dataset_location\": \"http://h/y\","
                 " \"hyperparameters\": {}}",
                 "dataset_location", "give dataset_url or dataset_location, not both");
    EXPECT_ERROR("{\"dataset_location\": \"ftp://h/x\", \"hyperparameters\": {}}",
                 "dataset_location", "s3://");
    EXPECT_ERROR("{\"model_name\": \"\", \"dataset_url\": \"http://h/x\", \"hyperparameters\": {}}",
                 "model_name", "1 to 128");
    /* A built-in job still needs its dataset, under either name. */
    EXPECT_ERROR("{\"hyperparameters\": {}}", "dataset_url", "is required");
}

static void test_s3_urls(void)
{
    job_spec *s = parse_ok("{\"dataset_url\": \"s3://bucket.name-1/a/b%20c.csv\","
                           " \"hyperparameters\": {}}");
    if (s)
        CHECK_STR(s->dataset_url, "s3://bucket.name-1/a/b%20c.csv");
    job_free(s);
    const struct {
        const char *url, *part;
    } bad[] = {
        {"s3://ab/key", "3 to 63"},
        {"s3://Bucket/key", "3 to 63"},
        {"s3://b_ucket/key", "3 to 63"},
        {"s3://bucket", "a key after the bucket"},
        {"s3://bucket/", "a key after the bucket"},
        {"s3://u:p@bucket/key", "credentials"},
        {"s3://bucket/k?x=1", "'?' or '#'"},
        {"s3://", "nothing after the scheme"},
        {"S3://bucket/key", "s3://"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char doc[256];
        snprintf(doc, sizeof doc, "{\"dataset_url\": \"%s\", \"hyperparameters\": {}}", bad[i].url);
        EXPECT_ERROR(doc, "dataset_url", bad[i].part);
    }
    char doc[256];
    snprintf(doc, sizeof doc, "{\"dataset_url\": \"s3://%064d/k\", \"hyperparameters\": {}}", 0);
    EXPECT_ERROR(doc, "dataset_url", "3 to 63");
}

static void test_script_round_trip(void)
{
    round_trip(SCRIPT(""));
    round_trip("{\"model_name\": \"seed\", \"dataset_location\": \"s3://bkt/k.csv\","
               " \"training_script\": \"dir/train.py\", " CODE ","
               " \"hyperparameters\": {\"a\": 1.5, \"b\": {\"c\": [1, 2]}, \"d\": \"e\"},"
               " \"dataset\": {\"sha256\": \"" HEX64 "\"}, \"max_attempts\": 5,"
               " \"max_runtime_seconds\": 60, \"priority\": -3, \"delete_checkpoint\": false,"
               " \"resources\": {\"device\": \"cpu\"}}");
    round_trip("{\"training_script\": \"run\", \"code_url\": \"https://h/c.tar.gz?sig=1\","
               " \"code_sha256\": \"" HEX64 "\", \"dataset_url\": \"https://h/d.csv\"}");
    round_trip("{\"training_script\": \"run\", \"code_url\": \"s3://bkt/c.tar.gz\"}");
}

int main(void)
{
    test_seed_request();
    test_defaults();
    test_training_script();
    test_code();
    test_script_refusals();
    test_aliases();
    test_s3_urls();
    test_script_round_trip();
    return check_exit();
}
