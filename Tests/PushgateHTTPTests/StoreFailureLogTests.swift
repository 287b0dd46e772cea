import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import PushgateCore
import PushgateSQLite
import Synchronization
import Testing

@testable import PushgateHTTP

@Suite("HTTP API: a storm of store failures is one log line per second")
struct StoreFailureLogTests {
    /// Hands every line to `sink`.
    struct LineSink: LogHandler {
        var logLevel: Logger.Level = .debug
        var metadata: Logger.Metadata = [:]
        let sink: @Sendable (String, Logger.Metadata) -> Void
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) { sink("\(event.message)", event.metadata ?? [:]) }
    }

    @Test("every request still gets its 503; the log gets one line per second per route, with the count")
    func oneLinePerSecond() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pushgate-http-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let lines = Mutex<[Logger.Metadata]>([])
        let logger = Logger(label: "test") { _ in
            LineSink { message, metadata in
                if message == "store failed while serving a request" { lines.withLock { $0.append(metadata) } }
            }
        }
        let store = try SQLiteStore(path: folder.appendingPathComponent("pushgate.sqlite").path, logger: logger)
        let clock = ManualWallClock(APIFixture.start)
        let api = try HTTPAPI(
            configuration: .init(host: "127.0.0.1", port: 0, apps: ["default"]),
            store: store,
            intake: StoringIntake(store: store),
            clock: clock,
            logger: logger
        )
        try store.close()
        try await api.buildApplication().test(.router) { client async throws in
            for _ in 1...20 {
                let response = try await client.send(.get, "/v1/devices/\(tokenA)")
                #expect(response.status == .serviceUnavailable)
            }
            #expect(lines.withLock { $0.count } == 1)
            clock.advance(by: 1)
            #expect(try await client.send(.get, "/v1/devices/\(tokenA)").status == .serviceUnavailable)
        }
        let logged = lines.withLock { $0 }
        #expect(logged.count == 2)
        #expect(logged.last?["http.repeated"] == "20", "19 counted silently, and the one that wrote the line")
    }
}
