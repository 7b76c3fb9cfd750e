/* dataset.c: being written. */
