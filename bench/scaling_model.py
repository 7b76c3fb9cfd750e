#!/usr/bin/env python3
"""The step-time model of a data-parallel job (issue 14), printed as the Markdown tables of
docs/SCALING.md, so that the tables can be remade when an input changes.

    python3 bench/scaling_model.py                 # the doc's tables
    python3 bench/scaling_model.py --gpu-speedup 10 --net "25 Gb/s TCP:25:50"

A step on N replicas = compute(per-replica batch) + allreduce(gradient bytes S, N), no overlap:

    compute(b)      = fixed + b * per_sample        (measured here for the CPU; see DEVICES)
    allreduce(S, N) = 2(N-1)/N * S / B + 2(N-1) * alpha     (a ring; 0 when N = 1)

with B the link's usable bandwidth (line rate times LINK_EFFICIENCY) and alpha the latency of
one of the ring's 2(N-1) steps. Two ways to spend N replicas:

    weak    each replica keeps the batch b: N*b samples a step;
            speedup = N * compute(b) / step(N)
    strong  the global batch G is split N ways (b = G/N, the same loss curve as 1 replica);
            speedup = compute(G) / step(N); no row where G/N < 1

"comm" is allreduce / step. Standard library only."""
import argparse
import math

# Parameters, counted from the layers (model/model.h: dense W in x out plus bias; conv W
# [kh][kw][c][f] plus bias [f]).
MODELS = {
    # 784 -> dense 128 relu -> dense 10: 784*128 + 128 + 128*10 + 10
    "MLP 784-128-10": {"params": 784 * 128 + 128 + 128 * 10 + 10, "batch": 64},
    # docs/cifar10-job.json: 64x64x3 -> conv 32 3x3 valid (62x62x32) -> max pool 2 (31x31x32)
    # -> flatten -> dense 10: 3*3*3*32 + 32 + 31*31*32*10 + 10
    "seed CNN": {"params": 3 * 3 * 3 * 32 + 32 + 31 * 31 * 32 * 10 + 10, "batch": 32},
}

# compute(b) = fixed + b * per_sample, microseconds.
# CPU: this machine (bench/README.md "Data-parallel (issue 14)").
#   MLP: 1 PoCL thread, best epoch of 4 after the first at batch 16, 32, 64, 128, 256 (60,000
#   rows), fitted: 50 us + 2.7 us/sample (the 2-thread figure is no better at batch 64).
#   CNN: 2 PoCL threads, bench/cnn.sh's best epoch 3.61 s = 1,563 steps of 2.31 ms at batch 32;
#   fixed = 17 launches at ~6 us (PoCL's launch cost, bench/README.md), the rest per sample.
# GPU: an ASSUMPTION, no GPU was measured: per-sample time divided by --gpu-speedup (default
#   30: an H100's fp32 peak is ~100x this VM's 545 GFLOP/s, and batches of 32-64 rows use it
#   poorly); fixed = the step's kernel launches (MLP 15, TRAINYARD_PROFILE; CNN 17) at ~4 us.
CPU = {
    "MLP 784-128-10": {"fixed": 50.0, "per_sample": 2.7},
    "seed CNN": {"fixed": 100.0, "per_sample": (2310.0 - 100.0) / 32},
}
GPU_FIXED = {"MLP 784-128-10": 15 * 4.0, "seed CNN": 17 * 4.0}

# Networks: label, line rate Gb/s, alpha per ring step in us.
NETS = [("25 Gb/s, TCP", 25.0, 30.0), ("100 Gb/s, RDMA", 100.0, 5.0)]
LINK_EFFICIENCY = 0.9
NODES = [1, 2, 4, 8, 16, 32, 64]

# Loopback, 2 ranks on this machine: bench-allreduce's fit over 4 KiB < n <= 1 MiB, where both
# gradient buffers lie (2026-11-24 11:41 UTC; bench/README.md). --loopback replaces it.
LOOPBACK = (3.01, 0.0814)  # alpha us, beta ns per byte


