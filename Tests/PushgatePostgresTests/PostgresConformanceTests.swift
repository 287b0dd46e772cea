import PushgateCore
import PushgatePostgres
import StoreConformance
import Testing

@Suite("PostgreSQL store conformance", .enabled(if: TestDatabase.isAvailable, TestDatabase.skipReason))
struct PostgresConformanceTests {
    @Test(arguments: StoreConformance.allChecks)
    func conformance(_ check: StoreCheck) async throws {
        try await TestDatabase.withStore { store in
            try await check.run { store }
        }
    }
}
