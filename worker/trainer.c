/* trainer.c: being written. */
