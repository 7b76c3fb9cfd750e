#include "cli/cli.h"
int cmd_train(int argc, char **argv)
{
    return 1;
}
