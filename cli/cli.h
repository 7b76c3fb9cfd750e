/* cli: the subcommands of the `trainyard` binary. Each takes the arguments after its name
 * (argv[0] is the subcommand) and returns the process exit status: 0 success, 1 failure,
 * 2 bad usage or an invalid job document; the API client commands add 3 (no answer from the
 * server) and 130 (Ctrl-C), see cli_client.h. */
#ifndef TRAINYARD_CLI_CLI_H
#define TRAINYARD_CLI_CLI_H

#include <stddef.h>
#include <stdint.h>

/* trainyard train JOB.json --out DIR: runs a job in-process. */
int cmd_train(int argc, char **argv);
/* trainyard devices [--json]: lists OpenCL platforms and devices. */
int cmd_devices(int argc, char **argv);

/* trainyard worker --server URL: leases and trains jobs for a server. */
int cmd_worker(int argc, char **argv);

/* trainyard serve: the API, the scheduler and local workers in one process. */
int cmd_serve(int argc, char **argv);

/* trainyard token create|list|revoke: API tokens, through the server or its data dir. */
int cmd_token(int argc, char **argv);

/* Client commands of the public API (cli_client.h: flags, exit statuses). */
/* trainyard submit JOB.json [--follow]: queues a job, optionally waits for it. */
int cmd_submit(int argc, char **argv);
/* trainyard status ID [--follow]: one job. */
int cmd_status(int argc, char **argv);
/* trainyard list [--status S] [--name N]: jobs, newest first. */
int cmd_list(int argc, char **argv);
/* trainyard logs ID [-f]: a job's log, optionally followed. */
int cmd_logs(int argc, char **argv);
/* trainyard cancel ID: cancels a job. */
int cmd_cancel(int argc, char **argv);
int cmd_stop(int argc, char **argv);
/* trainyard download ID [NAME] [-o PATH]: an artifact, resumed and checked. */
int cmd_download(int argc, char **argv);
/* trainyard workers: the server's workers. */
int cmd_workers(int argc, char **argv);
/* trainyard devices --remote: the devices of the server's workers. */
int cmd_devices_remote(int argc, char **argv);
/* trainyard sweep submit|status|list|cancel: hyperparameter sweeps (cmd_sweep.c). */
int cmd_sweep(int argc, char **argv);
/* trainyard predict NAME|JOB_ID FILE.json|-: a trained model's predictions. */
int cmd_predict(int argc, char **argv);

/* Parses a byte count for cmd's flag: digits, optionally followed by K, M, G or T (binary
 * multiples); 0 or a negative code after saying what is wrong on stderr. */
int cli_bytes(const char *cmd, const char *flag, const char *v, uint64_t *out);

/* Opens the dataset cache of cmd from --dataset-cache (dir; NULL: the default folder, "none" or
 * "": none) and --dataset-cache-bytes (0: the default cap) into *out (NULL when there is none;
 * dscache_free it). 0, or a negative code after printing what is wrong (cli_dscache.c). */
struct dscache;
int cli_dscache_open(const char *cmd, const char *dir, uint64_t max_bytes, struct dscache **out);
/* The --help lines of those two flags. */
#define CLI_DSCACHE_HELP                                                                           \
    "  --dataset-cache DIR  keep fetched datasets in DIR, so that a job on the same\n"             \
    "                       dataset fetches nothing (default $TRAINYARD_DATASET_CACHE, else\n"     \
    "                       $XDG_CACHE_HOME/trainyard/datasets, else\n"                            \
    "                       ~/.cache/trainyard/datasets; none: no cache)\n"                        \
    "  --dataset-cache-bytes N\n"                                                                  \
    "                       the cache's cap: the least recently used datasets go beyond it\n"      \
    "                       (K, M, G, T suffixes; default 10G)\n"

/* The script flags of `worker` and `serve` (cli_script.c): when argv[*i] is one, it sets o's
 * field (advancing *i past a value) and, when words is given, appends the flag and its value
 * to words (NULL-terminated, room for cap entries) for serve to pass on. 1 taken, 0 not a
 * script flag, or a negative code after saying what is wrong on stderr. */
