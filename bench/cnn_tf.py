"""The seed CNN in TensorFlow/Keras on the CPU, one epoch, for bench/cnn.sh.

Model and pipeline as the seed writes them: tf.data from the uint8 images, resized to 64×64
(bilinear, half-pixel centres) and scaled to [0, 1] in a map, then cache(), shuffle(1000),
batch(32), prefetch(AUTOTUNE); Conv2D(32, 3, relu) → MaxPooling2D(2) → Flatten →
Dense(10, softmax); Adam (Keras defaults, lr 0.001), sparse categorical cross-entropy,
model.fit for one epoch. The resize happens inside that epoch, as the cache fills, as in the
seed's first epoch. Two threads: intra-op 2, inter-op 1, tf.data's private pool 2.

usage: python cnn_tf.py DATA.tar.gz [--threads 2] [--epochs 1]
Prints one JSON line: epoch_s (the first epoch, from a callback), fit_s, load_s (reading the
archive), total_s (process start to exit, imports included), loss, accuracy, test_accuracy."""
import time

T_START = time.perf_counter()

import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tensorflow as tf  # noqa: E402

import cifar_bin  # noqa: E402


class EpochTimer(tf.keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.times = []

    def on_epoch_begin(self, epoch, logs=None):
        self.t0 = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        self.times.append(time.perf_counter() - self.t0)


def main():
    a = cifar_bin.args()
    tf.config.threading.set_intra_op_parallelism_threads(a.threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    tf.keras.utils.set_random_seed(0)

    t0 = time.perf_counter()
    xtr, ytr, xte, yte = cifar_bin.load(a.data)
    load_s = time.perf_counter() - t0

    def prep(x, y):
        return tf.image.resize(tf.cast(x, tf.float32) / 255.0, (64, 64)), y

    opts = tf.data.Options()
    opts.threading.private_threadpool_size = a.threads
    ds = (tf.data.Dataset.from_tensor_slices((xtr, ytr)).map(prep).cache().shuffle(1000)
          .batch(32).prefetch(tf.data.AUTOTUNE).with_options(opts))
    test = (tf.data.Dataset.from_tensor_slices((xte, yte)).map(prep).batch(256)
            .with_options(opts))

    model = tf.keras.Sequential([
        tf.keras.Input((64, 64, 3)),
        tf.keras.layers.Conv2D(32, 3, activation="relu"),
        tf.keras.layers.MaxPooling2D(2),
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(10, activation="softmax"),
    ])
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    timer = EpochTimer()
    t0 = time.perf_counter()
    hist = model.fit(ds, epochs=a.epochs, verbose=0, callbacks=[timer])
    fit_s = time.perf_counter() - t0
    _, test_acc = model.evaluate(test, verbose=0)
    print(json.dumps({
        "framework": "tensorflow", "version": tf.__version__, "threads": a.threads,
        "images": len(xtr), "epoch_s": round(timer.times[0], 3), "fit_s": round(fit_s, 3),
        "load_s": round(load_s, 3), "loss": round(float(hist.history["loss"][-1]), 4),
        "accuracy": round(float(hist.history["accuracy"][-1]), 4),
        "test_accuracy": round(float(test_acc), 4),
        "total_s": round(time.perf_counter() - T_START, 3)}))


if __name__ == "__main__":
    main()