def allreduce_us(nbytes, n, gbps, alpha_us, algorithm="ring"):
    """ring: 2(N-1) steps of S/N bytes each way. halving-doubling (Rabenseifner: reduce-scatter
    by recursive halving, allgather by recursive doubling): the same bytes in 2 log2(N) steps."""
    if n == 1:
        return 0.0
    bytes_per_us = gbps * LINK_EFFICIENCY * 1e9 / 8 / 1e6
    steps = 2 * (n - 1) if algorithm == "ring" else 2 * math.log2(n)
    return 2 * (n - 1) / n * nbytes / bytes_per_us + steps * alpha_us


def compute_us(dev, b):
    return dev["fixed"] + b * dev["per_sample"]


def step(dev, nbytes, n, b, net, overlap=False, algorithm="ring", per_node=1):
    """(compute, allreduce, step) in us. overlap: the allreduce runs under the backward pass,
    taken as 2/3 of compute (an upper bound on what bucketed overlap can hide). per_node > 1:
    hierarchical, the replicas of a node reduce over their local link first (taken as free) and
    only n / per_node nodes join the allreduce on the network."""
    c = compute_us(dev, b)
    a = allreduce_us(nbytes, max(1, n // per_node), net[1], net[2], algorithm)
    if overlap:
        return c, a, c / 3 + max(2 * c / 3, a)
    return c, a, c + a


def devices(gpu_speedup):
    gpu = {m: {"fixed": GPU_FIXED[m], "per_sample": CPU[m]["per_sample"] / gpu_speedup}
           for m in MODELS}
    return [("CPU (this VM, measured)", CPU),
            ("GPU (assumed %gx per sample)" % gpu_speedup, gpu)]


def fmt_ms(us):
    return "%.3f" % (us / 1000) if us < 10000 else "%.1f" % (us / 1000)


def table(model, dev, mode, nets):
    info = MODELS[model]
    nbytes = info["params"] * 4
    g = info["batch"]
    head = "| N | per-replica batch |"
    rule = "| ---: | ---: |"
    for label, _, _ in nets:
        head += " %s: step ms | comm | speedup |" % label
        rule += " ---: | ---: | ---: |"
    lines = [head, rule]
    for n in NODES:
        b = g if mode == "weak" else g / n
        if b < 1:
            continue
        row = "| %d | %g |" % (n, b)
        for net in nets:
            c, a, t = step(dev, nbytes, n, b, net)
            if mode == "weak":
                speed = n * compute_us(dev, g) / t
            else:
                speed = compute_us(dev, g) / t
            row += " %s | %.0f%% | %.2f |" % (fmt_ms(t), 100 * a / t, speed)
        lines.append(row)
    return "\n".join(lines)


def first_dominant(model, dev, mode, net):
    info = MODELS[model]
    for n in NODES[1:]:
        b = info["batch"] if mode == "weak" else info["batch"] / n
        if b < 1:
            break
        _, a, t = step(dev, info["params"] * 4, n, b, net)
        if a >= t / 2:
            return "N = %d (%.0f%%)" % (n, 100 * a / t)
    return "not by N = %d" % NODES[-1]


def remedies(model, dev, net, n):
    """Weak-scaling speedup at n replicas with each remedy, as a table row: throughput over
    that of 1 replica at the same per-replica batch (so at most n)."""
    info = MODELS[model]
    nbytes, b = info["params"] * 4, info["batch"]

    def speed(nb=nbytes, bb=b, overlap=False, algorithm="ring", per_node=1):
        _, _, t = step(dev, nb, n, bb, net, overlap, algorithm, per_node)
        return "%.1f" % (n * compute_us(dev, bb) / t)

    return "| %s | %s | %s |" % (model, net[0], " | ".join([
        speed(), speed(nb=nbytes / 2), speed(overlap=True), speed(nb=nbytes / 2, overlap=True),
        speed(algorithm="hd"), speed(per_node=8), speed(bb=4 * b),
        speed(nb=nbytes / 2, overlap=True, algorithm="hd", bb=4 * b)]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gpu-speedup", type=float, default=30.0,
                    help="GPU per-sample speedup over this CPU (an assumption; default 30)")
    ap.add_argument("--net", action="append", metavar="LABEL:GBPS:ALPHA_US",
                    help="a network instead of the defaults (repeatable)")
    ap.add_argument("--loopback", metavar="ALPHA_US:NS_PER_BYTE",
                    type=lambda v: tuple(float(x) for x in v.split(":", 1)),
                    default=LOOPBACK, help="the 2-rank loopback fit t = alpha + beta*n "
                    "(bench-allreduce; default %g:%g)" % LOOPBACK)
    args = ap.parse_args()
    nets = NETS
    if args.net:
        nets = []
        for spec in args.net:
            label, gbps, alpha = spec.rsplit(":", 2)
            nets.append((label, float(gbps), float(alpha)))

    print("### Inputs\n")
    print("| model | parameters | gradient bytes (fp32) | batch |")
    print("| --- | ---: | ---: | ---: |")
    for m, info in MODELS.items():
        print("| %s | %d | %d | %d |" % (m, info["params"], info["params"] * 4, info["batch"]))
    print()
    print("| device | model | fixed us/step | us/sample | step at the batch, ms |")
    print("| --- | --- | ---: | ---: | ---: |")
    for dname, dev in devices(args.gpu_speedup):
        for m in MODELS:
            print("| %s | %s | %.0f | %.3g | %s |" % (dname, m, dev[m]["fixed"],
                                                      dev[m]["per_sample"],
                                                      fmt_ms(compute_us(dev[m],
                                                                        MODELS[m]["batch"]))))
    print()
    print("| network | line rate | usable B | alpha per ring step |")
    print("| --- | ---: | ---: | ---: |")
    for label, gbps, alpha in nets:
        print("| %s | %g Gb/s | %.2f GB/s | %g us |" % (label, gbps,
                                                        gbps * LINK_EFFICIENCY / 8, alpha))
    print("| loopback, 2 ranks (measured) | - | %.2f GB/s | %.2f us |" % (
        1 / args.loopback[1], args.loopback[0] / 2))

    for dname, dev in devices(args.gpu_speedup):
        for m in MODELS:
            for mode, what in (("weak", "per-replica batch fixed at %d" % MODELS[m]["batch"]),
                               ("strong", "global batch fixed at %d, split N ways"
                                % MODELS[m]["batch"])):
                print("\n### %s, %s: %s\n" % (m, dname, what))
                print(table(m, dev[m], mode, nets))

    print("\n### Where the allreduce reaches half the step\n")
    print("| model | device | batch |" + "".join(" %s |" % n[0] for n in nets))
    print("| --- | --- | --- |" + " --- |" * len(nets))
    for dname, dev in devices(args.gpu_speedup):
        for m in MODELS:
            for mode in ("weak", "strong"):
                print("| %s | %s | %s |" % (m, dname, "per replica" if mode == "weak"
                                             else "global") +
                      "".join(" %s |" % first_dominant(m, dev[m], mode, net) for net in nets))

    n = NODES[-1]
    for dname, dev in devices(args.gpu_speedup):
        print("\n### Remedies at N = %d, %s: speedup over 1 replica (ideal %d)\n"
              % (n, dname, n))
        print("| model | network | as is | fp16 gradients | overlap | fp16 + overlap | "
              "halving-doubling | 8 per node, hierarchical | 4x per-replica batch | "
              "all but hierarchical |")
        print("| --- | --- |" + " ---: |" * 8)
        for m in MODELS:
            for net in nets:
                print(remedies(m, dev[m], net, n))

    print("\n### This machine: 2 ranks over loopback (alpha %g us, beta %g ns/B), MLP on 1 "
          "thread each\n" % args.loopback)
    m, info = "MLP 784-128-10", MODELS["MLP 784-128-10"]
    one = compute_us(CPU[m], info["batch"])
    ar = args.loopback[0] + args.loopback[1] * 1e-3 * info["params"] * 4
    print("| per-replica batch | compute us | allreduce us | step us | samples/s vs 1 replica |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    for b in (info["batch"] // 2, info["batch"]):
        c = compute_us(CPU[m], b)
        print("| %d | %.0f | %.0f | %.0f | %.2fx |" % (b, c, ar, c + ar,
                                                      2 * b / (c + ar) / (info["batch"] / one)))


if __name__ == "__main__":
    main()
