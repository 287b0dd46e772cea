import Foundation
import GRDB

/// What the soak asks the gateway's store at the end, after the gateway stopped.
enum SoakProbes {
    /// Per request id, its group targets that the registry invalidated after the request was stored and
    /// that have no failure or retry row for it: a cross-check of the skips the report line counts
    /// (`push.skipped`; `FanOutChecks.fanOutSkipsInvalidDevices`). It counts at least the reported skips
    /// (a skip has no outcome row), and also devices accepted before their invalidation; fewer than
    /// reported would mean the ledger counted skips the registry does not show. Only group targets: the
    /// soak sends no direct tokens. Requests with no such device are left out. Throws when the store
    /// cannot be read.
    static func skippedInvalidated(databasePath: String, requestIDs: [String]) throws -> [String: Int] {
        guard !requestIDs.isEmpty else { return [:] }
        var configuration = GRDB.Configuration()
        configuration.readonly = true
        let queue = try DatabaseQueue(path: databasePath, configuration: configuration)
        defer { try? queue.close() }
        return try queue.read { db in
            let statement = try db.makeStatement(
                sql: """
                    SELECT COUNT(DISTINCT d.id) FROM request r
                    JOIN request_group rg ON rg.request_seq = r.seq
                    JOIN membership m ON m.group_id = rg.group_id AND m.device_id <= r.device_bound
                    JOIN device d ON d.id = m.device_id AND d.state = 1 AND d.invalidated_at >= r.created_at
                    WHERE r.id = ?
                      AND NOT EXISTS (SELECT 1 FROM failure f WHERE f.request_seq = r.seq AND f.token = d.token)
                      AND NOT EXISTS (SELECT 1 FROM retry t WHERE t.request_seq = r.seq AND t.token = d.token)
                    """
            )
            var result: [String: Int] = [:]
            for id in requestIDs {
                let count = try Int.fetchOne(statement, arguments: [id]) ?? 0
                if count > 0 { result[id] = count }
            }
            return result
        }
    }
}

/// SQLite's allocation counters (`sqlite3_status64`'s `SQLITE_STATUS_MEMORY_USED` and
/// `SQLITE_STATUS_PAGECACHE_OVERFLOW`: every page cache allocation when no page cache pool is configured)
/// of another process, read from `/proc/PID/mem` without stopping it.
///
/// Calling `sqlite3_memory_used()` in the gateway through gdb is not safe: it takes SQLite's malloc mutex,
/// and a thread stopped while holding it deadlocks the call (seen: the gateway hung, and died once gdb was
/// killed). So the counters' address is found once in the library file: gdb disassembles
/// `sqlite3_status64` (an exported function) without any process, and the `lea` that follows its
/// `sqlite3_mutex_enter` call addresses `sqlite3Stat.nowValue`. Needs gdb and a 64-bit libsqlite3.
struct SQLiteHeapReader: Sendable {
    struct Reading: Sendable, Equatable {
        /// `SQLITE_STATUS_MEMORY_USED`: everything SQLite allocated (what `sqlite3_memory_used()` returns).
        var memoryUsed: Int
        /// `SQLITE_STATUS_PAGECACHE_OVERFLOW`: of it, the page caches.
        var pageCache: Int
    }

    let pid: Int32
    /// `sqlite3Stat.nowValue` in the process.
    let address: UInt64

    /// nil when the process has no libsqlite3 mapped, gdb is missing, or the code is not as expected.
    init?(pid: Int32) {
        // Read to the end: `String(contentsOfFile:)` trusts the size of a /proc file (0) and may stop short.
        guard let handle = FileHandle(forReadingAtPath: "/proc/\(pid)/maps"),
            let data = try? handle.readToEnd()
        else { return nil }
        try? handle.close()
        let maps = String(decoding: data, as: UTF8.self)
        var library: (base: UInt64, path: String)? = nil
        for line in maps.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count >= 6, fields[5].contains("libsqlite3.so"), fields[2] == "00000000",
                let base = fields[0].split(separator: "-").first.flatMap({ UInt64($0, radix: 16) })
            else { continue }
            library = (base, String(fields[5]))
            break
        }
        guard let library,
            let disassembly = ProgramOutput.run(
                "gdb",
                ["-nx", "--batch", "-ex", "disassemble sqlite3_status64", library.path],
                timeout: 60
            ),
            let offset = Self.statusOffset(disassembly: disassembly)
        else { return nil }
        self.pid = pid
        self.address = library.base + offset
    }

    /// The library offset of `sqlite3Stat.nowValue`: the target of the first RIP-relative `lea` after
    /// the call to `sqlite3_mutex_enter` in gdb's disassembly of `sqlite3_status64`.
    static func statusOffset(disassembly: String) -> UInt64? {
        var entered = false
        for line in disassembly.split(separator: "\n") {
            if line.contains("sqlite3_mutex_enter") {
                entered = true
            } else if entered, line.contains("lea"), line.contains("(%rip)"),
                let comment = line.range(of: "# 0x")
            {
                let hex = line[comment.upperBound...].prefix { $0.isHexDigit }
                return UInt64(hex, radix: 16)
            }
        }
        return nil
    }

    func read() -> Reading? {
        guard let file = FileHandle(forReadingAtPath: "/proc/\(pid)/mem") else { return nil }
        defer { try? file.close() }
        guard (try? file.seek(toOffset: address)) != nil, let data = try? file.read(upToCount: 24), data.count == 24
        else { return nil }
        func value(_ index: Int) -> Int {
            data.withUnsafeBytes { bytes in
                Int(Int64(littleEndian: bytes.loadUnaligned(fromByteOffset: index * 8, as: Int64.self)))
            }
        }
        return Reading(memoryUsed: value(0), pageCache: value(2))
    }
}

/// Runs a program found on the PATH.
enum ProgramOutput {
    /// Its standard output, or nil when it could not run, failed or took longer than `timeout` seconds.
    /// The output goes to a temporary file (no pipe to fill).
    static func run(_ program: String, _ arguments: [String], timeout: Double) -> String? {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("soak-probe-\(UUID().uuidString)")
        guard FileManager.default.createFile(atPath: file.path, contents: nil),
            let output = try? FileHandle(forWritingTo: file)
        else { return nil }
        defer {
            try? output.close()
            try? FileManager.default.removeItem(at: file)
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [program] + arguments
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        do { try process.run() } catch { return nil }
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning && Date() < deadline { usleep(50_000) }
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
        guard process.terminationReason == .exit, process.terminationStatus == 0,
            let data = try? Data(contentsOf: file)
        else { return nil }
        return String(decoding: data, as: UTF8.self)
    }
}
