/* cmd_workers: `trainyard workers` and `trainyard devices --remote` — the server's view of its
 * workers (GET /workers) and of the devices they offer (GET /devices), as tables or, with --json,
 * the API's answers.
 *
 * `trainyard devices` alone lists this machine's OpenCL devices (cmd_devices.c); it asks the
 * server only when told to with --remote or --server URL, so a TRAINYARD_URL in the environment
 * never changes what the plain command means. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_client.h"

static const char workers_help[] =
    "usage: trainyard workers [options]\n"
    "\n"
    "Lists the workers the server has seen recently: id, status (idle, busy, gone), the job\n"
    "it runs, when it was last heard from, its name and devices (and the most replicas of a\n"
    "data-parallel job it takes, when more than one).\n";

static const char devices_help[] =
    "usage: trainyard devices --remote [options]\n"
    "       trainyard devices --server URL [options]\n"
    "\n"
    "Lists the devices of the server's live workers: the worker, the device's index on it,\n"
    "type, compute units, memory, name and how the worker found it (opencl via ..., or nvml /\n"
    "nvidia-smi for a GPU without OpenCL, which runs script jobs only). (Without --remote or\n"
    "--server, `trainyard devices` lists this machine's own devices.)\n";

/* Parses the connection flags (and --remote) and GETs path: with --json prints the answer; else
 * leaves it in *reply for a table. 0, or the exit status; *reply is NULL when nothing is left
 * to print. */
static int fetch(int argc, char **argv, const char *help, const char *path, cli_conn *o,
                 json_t **reply)
{
    *reply = NULL;
    cli_conn_init(o, argv[0]);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(help, stdout);
            fputs("\n" CLI_CONN_HELP, stdout);
            return 0;
        }
        int taken = cli_conn_flag(o, argc, argv, &i);
        if (taken < 0)
            return CLI_EXIT_USAGE;
        if (!taken && strcmp(argv[i], "--remote") != 0)
            return cli_usage_error(o, "unexpected argument", argv[i]);
    }
    client *c = NULL;
    int rc = cli_conn_open(o, &c);
    if (rc == 0)
        rc = cli_get(o, c, path, reply);
    client_free(c);
    if (rc == 0 && o->json) {
        cli_json_print(*reply);
        json_decref(*reply);
        *reply = NULL;
    }
    return rc;
}

int cmd_workers(int argc, char **argv)
{
    cli_conn o;
    json_t *reply;
    int rc = fetch(argc, argv, workers_help, "/workers", &o, &reply);
    if (rc != 0 || !reply)
        return rc;
    printf("%-32s  %-6s  %-32s  %-24s  %s\n", "ID", "STATUS", "JOB", "LAST SEEN", "NAME (DEVICES)");
    size_t i, k;
    json_t *w, *d;
    json_array_foreach (json_object_get(reply, "workers"), i, w) {
        printf("%-32s  %-6s  %-32s  %-24s  %s (", cli_str(w, "id"), cli_str(w, "status"),
               cli_str(w, "job"), cli_str(w, "last_seen_at"), cli_str(w, "name"));
        json_array_foreach (json_object_get(w, "devices"), k, d)
            printf("%s%s %s", k ? ", " : "", cli_str(d, "type"), cli_str(d, "name"));
        json_int_t slots = json_integer_value(json_object_get(w, "slots"));
        if (slots > 1) /* it takes data-parallel jobs of up to that many replicas */
            printf("; %lld replicas", (long long)slots);
        printf(")\n");
    }
    json_decref(reply);
    return 0;
}

int cmd_devices_remote(int argc, char **argv)
{
    cli_conn o;
    json_t *reply;
    int rc = fetch(argc, argv, devices_help, "/devices", &o, &reply);
    if (rc != 0 || !reply)
        return rc;
    printf("%-32s  %-5s  %-5s  %-5s  %-10s  %s\n", "WORKER", "INDEX", "TYPE", "CU", "MEMORY",
           "NAME");
    size_t i;
    json_t *d;
    json_array_foreach (json_object_get(reply, "devices"), i, d) {
        char mem[24];
        cli_size((uint64_t)json_integer_value(json_object_get(d, "global_mem_bytes")), mem);
        const char *how = json_string_value(json_object_get(d, "found_by"));
        printf("%-32s  %-5lld  %-5s  %-5lld  %-10s  %s%s%s%s\n", cli_str(d, "worker"),
               (long long)json_integer_value(json_object_get(d, "index")), cli_str(d, "type"),
               (long long)json_integer_value(json_object_get(d, "compute_units")), mem,
               cli_str(d, "name"), how ? " (" : "", how ? how : "", how ? ")" : "");
    }
    json_decref(reply);
    return 0;
}
