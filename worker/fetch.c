/* fetch.c: being written. */
