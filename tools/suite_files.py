"""Reading a measurement file and writing the validation suite built from it, for the tools/make_*_suite.py
generators that take [data.json] [suite.json] on the command line."""

import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def build(default_data, default_suite, description, make_cases):
    """Reads argv[1] (else `default_data`, relative to the repository), writes the suite of
    make_cases(data) with `description` to argv[2] (else `default_suite`). make_cases returns the
    cases, or (cases, excluded) where excluded lists {"id", "source", "reason"}."""
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, default_data)
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, default_suite)
    with open(src) as f:
        data = json.load(f)
    made = make_cases(data)
    cases, excluded = made if isinstance(made, tuple) else (made, None)
    suite = {"description": description, "cases": cases}
    if excluded is not None:
        suite["excluded"] = excluded
    with open(out, "w") as f:
        json.dump(suite, f, indent=1)
        f.write("\n")
    print("%d cases written to %s" % (len(suite["cases"]), out) +
          ("" if excluded is None else " (%d excluded)" % len(excluded)))
