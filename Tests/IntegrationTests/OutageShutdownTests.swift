import Foundation
import PushgateCore
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A store outage must not make SIGTERM wait for SIGKILL: the stop ends within `shutdown.timeout`.
/// The outage is a real one: the database's volume (a small tmpfs) is full, so SQLite's writes fail.
@Suite("A stop during a store outage ends within shutdown.timeout", .serialized, .timeLimit(.minutes(3)))
struct OutageShutdownTests {
    @Test("SIGTERM while a notification request waits for a full disk: the daemon ends within the timeout")
    func stopDuringOutage() async throws {
        let directory = try TemporaryDirectory()
        let volume = directory.path("volume")
        try FileManager.default.createDirectory(atPath: volume, withIntermediateDirectories: true)
        let (mounted, mountOutput) = try ExternalTools.run("mount", ["-t", "tmpfs", "-o", "size=6m", "tmpfs", volume])
        guard mounted == 0 else {
            print("OutageShutdownTests skipped: cannot mount a tmpfs here (\(mountOutput))")
            return
        }
        defer { _ = try? ExternalTools.run("umount", ["-l", volume]) }
        let process = SpawnedProcess()
        process.executableURL = URL(fileURLWithPath: GatewayCrashTests.gatewayBinary)
        process.arguments = [
            "-f", "--simulator", "-d", "\(volume)/g.db", "-l", "127.0.0.1", "-g", "0", "-n", "0", "--http-port", "-1",
            "--shutdown-timeout", "3",
        ]
        process.environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("PUSHGATE_") }
        let output = OutputCollector()
        let pipe = Pipe()
        process.standardError = pipe
        process.standardOutput = FileHandle.nullDevice
        pipe.fileHandleForReading.readChunksInBackground({ output.append($0) }, onEnd: { output.end() })
        let ended = AsyncStream<Void>.makeStream()
        process.terminationHandler = { _ in ended.continuation.finish() }
        try process.run()
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
        try await eventually("the daemon is ready", timeout: .seconds(60)) {
            if !process.isRunning { throw ExternalTools.ToolError("pushgate exited early:\n\(output.text)") }
            return output.text.contains("pushgate ready")
        }
        let registrationPort = try #require(Self.port("udp.registration", in: output.text))
        let notificationPort = try #require(GatewayCrashTests.notificationPort(in: output.text))
        let token = String(repeating: "ab", count: 32)
        try UDPSender(port: registrationPort).send(#"{"device": "\#(token)", "group": "g"}"#)
        try await eventually("the device is registered", timeout: .seconds(60)) {
            (try? ExternalTools.run("sqlite3", ["\(volume)/g.db", "SELECT count(*) FROM device"]).output)?
                .hasPrefix("1") ?? false
        }
        // Fill the volume: every write of the store now fails with "database or disk is full".
        _ = try ExternalTools.run("dd", ["if=/dev/zero", "of=\(volume)/filler", "bs=64k"])
        try UDPSender(port: notificationPort).send(
            #"{"groups": ["g"], "payload": {"aps": {"alert": "during the outage"}}}"#
        )
        try await eventually("the request waits for the store", timeout: .seconds(60)) {
            output.text.contains("will be retried")
        }
        let stopped = ContinuousClock.now
        kill(process.processIdentifier, SIGTERM)
        for await _ in ended.stream {}
        let took = ContinuousClock.now - stopped
        // 3 s of timeout, plus the cancellation's own time on a loaded machine; it used to wait for SIGKILL.
        #expect(took < .seconds(30), "the stop took \(took)")
    }

    static func port(_ key: String, in log: String) -> Int? {
        guard let line = log.split(separator: "\n").first(where: { $0.contains("pushgate ready") }),
            let field = line.split(separator: " ").first(where: { $0.hasPrefix("\(key)=") }),
            let colon = field.lastIndex(of: ":")
        else { return nil }
        return Int(field[field.index(after: colon)...])
    }
}
