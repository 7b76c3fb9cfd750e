/* reduce.cl: being written. */
