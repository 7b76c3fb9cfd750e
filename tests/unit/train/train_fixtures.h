/* train_fixtures: what the tests that train small models in-process share (the checkpoint and
 * the predict tests): a job document parsed or the test dies, and a CIFAR-10 binary file of
 * images whose colour says their class. */
#ifndef TRAINYARD_TESTS_TRAIN_FIXTURES_H
#define TRAINYARD_TESTS_TRAIN_FIXTURES_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "job/job.h"
#include "tests/unit/kernels/cltest.h"

/* text parsed as a job document; the test dies naming the first error otherwise. */
static inline job_spec *tf_parse_job(const char *text)
{
    job_spec *job = NULL;
    field_errors errs = {0};
    if (job_parse(text, strlen(text), &job, &errs) < 0)
        cltest_die("job_parse", errs.items[0].message);
    return job;
}

/* A CSV with a header, three features uniform in [-2, 2) and n rows of three classes a small MLP
 * learns (c0 where a·b > 0, else c1 where c > 0.5, else c2), from a fixed LCG seeded with seed. */
static inline void tf_write_three_class_csv(const char *path, uint64_t seed, int n)
{
    FILE *f = fopen(path, "w");
    if (!f)
        cltest_die("writing the dataset", path);
    fprintf(f, "a,b,c,label\n");
    for (int i = 0; i < n; i++) {
        double v[3];
        for (int j = 0; j < 3; j++) {
            seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
            v[j] = (double)((seed >> 40) & 0xffff) / 65536.0 * 4 - 2;
        }
        int label = v[0] * v[1] > 0 ? 0 : v[2] > 0.5 ? 1 : 2;
        fprintf(f, "%.4f,%.4f,%.4f,c%d\n", v[0], v[1], v[2], label);
    }
    fclose(f);
}

/* CIFAR-10 binary records at path: n images of 32×32×3, image i of class i % 4, its class's
 * planes lit (160 + noise) over dark ones (40 + noise; class 3 lights red and green), the noise
 * from a fixed LCG so every run writes the same bytes. */
static inline void tf_write_colour_cifar(const char *path, int n)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        cltest_die("writing the images", path);
    uint64_t s = 7;
    unsigned char rec[3073];
    for (int i = 0; i < n; i++) {
        rec[0] = (unsigned char)(i % 4);
        for (int p = 1; p < 3073; p++) {
            s = s * 6364136223846793005ULL + 1442695040888963407ULL;
            int plane = (p - 1) / 1024, lit = plane == rec[0] || (rec[0] == 3 && plane < 2);
            rec[p] = (unsigned char)((s >> 58) + (lit ? 160 : 40));
        }
        fwrite(rec, 1, sizeof rec, f);
    }
    fclose(f);
}

#endif
