import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import PushgateCore
import PushgateHTTP
import PushgateSQLite
import Synchronization

/// An intake that only stores: no dispatcher, no APNs. It keeps what the API handed it, stored or not.
final class StoringIntake: NotificationIntake {
    let store: SQLiteStore
    private let handed = Mutex<[NotificationRequest]>([])

    init(store: SQLiteStore) { self.store = store }

    /// Every request the API submitted, in order.
    var submitted: [NotificationRequest] { handed.withLock { $0 } }

    func submit(_ request: NotificationRequest) async throws -> EnqueueResult {
        handed.withLock { $0.append(request) }
        return try await store.enqueue(request)
    }
}

/// Request ids `req-1`, `req-2`, ... in order.
final class SequentialRequestIDs: Sendable {
    private let next = Mutex(1)
    func make(_ date: Date) -> PushgateCore.RequestID {
        let n = next.withLock { value in
            defer { value += 1 }
            return value
        }
        return try! PushgateCore.RequestID("req-\(n)")
    }
}

/// An API on a fresh SQLite file, with a manual clock and sequential request ids.
struct APIFixture: Sendable {
    let store: SQLiteStore
    let intake: StoringIntake
    let clock: ManualWallClock
    let api: HTTPAPI

    static let start = Date(timeIntervalSince1970: 1_800_000_000)
}

func withAPI<R>(
    apps: [String] = ["default"],
    port: Int = 0,
    maximumBodyBytes: Int = HTTPAPI.Configuration.defaultMaximumBodyBytes,
    monitoring: HTTPAPI.Monitoring = .init(),
    onBound: @escaping @Sendable (Int) async -> Void = { _ in },
    _ body: (APIFixture) async throws -> R
) async throws -> R {
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pushgate-http-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: folder) }
    var logger = Logger(label: "pushgate.http.test")
    logger.logLevel = .warning
    let store = try SQLiteStore(path: folder.appendingPathComponent("pushgate.sqlite").path, logger: logger)
    let clock = ManualWallClock(APIFixture.start)
    let ids = SequentialRequestIDs()
    let intake = StoringIntake(store: store)
    // These tests check what `/readyz` says while the store answers or fails, not its deadline (that is
    // `ReadinessTests`): a test process starved by the full parallel run must not see a store that
    // answers as unavailable (issue #27: the 10 s default ran out).
    var monitoring = monitoring
    monitoring.readinessStoreDeadline = max(monitoring.readinessStoreDeadline, .seconds(600))
    let api = try HTTPAPI(
        configuration: .init(host: "127.0.0.1", port: port, apps: apps, maximumBodyBytes: maximumBodyBytes),
        store: store,
        intake: intake,
        clock: clock,
        requestIDs: { ids.make($0) },
        logger: logger,
        monitoring: monitoring,
        onBound: onBound
    )
    return try await body(APIFixture(store: store, intake: intake, clock: clock, api: api))
}

/// Runs `test` against the API in-process (router test framework).
func withRouterClient<R: Sendable>(
    apps: [String] = ["default"],
    maximumBodyBytes: Int = HTTPAPI.Configuration.defaultMaximumBodyBytes,
    monitoring: HTTPAPI.Monitoring = .init(),
    _ test: @escaping @Sendable (any TestClientProtocol, APIFixture) async throws -> R
) async throws -> R {
    try await withAPI(apps: apps, maximumBodyBytes: maximumBodyBytes, monitoring: monitoring) { fixture in
        try await fixture.api.buildApplication().test(.router) { client in try await test(client, fixture) }
    }
}

/// Runs `test` against the API in-process and then again over a live socket on port 0, each time on a
/// fresh store: the same expectations hold for both transports.
func withBothTransports(
    apps: [String] = ["default"],
    monitoring: HTTPAPI.Monitoring = .init(),
    _ test: @escaping @Sendable (any TestClientProtocol, APIFixture, String) async throws -> Void
) async throws {
    for (name, kind) in [("in-process", TestingSetup.router), ("live", TestingSetup.live)] {
        try await withAPI(apps: apps, monitoring: monitoring) { fixture in
            try await fixture.api.buildApplication().test(kind) { client in try await test(client, fixture, name) }
        }
    }
}

let tokenA = "aa" + String(repeating: "01", count: 31)
let tokenB = "bb" + String(repeating: "02", count: 31)
let tokenC = "cc" + String(repeating: "03", count: 31)

extension TestClientProtocol {
    func send(
        _ method: HTTPRequest.Method,
        _ uri: String,
        json: String? = nil
    ) async throws -> TestResponse {
        try await send(method, uri, bytes: json.map { Array($0.utf8) })
    }

    /// Sends raw body bytes (which need not be UTF-8), labelled as JSON.
    func send(_ method: HTTPRequest.Method, _ uri: String, bytes: [UInt8]?) async throws -> TestResponse {
        try await execute(
            uri: uri,
            method: method,
            headers: bytes == nil ? [:] : [.contentType: "application/json"],
            body: bytes.map { ByteBuffer(bytes: $0) }
        )
    }
}

extension TestResponse {
    /// The body as a JSON object (empty if it is not one).
    var json: [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(body.readableBytesView))) as? [String: Any] ?? [:]
    }

    /// `error.code` and `error.field` of an error body.
    var error: (code: String?, field: String?) {
        let error = json["error"] as? [String: Any]
        return (error?["code"] as? String, error?["field"] as? String)
    }
}
