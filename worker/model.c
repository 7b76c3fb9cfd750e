/* model.c: being written. */
