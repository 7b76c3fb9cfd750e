/* safetensors.c: being written. */
