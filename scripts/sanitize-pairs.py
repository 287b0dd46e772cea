#!/usr/bin/env python3
"""Groups ThreadSanitizer reports by the innermost frame in our code of each of their two accesses.

    scripts/sanitize-pairs.py .build-tsan/reports/tsan.* [.build-tsan/test.log]

Prints one line per distinct pair, most frequent first: `COUNT KIND: FILE:LINE [access] <-> FILE:LINE [access]`.
A pair whose two sites are both inside `withLock` of one `Synchronization.Mutex` is docs/reliability.md's
exception 1; read the code of every other pair.
"""
import collections
import re
import sys

pairs = collections.Counter()
for name in sys.argv[1:]:
    with open(name, errors="replace") as file:
        text = file.read()
    for report in text.split("WARNING: ThreadSanitizer:")[1:]:
        lines = report.split("SUMMARY: ThreadSanitizer")[0].splitlines()
        kind = lines[0].split("(")[0].strip()
        accesses, current = [], None
        for line in lines[1:]:
            if re.match(r"^  (Write|Read|Previous|Atomic|Modifying)", line):
                current = [line.strip().split(" at ")[0]]
                accesses.append(current)
            elif re.match(r"^  \S", line):
                current = None
            elif current is not None and len(current) == 1:
                match = re.search(r"/((?:Sources|Tests)/\S+)", line)
                if match:
                    current.append(match.group(1))
        sites = [(a[1] if len(a) > 1 else "?") + " [" + a[0].split(" of ")[0] + "]" for a in accesses[:2]]
        pairs[kind + ": " + " <-> ".join(sites)] += 1
for pair, count in pairs.most_common():
    print(count, pair)
