/* gather.cl: being written. */
