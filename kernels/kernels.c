/* kernels.c: TEMPORARY placeholder so that the gemm branch links and runs on its own. The real
 * kern_new/kern_free and the other wrappers are written on another branch; drop this file's
 * commit ("TEMP kern placeholder") when merging. It creates only the GEMM kernels. */
#include <stdlib.h>

#include "kernels/kern_priv.h"

int kern_new(ocl_ctx *c, kern **out, char *err)
{
    kern *k = calloc(1, sizeof *k);
    if (!k)
        return err_set(err, -ENOMEM, "out of memory for the kernels");
    k->c = c;
    int rc = gemm_kernels_new(k, err);
    if (rc < 0) {
        free(k);
        return rc;
    }
    *out = k;
    return 0;
}

void kern_free(kern *k)
{
    if (!k)
        return;
    gemm_kernels_free(k->gemm);
    free(k);
}

const char *kern_last_error(const kern *k)
{
    return k->err;
}
