/* artifacts: GET /jobs/{id}/artifacts, GET /jobs/{id}/artifacts/{name}, and the worker's
 * PUT /workers/{worker}/jobs/{id}/artifacts/{name}.
 *
 * Downloads are served from <artifacts_dir>/<job id>/<name> by http_reply_file (Range, 304 on
 * If-None-Match) with ETag = the quoted SHA-256 hex, Repr-Digest: sha-256=:<base64>: (RFC
 * 9530) and the older Digest: SHA-256=<base64> (RFC 3230). A name outside the artifact
 * alphabet cannot exist, so it is a 404 like any other missing one.
 *
 * Uploads: the route streams the body to a temporary file (body_to_file) within
 * API_ARTIFACT_MAX_BODY (routes.c) and app->max_artifact_bytes (checked here). The handler
 * checks the lease first (so a stale worker does not make the server hash gigabytes for
 * nothing), hashes the file outside any transaction, then sched_artifact_add() re-checks the
 * lease and moves the file into place in one transaction. A full disk anywhere is -ENOSPC,
 * which the error table answers with 507. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/api_priv.h"
#include "api/encode.h"
#include "db/artifacts.h"
#include "db/jobs.h"
#include "scheduler/lifecycle.h"
#include "util/datadir.h"
#include "util/sha256.h"
#include "util/timeutil.h"

static int api_artifact_add(void *ctx, const db_artifact *a)
{
    json_t *o = api_encode_artifact(a);
    if (!o || json_array_append_new(ctx, o) < 0)
        return -ENOMEM;
    return 0;
}

int api_artifacts_list(http_req *r, void *ctx)
{
    app *a = ctx;
    db *d = NULL;
    db_job j;
    int rc = api_job_find(r, a, &d, &j);
    if (rc < 0)
        return rc;
    json_t *list = json_array();
    rc = list ? db_artifact_list(d, j.seq, api_artifact_add, list, http_errbuf(r)) : -ENOMEM;
    db_job_clear(&j);
    return api_reply_list(r, "artifacts", list, rc);
}

/* The SHA-256 hex as base64 (44 characters and a NUL). */
static int api_digest_b64(const char *hex, char out[48])
{
    uint8_t raw[32];
    for (int i = 0; i < 32; i++) {
        unsigned v = 0;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1)
            return -EINVAL;
        raw[i] = (uint8_t)v;
    }
    return api_encode_base64(raw, sizeof raw, 0, out, 48) < 0 ? -EINVAL : 0;
}

int api_artifacts_get(http_req *r, void *ctx)
{
    app *a = ctx;
    char *err = http_errbuf(r);
    const char *name = http_param(r, "name");
    db *d = NULL;
    db_job j;
    int rc = api_job_find(r, a, &d, &j);
    if (rc < 0)
        return rc;
    db_artifact art;
    if (!sched_artifact_name_ok(name))
        rc = err_set(err, -ENOENT, "the job has no artifact named %s", name);
    else
        rc = db_artifact_get(d, j.seq, name, &art, err);
    if (rc < 0) {
        db_job_clear(&j);
        return rc;
    }
    char path[DATADIR_PATH_MAX], etag[70], b64[48], digest[64];
    rc = datadir_job_file(a->artifacts_dir, j.id, art.name, path);
    db_job_clear(&j);
    if (rc < 0)
        return err_set(err, rc, "the artifact's path is too long");
    snprintf(etag, sizeof etag, "\"%s\"", art.sha256);
    if (api_digest_b64(art.sha256, b64) == 0) {
        snprintf(digest, sizeof digest, "sha-256=:%s:", b64);
        http_header_add(r, "Repr-Digest", digest);
        snprintf(digest, sizeof digest, "SHA-256=%s", b64);
        http_header_add(r, "Digest", digest);
    }
    return http_reply_file(r, path, "application/octet-stream", etag);
}

int api_artifacts_upload(http_req *r, void *ctx)
{
    app *a = ctx;
    char *err = http_errbuf(r);
    const char *worker = http_param(r, "worker");
    const char *name = http_param(r, "name");
    if (!sched_artifact_name_ok(name))
        return api_reply_bad_param(r, "name",
                                   "must be 1 to 128 letters, digits, '.', '_' or '-', not "
                                   "starting with '.'");
    uint64_t len = 0;
    const char *tmp = NULL;
    db *d = NULL;
    int rc = api_upload_begin(r, a, "artifact", &tmp, &len, &d);
    if (rc < 0)
        return rc;

    db_artifact art;
    memset(&art, 0, sizeof art);
    snprintf(art.name, sizeof art.name, "%s", name);
    const char *digest = http_body_sha256(r); /* hashed while it streamed in */
    if (!digest)
        return err_set(err, -EIO, "the upload's digest is missing");
    snprintf(art.sha256, sizeof art.sha256, "%s", digest);
    art.size = (int64_t)len;
    art.created_at = time_wall_ms();
    rc = sched_artifact_add(d, http_param(r, "id"), worker, a->artifacts_dir, tmp, &art, err);
    if (rc == -EDQUOT)
        return api_reply_bad_param(r, "name", err);
    if (rc < 0)
        return rc;
    json_t *body = api_encode_artifact(&art);
    if (!body)
        return err_set(err, -ENOMEM, "out of memory");
    return http_reply_json(r, 201, body);
}
