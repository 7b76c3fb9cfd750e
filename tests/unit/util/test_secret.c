/* Unit tests of util/secret: the key file, sealing and opening, and what must not open. */
#include "util/secret.h"

#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/unit/check.h"
#include "util/err.h"

int main(void)
{
    char dir[] = "/tmp/secret_test_XXXXXX", path[64], err[ERR_LEN];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/credentials.key", dir);

    uint8_t key[SECRET_KEY_LEN], again[SECRET_KEY_LEN], other[SECRET_KEY_LEN] = {1};
    CHECK_INT(secret_key_load(path, key, err), 0); /* made */
    struct stat st;
    CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600 && st.st_size == SECRET_KEY_LEN);
    CHECK_INT(secret_key_load(path, again, err), 0); /* read back */
    CHECK(memcmp(key, again, sizeof key) == 0);

    const char *plain = "alice:pw%40with-a-longer-tail-than-one-32-byte-block";
    char *sealed = NULL, *opened = NULL, *sealed2 = NULL;
    CHECK_INT(secret_text_seal(key, plain, &sealed, err), 0);
    CHECK(sealed && strncmp(sealed, "s1.", 3) == 0 && !strstr(sealed, "alice"));
    CHECK_INT(secret_text_seal(key, plain, &sealed2, err), 0);
    CHECK(sealed2 && strcmp(sealed, sealed2) != 0); /* a new nonce each time */
    CHECK_INT(secret_text_open(key, sealed, &opened, err), 0);
    CHECK_STR(opened, plain);
    free(opened);
    opened = NULL;

    /* Another key, a flipped digit, a cut text or garbage: -EBADMSG, nothing out. */
    CHECK_INT(secret_text_open(other, sealed, &opened, err), -EBADMSG);
    sealed[10] = sealed[10] == '0' ? '1' : '0';
    CHECK_INT(secret_text_open(key, sealed, &opened, err), -EBADMSG);
    sealed[20] = '\0';
    CHECK_INT(secret_text_open(key, sealed, &opened, err), -EBADMSG);
    CHECK_INT(secret_text_open(key, "s1.zz", &opened, err), -EBADMSG);
    CHECK_INT(secret_text_open(key, "alice:pw", &opened, err), -EBADMSG);
    CHECK(opened == NULL);

    char *empty = NULL;
    CHECK_INT(secret_text_seal(key, "", &empty, err), 0);
    CHECK_INT(secret_text_open(key, empty, &opened, err), 0);
    CHECK_STR(opened, "");
    free(opened);
    free(empty);
    free(sealed);
    free(sealed2);

    /* A damaged key file is refused, not replaced. */
    FILE *f = fopen(path, "w");
    fputs("short", f);
    fclose(f);
    CHECK_INT(secret_key_load(path, again, err), -EIO);
    CHECK(strstr(err, "not a 32-byte key") != NULL);
    unlink(path);
    rmdir(dir);
    return check_exit();
}
