/* cli_s3: the --s3-endpoint URL and --s3-region R flags of worker, train and serve. worker and
 * train read them over the AWS_* variables into a fetch_s3 (fetch.h); serve hands them to its
 * local workers through their environment (AWS_ENDPOINT_URL_S3, AWS_REGION), which they inherit
 * as they inherit the credentials, so no secret is ever on a command line. A value that can
 * never work (an endpoint that is not http(s), a region that is not a region name) is bad usage
 * at start rather than a failed job later. */
#include <stdio.h>
#include <stdlib.h>

#include "cli/cli.h"
#include "util/err.h"
#include "data/fetch.h"

int cli_s3_opts(const char *cmd, const char *endpoint, const char *region, fetch_s3 *out)
{
    char err[ERR_LEN] = "", *url = NULL;
    fetch_s3_from_env(out, endpoint, region);
    if (fetch_s3_url("s3://bucket/key", out, &url, err) < 0) {
        fprintf(stderr, "trainyard %s: %s\n", cmd, err);
        return -EINVAL;
    }
    free(url);
    return 0;
}

int cli_s3_export(const char *endpoint, const char *region)
{
    fetch_s3 s3;
    if (cli_s3_opts("serve", endpoint, region, &s3) < 0)
        return -EINVAL;
    if ((endpoint && setenv("AWS_ENDPOINT_URL_S3", endpoint, 1) != 0) ||
        (region && setenv("AWS_REGION", region, 1) != 0)) {
        fprintf(stderr, "trainyard serve: cannot set the S3 flags for the local workers\n");
        return -ENOMEM;
    }
    return 0;
}
