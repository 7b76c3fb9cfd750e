/* fuzz_job: libFuzzer target for the job-document validator (job/job.c).
 *
 * Input: arbitrary bytes, handed to job_parse() as the text of a job document. Properties:
 * job_parse() never crashes or leaks, and fails with -EINVAL (with at least one error, at most
 * FIELD_ERRORS_MAX) or succeeds; on success, the resolved document job_to_json() writes is
 * accepted by job_from_json(), and the spec that gives resolves to the same document (compared as
 * sorted compact JSON text), which is job.h's promise that job.json artifacts read back. The one
 * exception is a URL with credentials: the resolved document shows them as ***@, which
 * job_from_json() refuses on dataset_url alone. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "util/url.h"
#include "job/job.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char *fuzz_dump(const json_t *doc)
{
    char *s = json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS);
    if (!s)
        abort();
    return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    job_spec *spec = NULL, *again = NULL;
    field_errors errs;
    int rc = job_parse((const char *)data, size, &spec, &errs);
    if (rc < 0) {
        if (rc != -EINVAL || errs.count == 0 || errs.count > FIELD_ERRORS_MAX)
            abort();
        return 0;
    }
    json_t *doc = job_to_json(spec);
    if (!doc)
        abort();
    rc = job_from_json(doc, &again, &errs);
    size_t at, len;
    if (url_userinfo_span(spec->dataset_url, &at, &len)) {
        if (rc != -EINVAL || errs.count != 1 || strcmp(errs.items[0].field, "dataset_url") != 0)
            abort(); /* refused for the redacted credentials, and for nothing else */
        json_decref(doc);
        job_free(spec);
        return 0;
    }
    if (rc < 0) {
        fprintf(stderr, "job_from_json refused job_to_json's output: %s: %s\n",
                errs.count ? errs.items[0].field : "", errs.count ? errs.items[0].message : "");
        abort();
    }
    json_t *doc2 = job_to_json(again);
    if (!doc2)
        abort();
    char *a = fuzz_dump(doc), *b = fuzz_dump(doc2);
    if (strcmp(a, b) != 0) {
        fprintf(stderr, "the resolved document changed on a round trip:\n%s\n%s\n", a, b);
        abort();
    }
    free(a);
    free(b);
    json_decref(doc);
    json_decref(doc2);
    job_free(spec);
    job_free(again);
    return 0;
}
