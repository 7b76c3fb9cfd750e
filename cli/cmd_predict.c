/* cmd_predict: `trainyard predict NAME|JOB_ID FILE.json|-` — asks a model for predictions over
 * the REST API (api/predictions.c) and prints the answer.
 *
 * The first word is a job id (32 hex digits: POST /jobs/{id}/predict, that job's model) or a
 * model name (POST /v1/models/{name}[/versions/{v}]:predict, or :classify / :regress). The file
 * is the request body as TensorFlow Serving takes it ({"instances": [...]}, {"inputs": ...},
 * {"examples": [...]}); a bare list is taken as the instances. The answer is printed as JSON. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_client.h"
#include "util/err.h"

static const char predict_help[] =
    "usage: trainyard predict NAME|JOB_ID FILE.json|- [options]\n"
    "\n"
    "Asks a trained model for predictions and prints the answer (JSON). NAME is a model's\n"
    "name (a job's name: each succeeded job of that name is one version; the newest answers\n"
    "unless --version says which); a JOB_ID (32 hex digits) asks that job's own model.\n"
    "FILE.json (- reads standard input) is the request as TensorFlow Serving's REST API\n"
    "takes it: {\"instances\": [...]} (each instance a list of the features, an object of\n"
    "them by name, or an image h x w x c of pixels, or {\"b64\": \"<PNG or JPEG>\"}), or\n"
    "{\"inputs\": ...}; a bare list is taken as the instances. --classify and --regress take\n"
    "{\"examples\": [...]}.\n"
    "\n"
    "options:\n"
    "  --version N   a version of NAME (default: the newest available)\n"
    "  --model       NAME is a model's name even if it looks like a job id\n"
    "  --classify    labels with their probabilities (:classify) instead of the outputs\n"
    "  --regress     the values of a regression model (:regress)\n";

/* The whole of file ("-": stdin) as JSON; an exit status after saying why. */
static int predict_read(const cli_conn *o, const char *file, json_t **out)
{
    json_error_t je;
    FILE *f = strcmp(file, "-") ? fopen(file, "r") : stdin;
    if (!f) {
        fprintf(stderr, "trainyard %s: cannot open %s: %s\n", o->cmd, file, strerror(errno));
        return CLI_EXIT_FAILED;
    }
    json_t *doc = json_loadf(f, JSON_REJECT_DUPLICATES, &je);
    if (f != stdin)
        fclose(f);
    if (!doc) {
        fprintf(stderr, "trainyard %s: %s is not JSON: %s (line %d, column %d)\n", o->cmd,
                strcmp(file, "-") ? file : "standard input", je.text, je.line, je.column);
        return CLI_EXIT_USAGE;
    }
    if (json_is_array(doc)) {
        json_t *wrap = json_pack("{s:o}", "instances", doc);
        if (!wrap)
            return CLI_EXIT_FAILED;
        doc = wrap;
    }
    if (!json_is_object(doc)) {
        json_decref(doc);
        fprintf(stderr,
                "trainyard %s: the request must be an object ({\"instances\": [...]}) or "
                "a list of instances\n",
                o->cmd);
        return CLI_EXIT_USAGE;
    }
    *out = doc;
    return 0;
}

static int is_job_id(const char *s)
{
    return strlen(s) == 32 && strspn(s, "0123456789abcdef") == 32;
}

int cmd_predict(int argc, char **argv)
{
    cli_conn o;
    cli_conn_init(&o, "predict");
    const char *pos[2] = {0}, *version = NULL, *verb = "predict";
    int npos = 0, as_model = 0;
    for (int i = 1; i < argc; i++) {
        const char *w = argv[i];
        int taken = cli_common_word(&o, predict_help, argc, argv, &i);
        if (taken < 0)
            return CLI_EXIT_USAGE;
        if (taken == 2)
            return 0;
        if (taken)
            continue;
        if (!strcmp(w, "--version")) {
            if (i + 1 >= argc)
                return cli_usage_error(&o, "a value is needed after", w);
            version = argv[++i];
            char *end;
            long v = strtol(version, &end, 10);
            if (*end || v < 1)
                return cli_usage_error(&o, "--version takes a version number, not", version);
        } else if (!strcmp(w, "--model"))
            as_model = 1;
        else if (!strcmp(w, "--classify"))
            verb = "classify";
        else if (!strcmp(w, "--regress"))
            verb = "regress";
        else if (w[0] == '-' && w[1])
            return cli_usage_error(&o, "unknown option", w);
        else if (npos == 2)
            return cli_usage_error(&o, "unexpected argument", w);
        else
            pos[npos++] = w;
    }
    if (npos < 2) {
        fprintf(stderr, "trainyard predict: say which model and what to predict: predict "
                        "NAME|JOB_ID FILE.json (try --help)\n");
        return CLI_EXIT_USAGE;
    }
    int job = !as_model && is_job_id(pos[0]);
    if (job && (version || strcmp(verb, "predict"))) {
        fprintf(stderr,
                "trainyard predict: --version, --classify and --regress go with a model "
                "name, not a job id (add --model if %s is a name)\n",
                pos[0]);
        return CLI_EXIT_USAGE;
    }
    char path[1200], name[800];
    if (job)
        snprintf(path, sizeof path, "/jobs/%s/predict", pos[0]);
    else if (cli_escape(pos[0], name, sizeof name) < 0) {
        fprintf(stderr, "trainyard predict: that model name is too long\n");
        return CLI_EXIT_USAGE;
    } else if (version)
        snprintf(path, sizeof path, "/v1/models/%s/versions/%s:%s", name, version, verb);
    else
        snprintf(path, sizeof path, "/v1/models/%s:%s", name, verb);

    json_t *body = NULL, *reply = NULL;
    int rc = predict_read(&o, pos[1], &body);
    if (rc != 0)
        return rc;
    client *c = NULL;
    rc = cli_conn_open(&o, &c);
    if (rc != 0 || !c) {
        json_decref(body);
        return rc;
    }
    long status = 0;
    char err[ERR_LEN];
    rc = client_post_json(c, path, body, &status, &reply, err);
    if (rc < 0)
        rc = cli_no_answer(&o, rc, err);
    else if (status != 200 || !json_is_object(reply))
        rc = cli_refused(&o, status, reply);
    else {
        cli_json_print(reply);
        rc = CLI_EXIT_OK;
    }
    json_decref(body);
    json_decref(reply);
    client_free(c);
    return rc;
}
