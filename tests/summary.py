"""Adds up test results from meson's testlog.json files and pytest's JUnit XML files and prints
the closing line of .ci/run: "N passed, N failed" (", N skipped" when any were skipped).
With --slowest N it first lists the N slowest tests over every file, so a run that nears its
budget says where the time went. Exits 1 when anything failed, a build failed, or a result file is missing."""
import argparse
import json
import pathlib
import sys
import xml.etree.ElementTree as ET


def meson_counts(path, durations):
    passed = failed = skipped = 0
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        result = entry["result"]
        durations.append((float(entry.get("duration", 0)), f"{path.parent.parent.name}: {entry['name']}"))
        if result in ("OK", "EXPECTEDFAIL"):
            passed += 1
        elif result == "SKIP":
            skipped += 1
        else:
            failed += 1
    return passed, failed, skipped


def junit_counts(path, durations):
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    for case in root.iter("testcase"):
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        durations.append((float(case.get("time", 0)), f"{path.parent.name}: {name}"))
    total = failed = skipped = 0
    for s in suites:
        total += int(s.get("tests", 0))
        failed += int(s.get("failures", 0)) + int(s.get("errors", 0))
        skipped += int(s.get("skipped", 0))
    return total - failed - skipped, failed, skipped


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--failed-builds", type=int, default=0)
    ap.add_argument("--slowest", type=int, default=0)
    ap.add_argument("files", nargs="*")
    args = ap.parse_args()
    passed, failed, skipped = 0, args.failed_builds, 0
    durations, lines = [], []
    for name in args.files:
        path = pathlib.Path(name)
        if not path.exists():
            lines.append(f"missing result file {name}: counted as one failure")
            failed += 1
            continue
        p, f, s = (meson_counts if path.suffix == ".json" else junit_counts)(path, durations)
        lines.append(f"{name}: {p} passed, {f} failed, {s} skipped")
        passed, failed, skipped = passed + p, failed + f, skipped + s
    if args.slowest and durations:
        print(f"the {min(args.slowest, len(durations))} slowest tests:")
        for seconds, name in sorted(durations, reverse=True)[: args.slowest]:
            print(f"{seconds:8.1f} s  {name}")
        print()
    print("\n".join(lines))
    line = f"{passed} passed, {failed} failed"
    print(line + (f", {skipped} skipped" if skipped else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
