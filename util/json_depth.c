/* json_depth: nesting depth of a JSON text by a single scan of its brackets (see json_depth.h).
 * Malformed text gives some number; the parser that runs next reports what is wrong with it. */
#include "util/json_depth.h"

size_t json_text_depth(const char *text, size_t len, size_t limit)
{
    size_t depth = 0, max = 0;
    int in_string = 0;
    for (size_t i = 0; i < len && max <= limit; i++) {
        char c = text[i];
        if (in_string) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_string = 0;
        } else if (c == '"') {
            in_string = 1;
        } else if (c == '[' || c == '{') {
            if (++depth > max)
                max = depth;
        } else if ((c == ']' || c == '}') && depth > 0) {
            depth--;
        }
    }
    return max;
}
