/* dropout.cl: being written. */
