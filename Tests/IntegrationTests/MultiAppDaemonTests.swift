import Foundation
import PushgateCore
import Testing

/// The `pushgate` binary with configuration files and API keys: what an operator types.
@Suite("Daemon configuration and API keys", .serialized, .timeLimit(.minutes(3)))
struct MultiAppDaemonTests {
    /// Runs `pushgate -f ARGS` to completion (for start-up failures).
    static func runToExit(
        _ arguments: [String],
        environment: [String: String] = [:]
    ) throws -> (status: Int32, stderr: String) {
        let process = SpawnedProcess()
        process.executableURL = URL(fileURLWithPath: GatewayCrashTests.gatewayBinary)
        process.arguments = ["-f"] + arguments
        process.environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("PUSHGATE_") }.merging(
            environment
        ) { $1 }
        let pipe = Pipe()
        process.standardError = pipe
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        let data = pipe.fileHandleForReading.readToEndRetryingInterrupts()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    /// The one line `pushgate:` wrote to standard error before exiting.
    static func problemLine(_ stderr: String) -> String? {
        let lines = stderr.split(separator: "\n").filter { $0.hasPrefix("pushgate: ") }
        return lines.count == 1 ? String(lines[0]) : nil
    }

    @Test("a non-loopback HTTP address without API keys refuses to start: exit 78, one line naming the key")
    func nonLoopbackWithoutKeys() throws {
        let directory = try TemporaryDirectory()
        let file = directory.path("open.yaml")
        try Data("http: {host: 0.0.0.0, port: 0}\nstore: {path: \(directory.path("x.db"))}\n".utf8).write(
            to: URL(fileURLWithPath: file)
        )
        let (status, stderr) = try Self.runToExit(["--simulator", "--config", file])
        #expect(status == 78)
        #expect(
            Self.problemLine(stderr)
                == "pushgate: http.host: 0.0.0.0 is not a loopback address; without API keys the HTTP API listens on loopback only (configure apiKeys or --api-key-file)"
        )
        let (fromEnvironment, line) = try Self.runToExit(
            ["--simulator", "-d", directory.path("y.db")],
            environment: ["PUSHGATE_HTTP_HOST": "0.0.0.0"]
        )
        #expect(fromEnvironment == 78)
        #expect(Self.problemLine(line)?.hasPrefix("pushgate: http.host: 0.0.0.0 is not a loopback address") == true)
    }

    @Test("start-up problems in flags, environment and file each exit 78 with one line")
    func startupProblems() throws {
        let directory = try TemporaryDirectory()
        let duplicate = directory.path("dup.yaml")
        try Data("apps: [a, a]\n".utf8).write(to: URL(fileURLWithPath: duplicate))
        let cases: [([String], [String: String], String)] = [
            (["-g", "70000"], [:], "pushgate: -g: 70000 is not a port number (0 to 65535)"),
            (
                [], ["PUSHGATE_LOG_LEVEL": "loud"],
                "pushgate: logLevel: unknown level \"loud\" (one of trace, debug, info, notice, warning, error, critical)"
            ),
            (["--config", duplicate], [:], "pushgate: apps: app \"a\" is listed twice"),
            (
                ["-c", directory.path("missing.crt"), "-k", directory.path("missing.key")], [:],
                "pushgate: -c: cannot read \(directory.path("missing.crt"))"
            ),
            (
                ["--simulator", "--api-key-file", directory.path("no-keys")], [:],
                "pushgate: --api-key-file: cannot read \(directory.path("no-keys"))"
            ),
        ]
        for (arguments, environment, expected) in cases {
            let (status, stderr) = try Self.runToExit(
                arguments + ["-d", directory.path("z.db")],
                environment: environment
            )
            #expect(status == 78, "\(arguments) \(environment)")
            #expect(Self.problemLine(stderr) == expected, "\(stderr)")
        }
    }

    @Test("--api-key-file: /healthz open, /v1 401 without or with a wrong key, 204 with a key from the file")
    func apiKeyFileLive() async throws {
        let directory = try TemporaryDirectory()
        let keys = directory.path("keys")
        try Data("# one key per line\nlive-test-key-0123456789\n".utf8).write(to: URL(fileURLWithPath: keys))
        let port = ExternalTools.freeTCPPort()
        let process = SpawnedProcess()
        process.executableURL = URL(fileURLWithPath: GatewayCrashTests.gatewayBinary)
        process.arguments = [
            "-f", "--simulator", "-d", directory.path("keys.db"), "-l", "127.0.0.1", "-g", "0", "-n", "0",
            "--http-port", "\(port)",
            "--api-key-file", keys,
        ]
        process.environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("PUSHGATE_") }
        let output = OutputCollector()
        let pipe = Pipe()
        process.standardError = pipe
        process.standardOutput = FileHandle.nullDevice
        pipe.fileHandleForReading.readChunksInBackground { output.append($0) }
        try process.run()
        defer {
            process.terminate()
            process.waitUntilExit()
        }
        try await eventually("the API listens", timeout: .seconds(60)) {
            if !process.isRunning { throw ExternalTools.ToolError("pushgate exited early:\n\(output.text)") }
            return output.text.contains("HTTP API listening")
        }
        func status(_ method: String, _ path: String, key: String?) throws -> String {
            var arguments = [
                "-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", method, "http://127.0.0.1:\(port)\(path)",
            ]
            if let key { arguments += ["-H", "Authorization: Bearer \(key)"] }
            return try ExternalTools.run("curl", arguments).output
        }
        let device = "/v1/groups/g/devices/" + String(repeating: "ab", count: 32)
        #expect(try status("GET", "/healthz", key: nil) == "200")
        #expect(try status("PUT", device, key: nil) == "401")
        #expect(try status("PUT", device, key: "wrong-key-0123456789") == "401")
        #expect(try status("PUT", device, key: "live-test-key-0123456789") == "204")
        #expect(!output.text.contains("live-test-key-0123456789"), "keys are never logged")
    }
}
