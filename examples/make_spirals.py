"""Writes examples/spirals.csv: two interleaved spirals in 2-D, 600 points, labels "a" and "b".
A linear model cannot separate them; a small MLP can. Regenerate with:
    python3 examples/make_spirals.py > examples/spirals.csv"""
import math
import random

rng = random.Random(2026)
print("x,y,arm")
for i in range(600):
    arm = i % 2
    t = 0.25 + 3.0 * rng.random()
    r = t * 1.2
    angle = t * 2.2 + arm * math.pi
    x = r * math.cos(angle) + rng.gauss(0, 0.08)
    y = r * math.sin(angle) + rng.gauss(0, 0.08)
    print(f"{x:.4f},{y:.4f},{'ab'[arm]}")
