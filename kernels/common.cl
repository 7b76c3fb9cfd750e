/* common.cl: being written. */