struct agent_opts;
int cli_script_flag(const char *cmd, int argc, char **argv, int *i, struct agent_opts *o,
                    const char **words, size_t *nwords, size_t cap);
/* Their --help lines. */
#define CLI_SCRIPT_HELP                                                                            \
    "  --allow-scripts      also run script jobs (users' own training programs); they run in\n"    \
    "                       a bubblewrap sandbox: read-only system, only their job folder\n"       \
    "                       writable, no network, nothing of the worker's but its device\n"        \
    "  --python PATH        the interpreter of .py scripts (default python3 on PATH); its\n"       \
    "                       installation is visible read-only in the sandbox\n"                    \
    "  --allow-pip          install a script's requirements.txt into a venv cached by its\n"       \
    "                       hash (pip runs in the sandbox, with the network)\n"                    \
    "  --script-network     leave the network on in the sandbox\n"                                 \
    "  --script-memory N    a script's memory limit (RLIMIT_DATA; K, M, G suffixes; default\n"     \
    "                       none)\n"                                                               \
    "  --script-ro-bind PATHS\n"                                                                   \
    "                       more folders the sandbox shows read-only (comma-separated)\n"          \
    "  --script-cache DIR   code bundles by address and venvs (default\n"                          \
    "                       $TRAINYARD_SCRIPT_CACHE, else ~/.cache/trainyard/scripts)\n"           \
    "  --script-grace-seconds S\n"                                                                 \
    "                       a cancelled script gets SIGTERM, then SIGKILL after S (default 10)\n"  \
    "  --no-sandbox         run scripts without bubblewrap (only where it cannot run; the\n"       \
    "                       script then sees everything the worker's user can)\n"
/* Reads --s3-endpoint and --s3-region (NULL when not given) over the AWS_* variables into *out
 * (fetch_s3_from_env) and checks them: 0, or -EINVAL after saying what is wrong on stderr. */
struct fetch_s3;
int cli_s3_opts(const char *cmd, const char *endpoint, const char *region, struct fetch_s3 *out);
/* serve's: checks the two flags and puts them in the environment its local workers inherit
 * (AWS_ENDPOINT_URL_S3, AWS_REGION). Call before any thread starts. */
int cli_s3_export(const char *endpoint, const char *region);
/* The --help lines of --s3-endpoint and --s3-region (worker, serve and train). */
#define CLI_S3_HELP                                                                                \
    "  --s3-endpoint URL    where s3://bucket/key datasets are fetched from, path-style\n"         \
    "                       (<URL>/<bucket>/<key>, signed with AWS SigV4); its host is\n"          \
    "                       trusted as is: no --dataset-allow or private-address rule\n"           \
    "                       (default $AWS_ENDPOINT_URL_S3, else $AWS_ENDPOINT_URL, else\n"         \
    "                       https://s3.<region>.amazonaws.com). Credentials come only from\n"      \
    "                       the environment: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and\n"       \
    "                       AWS_SESSION_TOKEN\n"                                                   \
    "  --s3-region R        the region the requests are signed for (default $AWS_REGION,\n"        \
    "                       else $AWS_DEFAULT_REGION, else us-east-1)\n"

/* Checks the --dataset-allow value of cmd and appends it to the comma-separated list (cap bytes
 * with the NUL). 0, or a negative code after printing what is wrong to stderr. */
int cli_allow_add(char *list, size_t cap, const char *value, const char *cmd);
/* Room for the joined --dataset-allow list. */
#define CLI_ALLOW_LEN 4096

/* Reads the PEM file path given with flag to cmd into *out (malloc'd, NUL-terminated): it must
 * hold a "-----BEGIN ...<label>-----" block ("CERTIFICATE", "PRIVATE KEY"). 0, or a negative
 * code after printing to stderr what is wrong, naming the flag and the file. */
int cli_pem_read(const char *cmd, const char *flag, const char *path, const char *label,
                 char **out);
/* Checks that the file given with flag is a readable PEM file holding a certificate (a CA
 * bundle); prints what is wrong, as cli_pem_read. */
int cli_pem_check(const char *cmd, const char *flag, const char *path);

#endif
