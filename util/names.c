/* names: see names.h. */
#include "util/names.h"

#include <string.h>

int name_artifact_ok(const char *name)
{
    size_t n = name ? strlen(name) : 0;
    if (n == 0 || n > NAME_ARTIFACT_MAX || name[0] == '.')
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '.' || c == '_' || c == '-';
        if (!ok)
            return 0;
    }
    return 1;
}
