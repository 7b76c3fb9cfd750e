/* main: `trainyard` dispatches to one subcommand per verb; see `trainyard --help`. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} commands[] = {
    {"serve", cmd_serve, "run the service: API, job queue and local workers"},
    {"train", cmd_train, "run a training job in this process: train JOB.json --out DIR"},
    {"devices", cmd_devices, "list the OpenCL devices trainyard can train on"},
    {"worker", cmd_worker, "lease and train jobs for a server: worker --server URL"},
    {"token", cmd_token, "make, list and revoke API tokens: token create --name N --role R"},
};

static void usage(FILE *to)
{
    fprintf(to, "usage: trainyard COMMAND [ARGS]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(to, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(to, "\n`trainyard COMMAND --help` tells more about one command.\n");
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
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "trainyard: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
