/* loss.cl: being written. */
