/* checkpoints: the worker protocol's PUT and GET /workers/{worker}/jobs/{id}/checkpoint.
 *
 * A worker uploads the checkpoint.safetensors its trainer writes after an epoch (see
 * train/checkpoint.h); the server keeps the newest per job at <artifacts_dir>/<id>/.checkpoint
 * (a dot name: never listed or served as an artifact) and its epoch in jobs.checkpoint_epoch.
 * When the lease lapses, the next attempt's lease names the GET, and the new lease holder
 * resumes from the file. Only the lease holder may upload or download (409 otherwise).
 *
 * The epoch is read from the file's safetensors header ("__metadata__" → "trainyard.epoch"),
 * whose length is capped by API_CKPT_MAX_HEADER; the rest of the file is not looked at here:
 * the trainer validates it in full before resuming. Uploads stream to a temporary file within
 * the route's cap and app->max_artifact_bytes, like artifacts.
 *
 * A script job's checkpoint is its checkpoint folder packed as a .tar.gz by the worker: its
 * epoch comes in the query (?epoch=N, required), only the gzip magic is checked (the next
 * attempt's worker unpacks it with the bundle checks), and it replaces the stored one when N is
 * at or after the stored epoch (sched_checkpoint_store: a newer snapshot of the same epoch). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_priv.h"
#include "db/artifacts.h"
#include "db/jobs.h"
#include "scheduler/lifecycle.h"
#include "util/datadir.h"

#define API_CKPT_MAX_HEADER (64u << 20) /* the metadata holds the job and every epoch's metrics */

/* The "trainyard.epoch" of the safetensors file at path into *epoch; -EINVAL with a sentence
 * when it is not a trainyard checkpoint. */
