/* main: `trainyard` dispatches to one subcommand per verb; see `trainyard --help`. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "script/sandbox.h"
#include "train/kbuild.h"

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} commands[] = {
    {"serve", cmd_serve, "run the service: API, job queue and local workers"},
    {"submit", cmd_submit, "send a job to the server: submit JOB.json [--follow]"},
    {"status", cmd_status, "show one job: status ID [--follow]"},
    {"list", cmd_list, "list jobs, newest first: list [--status S] [--name N]"},
    {"logs", cmd_logs, "print a job's log: logs ID [-f]"},
    {"cancel", cmd_cancel, "cancel a queued or running job: cancel ID"},
    {"stop", cmd_stop, "end a running job after its epoch, keeping its model: stop ID"},
    {"download", cmd_download,
     "download an artifact, resumable: download ID [NAME] [-o PATH]; --tensorboard DIR ID..."},
    {"predict", cmd_predict, "ask a trained model: predict NAME|JOB_ID FILE.json|-"},
    {"sweep", cmd_sweep, "hyperparameter sweeps: sweep submit FILE | status ID | list | cancel ID"},
    {"workers", cmd_workers, "list the server's workers"},
    {"train", cmd_train, "run a training job in this process: train JOB.json --out DIR"},
    {"devices", cmd_devices,
     "list this machine's OpenCL devices (--remote: the server's workers' devices)"},
    {"worker", cmd_worker, "lease and train jobs for a server: worker --server URL"},
    {"token", cmd_token, "make, list and revoke API tokens: token create --name N --role R"},
};

static void usage(FILE *to)
{
    fprintf(to, "usage: trainyard COMMAND [ARGS]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(to, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(to,
            "\n`trainyard COMMAND --help` tells more about one command. The client commands\n"
            "(submit ... workers, devices --remote) take --server URL, --token TOKEN, --ca FILE\n"
            "(or TRAINYARD_URL, TRAINYARD_TOKEN, TRAINYARD_CA) and --json, and exit with 0\n"
            "on success, 1 when refused or the job failed, 2 on bad usage, 3 when the server\n"
            "cannot be reached, 130 on Ctrl-C.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("trainyard %s\n", TRAINYARD_VERSION);
        return 0;
    }
    /* not a user's commands: the helper processes of train/kbuild.c */
    if (!strcmp(argv[1], "__kernel-build"))
        return kbuild_helper_main(argc - 1, argv + 1);
    if (!strcmp(argv[1], "__kernel-save"))
        return kbuild_saver_main(argc - 1, argv + 1);
    /* not a user's commands: the helper processes of train/kbuild.c */
    if (!strcmp(argv[1], "__kernel-build"))
        return kbuild_helper_main(argc - 1, argv + 1);
    if (!strcmp(argv[1], "__kernel-save"))
        return kbuild_saver_main(argc - 1, argv + 1);
    /* not a user's command: the launcher inside a script's sandbox (script/sandbox.h) */
    if (!strcmp(argv[1], "__script-exec"))
        return sandbox_exec_main(argc - 1, argv + 1);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "trainyard: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
