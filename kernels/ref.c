/* ref.c: being written. */
