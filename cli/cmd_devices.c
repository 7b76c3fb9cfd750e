#include "cli/cli.h"
int cmd_devices(int argc, char **argv)
{
    return 1;
}
