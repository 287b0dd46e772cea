import PushgateCore
import StoreConformance
import Testing

@testable import PushgateSQLite

@Suite("SQLite store conformance")
struct SQLiteConformanceTests {
    @Test(arguments: StoreConformance.allChecks)
    func conformance(_ check: StoreCheck) async throws {
        try await withTemporaryStore { store in
            try await check.run { store }
        }
    }

    /// The same checks with one key for every APNs device and one for every FCM device: each lookup,
    /// registration, invalidation and direct-token join must tell devices apart by app and token. The
    /// check with 50,000 devices gets 10 bits (about 50 devices a key): with one key every lookup would
    /// read every device, and the check would take minutes.
    @Test(arguments: StoreConformance.allChecks)
    func conformanceWhenTokenKeysCollide(_ check: StoreCheck) async throws {
        var configuration = SQLiteStore.Configuration()
        configuration.tokenKey = TokenKey(bits: check.name == "fanOutStreamsLargeGroupInPages" ? 10 : 0)
        try await withTemporaryStore(configuration: configuration) { store in
            try await check.run { store }
        }
    }
}
