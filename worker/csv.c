/* csv.c: being written. */
