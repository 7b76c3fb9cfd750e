/* activation.cl: being written. */
