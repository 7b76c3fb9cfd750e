"""Adds up test results from meson's testlog.json files and pytest's JUnit XML files and prints
the closing line of .ci/run: "N passed, N failed" (", N skipped" when any were skipped).
Exits 1 when anything failed, a build failed, or a result file is missing."""
import argparse
import json
import pathlib
import sys
import xml.etree.ElementTree as ET


def meson_counts(path):
    passed = failed = skipped = 0
    for line in path.read_text().splitlines():
        result = json.loads(line)["result"]
        if result in ("OK", "EXPECTEDFAIL"):
            passed += 1
        elif result == "SKIP":
            skipped += 1
        else:
            failed += 1
    return passed, failed, skipped


def junit_counts(path):
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    total = failed = skipped = 0
    for s in suites:
        total += int(s.get("tests", 0))
        failed += int(s.get("failures", 0)) + int(s.get("errors", 0))
        skipped += int(s.get("skipped", 0))
    return total - failed - skipped, failed, skipped


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--failed-builds", type=int, default=0)
    ap.add_argument("files", nargs="*")
    args = ap.parse_args()
    passed, failed, skipped = 0, args.failed_builds, 0
    for name in args.files:
        path = pathlib.Path(name)
        if not path.exists():
            print(f"missing result file {name}: counted as one failure")
            failed += 1
            continue
        p, f, s = (meson_counts if path.suffix == ".json" else junit_counts)(path)
        print(f"{name}: {p} passed, {f} failed, {s} skipped")
        passed, failed, skipped = passed + p, failed + f, skipped + s
    line = f"{passed} passed, {failed} failed"
    print(line + (f", {skipped} skipped" if skipped else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
