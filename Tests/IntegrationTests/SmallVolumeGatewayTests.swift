import Foundation
import PushgateCore
import PushgateSQLite
import Testing

/// The whole gateway with its SQLite database on a volume of its own (a tmpfs of 16 MiB): issue 24's
/// small disk, tried the way an operator met it.
@Suite("Gateway on a small volume", .serialized, .timeLimit(.minutes(5)))
struct SmallVolumeGatewayTests {
    static func token(_ index: Int) -> String { String(format: "%064x", UInt64(index + 1) &* 0x9E37_79B9_7F4A_7C15) }

    struct Context: Sendable {
        var volume: SmallVolume
        var running: GatewayContext
    }

    typealias GatewayContext = (http: HTTPTestClient, registration: UDPSender, metrics: @Sendable () -> [UInt8])

    static func withGateway(
        megabytes: Int = 16,
        minimumFreeBytes: Int64,
        _ body: @escaping @Sendable (SmallVolume, GatewayContext) async throws -> Void
    ) async throws {
        let ran = try await withSmallVolume(megabytes: megabytes) { volume in
            try await GatewayFixture.withSimulator { _, configuration in
                var configuration = configuration
                configuration.http.port = 0
                configuration.store.path = volume.path("gateway.db")
                configuration.store.minimumFreeBytes = minimumFreeBytes
                try await GatewayFixture.run(configuration) { running, _ in
                    try await eventually("HTTP API listening") { running.httpPort() != nil }
                    try await body(
                        volume,
                        (
                            HTTPTestClient(port: running.httpPort()!),
                            try UDPSender(port: running.udp.registrationPort),
                            running.metricsExposition
                        )
                    )
                }
            }
        }
        if !ran { print("mounting a tmpfs is not permitted here (needs root): skipped") }
    }

    static let notification = #"{"groups": ["g"], "payload": {"aps": {"alert": "hi"}}}"#

    @Test(
        "16 MiB volume: 40,000 UDP registrations at 10,000/s are all applied and a notification to them is accepted"
    )
    func registrationsFit() async throws {
        // With the former 1 GiB checkpoint interval: about 12,800 of 30,000 applied on 12 MiB, the rest
        // "database or disk is full", and the WAL, never checkpointed, filled any room given back.
        try await Self.withGateway(minimumFreeBytes: 1 << 20) { volume, gateway in
            let reader = try SQLiteStore(path: volume.path("gateway.db"))
            defer { try? reader.close() }
            let clock = ContinuousClock()
            let start = clock.now
            for index in 0..<40_000 {
                gateway.registration.send(#"{"device": "\#(Self.token(index))", "group": "g"}"#)
                // 10,000 a second, in slices of 500 (kept under the socket's receive buffer).
                if index % 500 == 499 { try await clock.sleep(until: start + .milliseconds((index + 1) / 10)) }
            }
            try await eventually("all 40,000 applied", timeout: .seconds(120)) {
                try await reader.countMembersForBenchmark(group: "g", afterDevice: 0).count == 40_000
            }
            let accepted = try await gateway.http.send("POST", "/v1/notifications", body: Self.notification)
            #expect(accepted.status == 202, "\(accepted.text)")
            #expect(accepted.json["targets"] as? Int == 40_000)
            let metrics = String(decoding: gateway.metrics(), as: UTF8.self)
            #expect(metrics.contains(#"pushgate_store_bytes{file="main"}"#))
            #expect(metrics.contains(#"pushgate_store_bytes{file="wal"}"#))
            #expect(metrics.contains("pushgate_store_free_bytes"))
        }
    }

    @Test(
        "a volume filled by another file: 503 and /readyz disk_low; the file deleted, 202 and ready without a restart"
    )
    func filledByAnotherFile() async throws {
        try await Self.withGateway(minimumFreeBytes: 2 << 20) { volume, gateway in
            for index in 0..<20 {
                #expect(try await gateway.http.send("PUT", "/v1/groups/g/devices/\(Self.token(index))").status == 204)
            }
            #expect(try await gateway.http.send("GET", "/readyz").status == 200)
            // Idle: a maintenance round truncates the WAL, so the next write needs new room.
            try await eventually("the idle WAL truncated") { volume.size("gateway.db-wal") == 0 }
            try volume.fill("filler", leaving: 0)

            let ready = try await gateway.http.send("GET", "/readyz")
            #expect(ready.status == 503)
            #expect((ready.json["error"] as? [String: Any])?["code"] as? String == "disk_low", "\(ready.text)")
            let refused = try await gateway.http.send("POST", "/v1/notifications", body: Self.notification)
            #expect(refused.status == 503, "\(refused.text)")

            try FileManager.default.removeItem(atPath: volume.path("filler"))
            let accepted = try await gateway.http.send("POST", "/v1/notifications", body: Self.notification)
            #expect(accepted.status == 202, "\(accepted.text)")
            try await eventually("ready again") { try await gateway.http.send("GET", "/readyz").status == 200 }
        }
    }

    @Test("free space below store.minimumFreeBytes turns /readyz to 503 disk_low while writes still succeed")
    func readinessThreshold() async throws {
        try await Self.withGateway(minimumFreeBytes: 8 << 20) { volume, gateway in
            #expect(try await gateway.http.send("PUT", "/v1/groups/g/devices/\(Self.token(0))").status == 204)
            #expect(try await gateway.http.send("GET", "/readyz").status == 200)
            try volume.fill("filler", leaving: 4 << 20)
            let low = try await gateway.http.send("GET", "/readyz")
            #expect(low.status == 503)
            let error = low.json["error"] as? [String: Any]
            #expect(error?["code"] as? String == "disk_low")
            #expect((error?["message"] as? String)?.contains("store.minimumFreeBytes") == true, "\(low.text)")
            #expect(try await gateway.http.send("POST", "/v1/notifications", body: Self.notification).status == 202)
            try FileManager.default.removeItem(atPath: volume.path("filler"))
            #expect(try await gateway.http.send("GET", "/readyz").status == 200)
        }
    }
}
