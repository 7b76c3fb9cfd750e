"""Submit → running latency on an idle worker, for bench/service.sh: submits N tiny jobs one at
a time (each after the previous finished, so the worker is idle and parked in its lease long
poll) and reads each job's created_at and started_at as the server recorded them.
usage: TRAINYARD_TOKEN=T latency.py URL DATASET_URL N  → prints JSON {"n", "p50_ms", "p99_ms",
"max_ms"}"""
import json
import os
import sys
import time
from datetime import datetime

import requests

url, dataset, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
stamp = lambda s: datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp() * 1000
http = requests.Session()
http.headers["Authorization"] = f"Bearer {os.environ['TRAINYARD_TOKEN']}"
lat = []
for i in range(n):
    job = http.post(f"{url}/train", json={"name": f"lat{i}", "dataset_url": dataset,
                                              "hyperparameters": {"epochs": 1}}).json()
    while True:
        j = http.get(f"{url}/jobs/{job['id']}").json()
        if j["status"] in ("succeeded", "failed", "cancelled"):
            break
        time.sleep(0.002)
    lat.append(stamp(j["started_at"]) - stamp(j["created_at"]))
lat.sort()
print(json.dumps({"n": n, "p50_ms": lat[n // 2], "p99_ms": lat[min(n - 1, (n * 99) // 100)],
                  "max_ms": lat[-1]}))
