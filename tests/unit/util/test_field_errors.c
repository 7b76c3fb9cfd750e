/* Unit tests of util/field_errors and the UTF-8 helpers it uses: the list keeps what it is
 * given, turns its last slot into a note once full, and never ends a field or message inside a
 * UTF-8 character. */
#include "util/field_errors.h"

#include <string.h>

#include "tests/unit/check.h"
#include "util/utf8.h"

int main(void)
{
    field_errors errs = {0};
    field_errors_add(&errs, "hyperparameters.epochs", "must be %s, got %d", "at least 1", 0);
    CHECK_INT(errs.count, 1);
    CHECK_STR(errs.items[0].field, "hyperparameters.epochs");
    CHECK_STR(errs.items[0].message, "must be at least 1, got 0");

    /* Past the cap the last slot says there are more, on no field. */
    for (int i = 1; i < FIELD_ERRORS_MAX + 5; i++)
        field_errors_add(&errs, "x", "problem %d", i);
    CHECK_INT(errs.count, FIELD_ERRORS_MAX);
    CHECK_STR(errs.items[FIELD_ERRORS_MAX - 2].field, "x");
    CHECK_STR(errs.items[FIELD_ERRORS_MAX - 1].field, "");
    CHECK(strstr(errs.items[FIELD_ERRORS_MAX - 1].message, "more than 31 problems") != NULL);

    /* A field cut by its buffer loses the character it would have split, not half of it. */
    char longer[200];
    memset(longer, 'a', sizeof longer);
    memcpy(longer + 126, "\xc3\xa9", 2); /* é across the 127-byte limit */
    longer[sizeof longer - 1] = '\0';
    field_errors cut = {0};
    field_errors_add(&cut, longer, "%s", "m");
    CHECK_INT(strlen(cut.items[0].field), 126);

    char s[] = "ab\xe2\x82"; /* "ab" and the first two bytes of € */
    utf8_trim_end(s);
    CHECK_STR(s, "ab");
    char whole[] = "a\xe2\x82\xac";
    utf8_trim_end(whole);
    CHECK_STR(whole, "a\xe2\x82\xac");
    CHECK_INT(utf8_chars("a\xe2\x82\xac\xc3\xa9"), 3);
    return check_exit();
}
