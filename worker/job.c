/* job.c: being written. */
