"""Writes examples/shapes.tar.gz: a small image dataset in CIFAR-10's binary format, for
examples/shapes-job.json. Each 32×32 RGB image holds one filled shape of a random colour, size
and position on a background of another random colour; the label is the shape:

    0 circle   1 square   2 triangle   3 cross

A small CNN learns it to high accuracy within a few epochs; a model that looks only at colours
cannot, since colours carry no information about the label.

The archive is laid out as CIFAR-10's own cifar-10-binary.tar.gz is: a folder holding
data_batch_1.bin (the training images), test_batch.bin (the test images) and batches.meta.txt
(the class names, one a line). A record is 3,073 bytes: the label, then 1,024 red, 1,024 green
and 1,024 blue bytes, rows top to bottom. The output depends only on the seed: the tar headers
carry fixed times and owners and the gzip header no time, so the same command writes the same
bytes. Python's standard library only. Regenerate with:
    python3 examples/make_shapes.py examples/shapes.tar.gz
"""
import argparse
import gzip
import io
import random
import tarfile

SIDE = 32
CLASSES = ["circle", "square", "triangle", "cross"]
FOLDER = "shapes-batches-bin"


def colour_pair(rng):
    """A shape colour and a background colour far enough apart to see."""
    while True:
        fg = [rng.randrange(256) for _ in range(3)]
        bg = [rng.randrange(256) for _ in range(3)]
        if sum(abs(a - b) for a, b in zip(fg, bg)) >= 160:
            return fg, bg


def inside(label, x, y, cx, cy, r):
    """Whether pixel (x, y) is in the shape of size r centred at (cx, cy)."""
    dx, dy = x - cx, y - cy
    if label == 0:
        return dx * dx + dy * dy <= r * r
    if label == 1:
        return abs(dx) <= r * 0.8 and abs(dy) <= r * 0.8
    if label == 2:  # pointing up: the apex at cy - r, the base at cy + r
        if dy < -r or dy > r:
            return False
        half = r * (dy + r) / (2 * r)
        return abs(dx) <= half
    bar = max(1.0, r / 3)  # a plus sign: two bars of width 2·bar
    return (abs(dx) <= bar and abs(dy) <= r) or (abs(dy) <= bar and abs(dx) <= r)


def image(rng, label):
    """One record: the label byte, then the red, green and blue planes."""
    fg, bg = colour_pair(rng)
    r = rng.uniform(5, 11)
    cx = rng.uniform(r + 1, SIDE - 2 - r)
    cy = rng.uniform(r + 1, SIDE - 2 - r)
    mask = [inside(label, x + 0.5, y + 0.5, cx, cy, r) for y in range(SIDE) for x in range(SIDE)]
    record = bytearray([label])
    for ch in range(3):
        record += bytes(fg[ch] if m else bg[ch] for m in mask)
    return bytes(record)


def batch(rng, n):
    """n records, the classes in turn so that every class has its share, in random order."""
    labels = [i % len(CLASSES) for i in range(n)]
    rng.shuffle(labels)
    return b"".join(image(rng, label) for label in labels)


def add(tar, name, data):
    info = tarfile.TarInfo(f"{FOLDER}/{name}")
    info.size = len(data)
    info.mtime = 0
    info.mode = 0o644
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    tar.addfile(info, io.BytesIO(data))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="the .tar.gz to write")
    ap.add_argument("--train", type=int, default=3000, help="training images (default 3000)")
    ap.add_argument("--test", type=int, default=500, help="test images (default 500)")
    ap.add_argument("--seed", type=int, default=2026, help="random seed (default 2026)")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        add(tar, "batches.meta.txt", "".join(c + "\n" for c in CLASSES).encode())
        add(tar, "data_batch_1.bin", batch(rng, args.train))
        add(tar, "test_batch.bin", batch(rng, args.test))
    with open(args.out, "wb") as f:
        f.write(gzip.compress(raw.getvalue(), compresslevel=9, mtime=0))


if __name__ == "__main__":
    main()
