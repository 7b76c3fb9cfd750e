/* db_query: one integer from a query, for the db unit tests to look at what a call left in the
 * database (row counts, user_version). Header-only: each test executable includes it once. */
#ifndef TRAINYARD_TESTS_UNIT_DB_QUERY_H
#define TRAINYARD_TESTS_UNIT_DB_QUERY_H

#include <sqlite3.h>

#include "db/db.h"

/* The first column of the first row of sql as an integer; -1 when there is none. */
static inline long long db_query_int(db *d, const char *sql)
{
    sqlite3_stmt *st = NULL;
    long long v = -1;
    if (sqlite3_prepare_v2(db_sqlite(d), sql, -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

#endif
