/* optim.cl: being written. */
