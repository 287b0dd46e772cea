import Foundation
import PushgateCore
import PushgateSQLite
import Testing

@testable import pushgate_bench

/// The soak reads the gateway's SQLite heap from `/proc/PID/mem`, at an address found in gdb's
/// disassembly of `sqlite3_status64` (calling `sqlite3_memory_used()` through gdb can deadlock).
@Suite struct SQLiteHeapReaderTests {
    /// gdb's disassembly of Debian 12's libsqlite3.so.0 (3.40.1), abridged.
    static let disassembly = """
        Dump of assembler code for function sqlite3_status64:
           0x00000000000e0390 <+0>:	cmp    $0x9,%edi
           0x00000000000e0397 <+7>:	lea    0x4b1a2(%rip),%rax        # 0x12b540
           0x00000000000e03b0 <+32>:	cmpb   $0x0,(%rax,%rbx,1)
           0x00000000000e03b6 <+38>:	call   0x27fd0 <sqlite3MallocMutex@plt>
           0x00000000000e03c1 <+49>:	call   0x2ac40 <sqlite3_mutex_enter@plt>
           0x00000000000e03c6 <+54>:	lea    0x7ead3(%rip),%rax        # 0x15eea0
           0x00000000000e03cd <+61>:	mov    (%rax,%rbx,8),%rdx
        End of assembler dump.
        """

    @Test func theCountersAreTheLeaAfterTheMutexIsTaken() {
        #expect(SQLiteHeapReader.statusOffset(disassembly: Self.disassembly) == 0x15eea0)
        #expect(SQLiteHeapReader.statusOffset(disassembly: "No symbol table is loaded.") == nil)
    }

    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/gdb"), "needs gdb"))
    func aProcessWithSQLiteOpenShowsItsPageCaches() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("heap-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try SQLiteStore(path: directory.appendingPathComponent("heap.db").path)
        defer { try? store.close() }
        let reader = try #require(SQLiteHeapReader(pid: getpid()))
        let before = try #require(reader.read())
        let now = Date()
        let batch = try (0..<5_000).map { index in
            Registration(token: try BenchDevices.token(index), group: "g", at: now)
        }
        _ = try await store.register(batch: batch)
        let after = try #require(reader.read())
        #expect(after.pageCache > before.pageCache)
        #expect(after.memoryUsed >= after.pageCache && after.pageCache > 0)
    }
}
