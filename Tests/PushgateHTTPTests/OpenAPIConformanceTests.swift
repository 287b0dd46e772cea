import Foundation
import Hummingbird
import HummingbirdTesting
import PushgateCore
import PushgateHTTP
import Testing

/// Runs `scripts/openapi-conformance.sh` (schemathesis) against the real server on a loopback port:
/// the document the server serves is the one checked, with positive and negative cases.
///
/// Needs `schemathesis` on the PATH (`pip install schemathesis`; `.ci/run` installs it). Without it the
/// test is skipped locally, and fails in CI (`CI` set) saying what is missing.
@Suite("HTTP API: OpenAPI conformance (schemathesis, live server)")
struct OpenAPIConformanceTests {
    static let schemathesis = ExecutableLookup.find("schemathesis")
    static let inCI = ProcessInfo.processInfo.environment["CI"].map { !$0.isEmpty && $0 != "false" } ?? false

    @Test(
        "the live server conforms to its OpenAPI document, negative cases included",
        .enabled(if: schemathesis != nil || inCI, "schemathesis is not installed (pip install schemathesis)"),
        .timeLimit(.minutes(10))
    )
    func conformance() async throws {
        guard Self.schemathesis != nil else {
            Issue.record("schemathesis is not installed: CI must run `pip install schemathesis` (see .ci/run)")
            return
        }
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("scripts/openapi-conformance.sh").path
        let monitoring = HTTPAPI.Monitoring(metricsExposition: { Array("pushgate_up 1\n".utf8) })
        try await withAPI(monitoring: monitoring) { fixture in
            // Something to find, so that reads can answer 200 as well as 404; the group mixes platforms.
            _ = try await fixture.store.register(
                Registration(app: "default", token: DeviceToken(hex: tokenA), group: "news", at: APIFixture.start)
            )
            _ = try await fixture.store.register(
                Registration(app: "default", token: DeviceToken(fcm: fcmToken), group: "news", at: APIFixture.start)
            )
            try await fixture.api.buildApplication().test(.live) { client in
                let port = try #require(client.port)
                let run = try await ChildProcess.run("/bin/bash", [script, "http://127.0.0.1:\(port)"])
                #expect(run.status == 0, "schemathesis found problems:\n\(run.output.suffix(20_000))")
            }
        }
    }
}

enum ExecutableLookup {
    static func find(_ name: String) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for directory in path.split(separator: ":") {
            let candidate = "\(directory)/\(name)"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return nil
    }
}

/// Runs a program to completion without blocking a concurrency thread; its output goes to a file (a
/// pipe could fill and stall it) and is returned with the exit status.
enum ChildProcess {
    struct Result: Sendable {
        var status: Int32
        var output: String
    }

    static func run(_ executable: String, _ arguments: [String]) async throws -> Result {
        let log = FileManager.default.temporaryDirectory.appendingPathComponent(
            "pushgate-child-\(UUID().uuidString).log"
        )
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        defer { try? FileManager.default.removeItem(at: log) }
        let handle = try FileHandle(forWritingTo: log)
        defer { try? handle.close() }
        let process = SpawnedProcess()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardOutput = handle
        process.standardError = handle
        process.standardInput = FileHandle.nullDevice
        let status = try await withCheckedThrowingContinuation {
            (continuation: CheckedContinuation<Int32, any Error>) in
            process.terminationHandler = { continuation.resume(returning: $0.terminationStatus) }
            do { try process.run() } catch {
                process.terminationHandler = nil
                continuation.resume(throwing: error)
            }
        }
        let output = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
        return Result(status: status, output: output)
    }
}
