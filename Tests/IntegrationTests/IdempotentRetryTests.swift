import APNsSimulator
import Foundation
import PushgateConfig
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A client posts a notification, gives up waiting for the answer (it never reads it) and posts it again
/// with the same `Idempotency-Key`: the whole gateway (HTTP API, store, dispatcher, APNs client) sends
/// once per device to the simulator, and the store holds one request. Once per store.
@Suite("Idempotent notification requests, end to end", .serialized, .timeLimit(.minutes(5)))
struct IdempotentRetryTests {
    static let devices = 5
    static func token(_ index: Int) -> String { String(format: "%064x", 0x1de0_0000 + index) }
    static let body = #"{"groups": ["fans"], "type": "normal", "payload": {"aps": {"alert": "Goal"}}}"#

    @Test(
        "SQLite: a POST retried after a client timeout yields one delivery per device",
        .enabled(if: ExternalTools.isInstalled("sqlite3"), "needs the sqlite3 shell to read the store")
    )
    func sqlite() async throws {
        try await GatewayFixture.withSimulator { simulator, configuration in
            let database = configuration.store.path
            try await Self.retryAfterTimeout(simulator: simulator, configuration: configuration) {
                let run = try ExternalTools.run("sqlite3", ["-readonly", database, "SELECT id FROM request"])
                guard run.status == 0 else { throw ExternalTools.ToolError("sqlite3 failed: \(run.output)") }
                return run.output.trimmingCharacters(in: .whitespacesAndNewlines)
            }
        }
    }

    @Test(
        "PostgreSQL: a POST retried after a client timeout yields one delivery per device",
        .enabled(if: PostgresTestDatabase.isAvailable, "PUSHGATE_TEST_POSTGRES_URL is not set")
    )
    func postgres() async throws {
        let database = try PostgresTestDatabase()
        defer { database.drop() }
        try await GatewayFixture.withSimulator { simulator, configuration in
            var configuration = configuration
            configuration.store.url =
                try #require(PostgresTestDatabase.url) + "?schema=\(database.configuration.schema)"
            try await Self.retryAfterTimeout(simulator: simulator, configuration: configuration) {
                try database.psql("SELECT id FROM \(database.configuration.schema).request")
            }
        }
    }

    /// `storedRequestIDs`: the ids in the store's `request` table, one per line, read past the store.
    static func retryAfterTimeout(
        simulator: RunningAPNsSimulator,
        configuration: GatewayConfiguration,
        storedRequestIDs: @escaping @Sendable () throws -> String
    ) async throws {
        var configuration = configuration
        configuration.http.port = 0
        try await GatewayFixture.run(configuration) { running, _ in
            try await eventually("HTTP API listening") { running.httpPort() != nil }
            let port = try #require(running.httpPort())
            let http = HTTPTestClient(port: port)
            for index in 1...devices {
                #expect(try await http.send("PUT", "/v1/groups/fans/devices/\(token(index))").status == 204)
            }

            // The first attempt: sent whole, its answer never read (the client timed out), the socket
            // closed once the notification has reached every device.
            let abandoned = try RawHTTPConnection(port: port)
            try abandoned.write(
                "POST /v1/notifications HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                    + "Idempotency-Key: match-4711 goal\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)"
            )
            try await eventually("the first attempt delivered") {
                (1...devices).allSatisfy { simulator.deliveries(device: token($0)).accepted == 1 }
            }
            abandoned.close()

            let retry = try await http.send(
                "POST",
                "/v1/notifications",
                body: body,
                headers: ["Idempotency-Key": "match-4711 goal"]
            )
            #expect(retry.status == 202)
            let id = try #require(retry.json["id"] as? String)
            #expect(retry.json["targets"] as? Int == devices, "the first request's target count")
            #expect(try storedRequestIDs() == id, "the store holds the first request, and only it")
            // The simulator counts a send when it answers; the gateway records the outcome a moment later.
            try await eventually("the first request done") {
                try await http.send("GET", "/v1/notifications/\(id)").json["state"] as? String == "done"
            }
            #expect(try await http.send("GET", "/v1/notifications/\(id)").json["accepted"] as? Int == devices)

            // Another retry, and then a new request (a new key) that every device gets: the dispatcher
            // works oldest first, so anything the retries had stored would have been sent before it.
            #expect(
                try await http.send(
                    "POST",
                    "/v1/notifications",
                    body: body,
                    headers: ["Idempotency-Key": "match-4711 goal"]
                )
                .json["id"] as? String == id
            )
            let next = try await http.send(
                "POST",
                "/v1/notifications",
                body: #"{"groups": ["fans"], "payload": {"aps": {"alert": "Full time"}}}"#,
                headers: ["Idempotency-Key": "match-4711 end"]
            )
            let nextID = try #require(next.json["id"] as? String)
            try await eventually("the next request done") {
                try await http.send("GET", "/v1/notifications/\(nextID)").json["state"] as? String == "done"
            }
            for index in 1...devices {
                let alerts = simulator.notifications(device: token(index)).map {
                    String(decoding: $0.payload, as: UTF8.self)
                }
                #expect(alerts.filter { $0.contains("Goal") }.count == 1, "device \(index): the goal once")
                #expect(alerts.filter { $0.contains("Full time") }.count == 1, "device \(index): the next one once")
            }
            #expect(Set(try storedRequestIDs().split(separator: "\n").map(String.init)) == [id, nextID])
        }
    }
}

/// One HTTP/1.1 connection to 127.0.0.1, written to raw: a client that sends and never reads.
final class RawHTTPConnection: Sendable {
    private let fd: Int32

    init(port: Int) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw ExternalTools.ToolError("socket() failed") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            Glibc.close(fd)
            throw ExternalTools.ToolError("connect() failed")
        }
    }

    func write(_ text: String) throws {
        let bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard written > 0 else { throw ExternalTools.ToolError("send() failed") }
            offset += written
        }
    }

    func close() { Glibc.close(fd) }
}
