/* web: the dashboard's static files (web/), embedded at build time by api/embed_web.py.
 *
 * The table is generated; each entry lives for the whole program and nothing is freed. */
#ifndef TRAINYARD_API_WEB_H
#define TRAINYARD_API_WEB_H

#include <stddef.h>

typedef struct api_web_file {
    const char *name;         /* "app.js": a base name, web/ is flat */
    const char *content_type; /* "text/javascript; charset=utf-8" */
    const unsigned char *data;
    size_t len;
    const char *etag; /* the quoted SHA-256 of data */
} api_web_file;

/* Every file of web/, sorted by name (generated). */
extern const api_web_file api_web_files[];
extern const size_t api_web_files_n;

/* The file called name, or NULL when web/ has none. */
const api_web_file *api_web_find(const char *name);

#endif
