/* secret: small secrets sealed at rest under a key kept in the data directory — the dataset
 * credentials the server must hand to a worker, which must not sit in trainyard.db, its WAL or
 * a backup of it in the clear.
 *
 * Sealed text: "s1." + hex(nonce[16] || ciphertext || tag[16]). The ciphertext is the plain
 * text XORed with HMAC-SHA256(key, "e" || nonce || block counter) blocks; the tag is the first
 * 16 bytes of HMAC-SHA256(key, "m" || nonce || ciphertext) (encrypt-then-MAC with one
 * 256-bit key and domain-separated inputs). The nonce is random per seal. A text sealed under
 * another key, or altered, does not open (-EBADMSG). */
#ifndef TRAINYARD_UTIL_SECRET_H
#define TRAINYARD_UTIL_SECRET_H

#include <stddef.h>
#include <stdint.h>

#define SECRET_KEY_LEN 32

/* n bytes from the kernel's random source (getrandom); 0 or a negative errno with a message. */
int secret_random(uint8_t *out, size_t n, char *err);
/* Reads the key in the file at path, or makes one (random, mode 0600, created exclusively)
 * when there is none; 0 or a negative errno with a message in err. */
int secret_key_load(const char *path, uint8_t key[SECRET_KEY_LEN], char *err);
/* Seals plain under key: the sealed text, malloc'd, into *out; 0 or -ENOMEM / -EIO. */
int secret_text_seal(const uint8_t key[SECRET_KEY_LEN], const char *plain, char **out, char *err);
/* Opens sealed: the plain text, malloc'd, into *out; -EBADMSG when it is not a text sealed
 * under key, -ENOMEM. */
int secret_text_open(const uint8_t key[SECRET_KEY_LEN], const char *sealed, char **out, char *err);

#endif
