#!/usr/bin/env python3
"""SQLite's heap in a running process (the gateway), read from /proc/PID/mem without stopping it.

    scripts/sqlite-heap.py PID      prints memory_used, pagecache, malloc_count, max_memory_used (bytes)

The same reading as pushgate-bench soak's SQLiteHeapReader (Benchmarks/Sources/pushgate-bench/SoakProbes.swift):
the address of sqlite3Stat.nowValue is the first RIP-relative `lea` after the `sqlite3_mutex_enter` call
in gdb's disassembly of sqlite3_status64 (the library file, no process). Calling sqlite3_memory_used()
through gdb instead can deadlock the process on SQLite's malloc mutex. Used for docs/reliability.md's
soak figures of 2026-11-27, sampled every 15 s beside the run.
"""
import re
import struct
import subprocess
import sys

pid = int(sys.argv[1])
base = path = None
with open(f"/proc/{pid}/maps") as maps:
    for line in maps:
        fields = line.split()
        if len(fields) >= 6 and "libsqlite3.so" in fields[5] and int(fields[2], 16) == 0:
            base, path = int(fields[0].split("-")[0], 16), fields[5]
            break
if base is None:
    sys.exit(f"no libsqlite3 mapped in {pid}")
disassembly = subprocess.run(
    ["gdb", "-nx", "--batch", "-ex", "disassemble sqlite3_status64", path],
    capture_output=True, text=True, check=True,
).stdout
offset = None
entered = False
for line in disassembly.splitlines():
    if "sqlite3_mutex_enter" in line:
        entered = True
    elif entered and "lea" in line and "(%rip)" in line and "# 0x" in line:
        offset = int(re.search(r"# 0x([0-9a-f]+)", line).group(1), 16)
        break
if offset is None:
    sys.exit("sqlite3_status64 is not as expected")
with open(f"/proc/{pid}/mem", "rb") as mem:
    mem.seek(base + offset)
    now = struct.unpack("<10q", mem.read(80))
    peak = struct.unpack("<10q", mem.read(80))
# SQLITE_STATUS_MEMORY_USED 0, PAGECACHE_OVERFLOW 2 (all page caches without a pool), MALLOC_COUNT 9
print("memory_used", now[0], "pagecache", now[2], "malloc_count", now[9], "max_memory_used", peak[0])
