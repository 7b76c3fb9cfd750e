# The seed CNN's job document, for the benchmarks that train it (bench/cnn.sh, bench/gpu.sh):
# Conv2D(32, 3×3, relu) → MaxPooling2D(2×2) → Flatten → Dense(10, softmax), Adam 1e-3, batch 32,
# one epoch, on a CIFAR-format archive resized to 64×64. Sourced, not run.
# seed_cnn_job OUT.json NAME ARCHIVE-PATH (absolute)
seed_cnn_job() {
  cat >"$1" <<JOB
{"name": "$2", "dataset_url": "file://$3",
 "dataset": {"format": "cifar10", "resize": [64, 64]},
 "task": "classification",
 "model": {"input_shape": [64, 64, 3],
           "layers": [{"type": "conv2d", "filters": 32, "kernel_size": 3, "activation": "relu"},
                      {"type": "maxpool2d", "pool_size": 2},
                      {"type": "flatten"},
                      {"type": "dense", "units": 10, "activation": "softmax"}]},
 "hyperparameters": {"epochs": 1, "batch_size": 32, "optimizer": "adam",
                     "learning_rate": 0.001, "seed": 0}}
JOB
}
