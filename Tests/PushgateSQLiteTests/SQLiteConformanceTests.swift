import PushgateCore
import PushgateSQLite
import StoreConformance
import Testing

@Suite("SQLite store conformance")
struct SQLiteConformanceTests {
    @Test(arguments: StoreConformance.allChecks)
    func conformance(_ check: StoreCheck) async throws {
        try await withTemporaryStore { store in
            try await check.run { store }
        }
    }
}
