"""Seed 001's Keras MLP trained by several workers at once: tf.distribute's
MultiWorkerMirroredStrategy with its cluster from TF_CONFIG (TFConfigClusterResolver), as the
script would run on a cluster by hand. Dense(64, relu) → Dense(10, softmax), Adam, sparse
categorical cross-entropy, on a digits-like CSV (64 features, then the class 0..9 in the last
column; ../keras-mlp/make_digits.py writes one).

trainyard starts one copy of this script per replica ("distribution": {"replicas": N}) and
gives each the TF_CONFIG its framework reads: the cluster's `worker` addresses and this copy's
index. Every worker reads the whole file; the strategy gives each its share of every global
batch and sums the gradients, so N workers train the model one worker would (up to the order
of float additions). Only the chief (worker 0) reports metrics and saves the model; trainyard
keeps only rank 0's anyway, and labels every rank's log lines.

Hyperparameters (all optional): epochs (5), batch_size (64, the global batch), learning_rate
(0.001), seed (42).

Outside trainyard it runs alone (no TF_CONFIG: one worker), or by hand as a cluster:
TF_CONFIG='{"cluster": {"worker": ["127.0.0.1:20000", "127.0.0.1:20001"]}, "task": {"type":
"worker", "index": 0}}' TRAINYARD_DATASET=digits.csv python train.py (and index 1 beside it)."""
import json
import os
import sys

import numpy as np
import tensorflow as tf

import keras

try:
    import trainyard
except ImportError:  # by hand without the package
    trainyard = None


def load(path):
    """Features (float32, N × F, scaled to 0..1) and labels (int64, N)."""
    with open(path) as f:
        first = f.readline()
    try:
        [float(c) for c in first.strip().split(",")]
        skip = 0
    except ValueError:
        skip = 1
    data = np.loadtxt(path, delimiter=",", skiprows=skip, dtype=np.float32, ndmin=2)
    return data[:, :-1] / 16.0, data[:, -1].astype(np.int64)


def main():
    hp = json.loads(os.environ.get("TRAINYARD_HYPERPARAMETERS") or "{}")
    dataset = os.environ.get("TRAINYARD_DATASET")
    if not dataset:
        sys.exit("no dataset: TRAINYARD_DATASET is not set (give the job a dataset_location)")
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    strategy = tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=resolver)
    workers = strategy.num_replicas_in_sync
    index = resolver.task_id or 0
    chief = index == 0
    print(f"worker {index} of {workers}; tensorflow {tf.__version__}", flush=True)

    keras.utils.set_random_seed(int(hp.get("seed", 42)))
    x, y = load(dataset)
    batch = int(hp.get("batch_size", 64))
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    data = tf.data.Dataset.from_tensor_slices((x, y)).batch(batch).with_options(options)
    with strategy.scope():
        model = keras.Sequential([keras.Input(shape=(x.shape[1],)),
                                  keras.layers.Dense(64, activation="relu"),
                                  keras.layers.Dense(10, activation="softmax")])
        optimizer = keras.optimizers.Adam(float(hp.get("learning_rate", 0.001)))
        loss_fn = keras.losses.SparseCategoricalCrossentropy(reduction="none")

    # Keras 3's model.fit does not drive MultiWorkerMirroredStrategy, so the loop is written
    # out: each worker's share of a global batch, its loss scaled by the global batch size,
    # the gradients summed over the workers by the strategy.
    def step(features, labels):
        with tf.GradientTape() as tape:
            probs = model(features, training=True)
            per_row = loss_fn(labels, probs)
            loss = tf.nn.compute_average_loss(per_row, global_batch_size=batch)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        hits = tf.reduce_sum(tf.cast(tf.equal(tf.argmax(probs, axis=1), labels), tf.float32))
        return tf.reduce_sum(per_row), hits

    @tf.function
    def train_step(batch_in):
        sums, hits = strategy.run(step, args=batch_in)
        return (strategy.reduce("SUM", sums, axis=None), strategy.reduce("SUM", hits, axis=None))

    dist = strategy.experimental_distribute_dataset(data)
    rows = len(x)
    for epoch in range(1, int(hp.get("epochs", 5)) + 1):
        total, correct = 0.0, 0.0
        for batch_in in dist:
            s, h = train_step(batch_in)
            total += float(s)
            correct += float(h)
        metrics = {"loss": total / rows, "accuracy": correct / rows}
        print(f"epoch {epoch}: loss={metrics['loss']:.6f} accuracy={metrics['accuracy']:.6f}",
              flush=True)
        if chief and trainyard is not None:
            trainyard.report(epoch=epoch, **metrics)
    if chief:
        out_dir = os.environ.get("TRAINYARD_OUTPUT_DIR", "output")
        os.makedirs(out_dir, exist_ok=True)
        model.save(os.path.join(out_dir, "model.keras"))
        print(f"wrote {out_dir}/model.keras", flush=True)


if __name__ == "__main__":
    main()