static int api_checkpoint_epoch(const char *path, int *epoch, char *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return err_set(err, -EIO, "cannot read the upload: %s", strerror(errno));
    unsigned char len8[8];
    char *head = NULL;
    json_t *root = NULL;
    int rc = -EINVAL;
    uint64_t len = 0;
    if (fread(len8, 1, 8, f) != 8) {
        err_set(err, rc, "the checkpoint is shorter than a safetensors header");
        goto out;
    }
    for (int i = 7; i >= 0; i--)
        len = len << 8 | len8[i];
    if (len < 2 || len > API_CKPT_MAX_HEADER) {
        err_set(err, rc, "the checkpoint's header length %llu is not 2..%u bytes",
                (unsigned long long)len, API_CKPT_MAX_HEADER);
        goto out;
    }
    head = malloc((size_t)len);
    if (!head) {
        rc = err_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    if (fread(head, 1, (size_t)len, f) != len) {
        err_set(err, rc, "the checkpoint ends inside its header");
        goto out;
    }
    root = json_loadb(head, (size_t)len, 0, NULL);
    const char *text = json_string_value(
        json_object_get(json_object_get(root, "__metadata__"), "trainyard.epoch"));
    char *end = NULL;
    long e = text ? strtol(text, &end, 10) : 0;
    if (!text || end == text || *end || e < 1 || e > 1000000) {
        err_set(err, rc,
                "the upload is not a trainyard checkpoint after an epoch "
                "(no metadata \"trainyard.epoch\" of 1 or more)");
        goto out;
    }
    *epoch = (int)e;
    rc = 0;
out:
    json_decref(root);
    free(head);
    fclose(f);
    return rc;
}

/* -EINVAL unless the file at path (len bytes) starts with gzip's magic. */
static int api_checkpoint_gzip(const char *path, uint64_t len, char *err)
{
    unsigned char magic[2] = {0, 0};
    FILE *f = fopen(path, "rb");
    if (!f)
        return err_set(err, -EIO, "cannot read the upload: %s", strerror(errno));
    size_t got = fread(magic, 1, 2, f);
    fclose(f);
    if (len < 2 || got != 2 || magic[0] != 0x1f || magic[1] != 0x8b)
        return err_set(err, -EINVAL,
                       "a script job's checkpoint must be a .tar.gz of its checkpoint folder (no "
                       "gzip header)");
    return 0;
}

/* Whether the {id} job is a script job, into *script. */
static int api_checkpoint_is_script(http_req *r, app *a, int *script)
{
    db *d = NULL;
    db_job j;
    int rc = api_job_find(r, a, &d, &j);
    if (rc < 0)
        return rc;
    *script = j.script;
    db_job_clear(&j);
    return 0;
}

int api_checkpoints_upload(http_req *r, void *ctx)
{
    app *a = ctx;
    char *err = http_errbuf(r);
    const char *worker = http_param(r, "worker");
    uint64_t len = 0;
    const char *tmp = NULL;
    db *d = NULL;
    int rc = api_upload_begin(r, a, "checkpoint", &tmp, &len, &d);
    if (rc < 0)
        return rc;
    int epoch = 0, stored = 0, script = 0;
    rc = api_checkpoint_is_script(r, a, &script);
    if (rc < 0)
        return rc;
    if (script) {
        long e = 0;
        if (api_parse_int(http_query(r, "epoch"), 1, 100000, &e) < 0)
            return api_reply_bad_param(r, "epoch",
                                       "is required for a script job's checkpoint: the epoch "
                                       "(1 to 100000) its snapshot follows");
        epoch = (int)e;
        rc = api_checkpoint_gzip(tmp, len, err);
    } else {
        rc = api_checkpoint_epoch(tmp, &epoch, err);
    }
    if (rc == -EINVAL)
        return api_reply_bad_param(r, "body", err);
    if (rc < 0)
        return rc;
    rc = sched_checkpoint_store(d, http_param(r, "id"), worker, a->artifacts_dir, tmp,
                                http_body_sha256(r), epoch, &stored, err);
    if (rc < 0)
        return rc;
    json_t *body = json_pack("{s:i, s:b}", "epoch", epoch, "stored", stored);
    if (!body)
        return err_set(err, -ENOMEM, "out of memory");
    return http_reply_json(r, stored ? 201 : 200, body);
}

int api_checkpoints_get(http_req *r, void *ctx)
{
    app *a = ctx;
    char *err = http_errbuf(r);
    db *d = NULL;
    db_job j;
    int rc = api_job_find(r, a, &d, &j);
    if (rc < 0)
        return rc;
    int epoch = 0;
    char path[DATADIR_PATH_MAX];
    rc = sched_lease_check(&j, http_param(r, "worker"), err);
    if (rc == 0)
        rc = db_job_checkpoint_epoch(d, j.seq, &epoch, err);
    if (rc == 0 && epoch == 0)
        rc = err_set(err, -ENOENT, "job %s has no checkpoint", j.id);
    if (rc == 0 && datadir_job_checkpoint(a->artifacts_dir, j.id, path) < 0)
        rc = err_set(err, -ENOENT, "job %s has no checkpoint", j.id);
    db_job_clear(&j);
    if (rc < 0)
        return rc;
    return http_reply_file(r, path, "application/octet-stream", NULL);
}

int api_init_model_get(http_req *r, void *ctx)
{
    app *a = ctx;
    char *err = http_errbuf(r);
    db *d = NULL;
    db_job j;
    int rc = api_job_find(r, a, &d, &j);
    if (rc < 0)
        return rc;
    char path[DATADIR_PATH_MAX], from[DB_ID_LEN + 1] = "";
    rc = sched_lease_check(&j, http_param(r, "worker"), err);
    if (rc == 0) {
        json_t *doc = json_loads(j.document, 0, NULL);
        const char *id = json_string_value(json_object_get(doc, "init_from"));
        if (id && strlen(id) <= DB_ID_LEN)
            memcpy(from, id, strlen(id) + 1);
        json_decref(doc);
        if (!from[0])
            rc = err_set(err, -ENOENT, "job %s has no init_from", j.id);
    }
    /* The submit checked the model; it may have been deleted with its job since. */
    db_artifact art;
    db_job src;
    if (rc == 0 && db_job_get(d, from, &src, err) == 0) {
        int64_t seq = src.seq;
        db_job_clear(&src);
        rc = db_artifact_get(d, seq, "model.safetensors", &art, err);
    } else if (rc == 0) {
        rc = -ENOENT;
    }
    if (rc == -ENOENT && from[0])
        err_set(err, -ENOENT, "job %s's init_from, job %s, or its model.safetensors is gone", j.id,
                from);
    if (rc == 0 && datadir_job_file(a->artifacts_dir, from, "model.safetensors", path) < 0)
        rc = err_set(err, -ENOENT, "job %s has no model.safetensors", from);
    db_job_clear(&j);
    if (rc < 0)
        return rc;
    return http_reply_file(r, path, "application/octet-stream", NULL);
}
