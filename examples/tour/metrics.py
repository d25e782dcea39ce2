#!/usr/bin/env python3
"""A stand-in for a metrics API, for the tour's `casebook freeze` lines (standard library only).

The queries of `incidents.yaml` run it as a command: `python3 examples/tour/metrics.py SERVICE
METRIC`. Like a real API it wants a token: it reads `METRICS_TOKEN` from its environment (which
is `casebook freeze`'s) and fails, exit 1 with the reason on stderr, when it is not set. It prints
the metric's last 15 minutes as JSON on stdout, made up from the names, the same every time.
"""

import json
import os
import sys
import zlib


def main():
    if len(sys.argv) != 3:
        print("usage: metrics.py SERVICE METRIC", file=sys.stderr)
        return 2
    if not os.environ.get("METRICS_TOKEN"):
        print("metrics.py: 401 unauthorized: set METRICS_TOKEN", file=sys.stderr)
        return 1
    service, metric = sys.argv[1], sys.argv[2]
    seed = zlib.crc32(f"{service}/{metric}".encode())
    points = [round(((seed >> shift) % 100) / 100, 2) for shift in (0, 7, 14)]
    print(json.dumps({"series": f"{service}.{metric}", "last_15m": points}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
