import Foundation
import PushgateCore

#if canImport(Glibc)
import Glibc
#endif

/// The haproxy stand-in of `scripts/haproxy-apns-standin.sh`, started and stopped by the gateway
/// modes when `--rtt-ms` is given: one haproxy thread that answers every request 200 with a fresh
/// `apns-id` (a UUID per answer, as APNs does), holding each answer the given milliseconds on its
/// own timers (`timeout tarpit`), so that a round trip costs the stand-in no CPU.
struct HAProxyStandIn: Sendable {
    var host: String
    var port: Int
    var caPath: String
    /// The script's directory for this instance (config, certificates, pid file), for `stop`.
    var root: String
    var pid: Int32
    var script: String

    static let scriptPath = "scripts/haproxy-apns-standin.sh"

    /// `--standin-script`, or the script of the checkout this executable was built in (a parent of
    /// `.build/…/release/`), or of the current directory.
    static func locateScript(override: String?) throws -> String {
        if let override {
            guard FileManager.default.isReadableFile(atPath: override) else {
                throw BenchError("--standin-script: \(override) is not a readable file")
            }
            return override
        }
        let executable =
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
            ?? CommandLine.arguments[0]
        var directory = URL(fileURLWithPath: executable).deletingLastPathComponent()
        while directory.path != "/" {
            let candidate = directory.appendingPathComponent(scriptPath).path
            if FileManager.default.isReadableFile(atPath: candidate) { return candidate }
            directory = directory.deletingLastPathComponent()
        }
        let fromCurrent = FileManager.default.currentDirectoryPath + "/" + scriptPath
        guard FileManager.default.isReadableFile(atPath: fromCurrent) else {
            throw BenchError(
                "--rtt-ms needs \(scriptPath) (not found above \(executable) nor here): pass --standin-script"
            )
        }
        return fromCurrent
    }

    /// `logAddress` (`127.0.0.1:PORT`): where it sends a receipt line per request carrying
    /// `"bench_seq":` (``BenchSequence``, ``ReceiptListener``).
    static func start(script: String, rttMilliseconds: Int, logAddress: String? = nil) async throws -> HAProxyStandIn {
        let output = try await runScript(
            script,
            ["start", "0", String(rttMilliseconds)] + (logAddress.map { [$0] } ?? [])
        )
        var values: [String: String] = [:]
        for field in output.split(whereSeparator: { $0 == " " || $0 == "\n" }) {
            let parts = field.split(separator: "=", maxSplits: 1)
            if parts.count == 2 { values[String(parts[0])] = String(parts[1]) }
        }
        guard let authority = values["APNS_HOST"], let colon = authority.lastIndex(of: ":"),
            let port = Int(authority[authority.index(after: colon)...]), let caPath = values["APNS_CA"],
            let root = values["STANDIN_ROOT"], let pid = values["STANDIN_PID"].flatMap(Int32.init)
        else { throw BenchError("\(script) start printed no APNS_HOST/APNS_CA/STANDIN_ROOT/STANDIN_PID: \(output)") }
        ChildProcesses.register(pid, as: .simulator)
        return HAProxyStandIn(
            host: String(authority[..<colon]),
            port: port,
            caPath: caPath,
            root: root,
            pid: pid,
            script: script
        )
    }

    /// Runs `body` with a fresh stand-in (``start(script:rttMilliseconds:logAddress:)``, the script found
    /// by ``locateScript(override:)``), stopped afterwards whether `body` throws or not.
    static func with<Result: Sendable>(
        scriptOverride: String?,
        rttMilliseconds: Int,
        logAddress: String? = nil,
        _ body: (HAProxyStandIn) async throws -> Result
    ) async throws -> Result {
        let haproxy = try await start(
            script: try locateScript(override: scriptOverride),
            rttMilliseconds: rttMilliseconds,
            logAddress: logAddress
        )
        do {
            let result = try await body(haproxy)
            await haproxy.stop()
            return result
        } catch {
            await haproxy.stop()
            throw error
        }
    }

    func stop() async {
        ChildProcesses.unregister(.simulator)
        _ = try? await Self.runScript(script, ["stop", root])
    }

    /// Runs the script to its end and returns its standard output. The output goes to a file, not a
    /// pipe: the haproxy daemon inherits the script's descriptors, so a pipe would never reach its end.
    private static func runScript(_ script: String, _ arguments: [String]) async throws -> String {
        let outputPath = FileManager.default.temporaryDirectory
            .appendingPathComponent("pushgate-bench-standin-\(UUID().uuidString).out").path
        guard FileManager.default.createFile(atPath: outputPath, contents: nil) else {
            throw BenchError("cannot create \(outputPath)")
        }
        defer { try? FileManager.default.removeItem(atPath: outputPath) }
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: outputPath))
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = [script] + arguments
        process.standardOutput = handle
        try process.run()
        // Reaped here: Foundation's own termination watch is not serviced from this async context.
        var status: Int32 = 0
        while waitpid(process.processIdentifier, &status, WNOHANG) == 0 { try await Task.sleep(for: .milliseconds(20)) }
        try? handle.close()
        let output = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
        guard status == 0 else {
            throw BenchError("\(script) \(arguments.joined(separator: " ")) failed (wait status \(status)): \(output)")
        }
        return output
    }
}

extension ProcessMetrics {
    /// TCP connections in state ESTABLISHED whose remote end is loopback `port` (from
    /// /proc/net/tcp and tcp6): the connections the gateway holds to the stand-in, counted from
    /// outside, whatever the stand-in is.
    static func establishedConnections(toPort port: Int) -> Int {
        let wanted = String(format: ":%04X", port)
        var count = 0
        for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
            // Read to the end: /proc reports size 0, and a one-shot read stops after the first page.
            guard let handle = FileHandle(forReadingAtPath: table) else { continue }
            let text = String(decoding: handle.readToEndRetryingInterrupts(), as: UTF8.self)
            try? handle.close()
            for line in text.split(separator: "\n").dropFirst() {
                let fields = line.split(separator: " ")
                // sl local_address rem_address st ...; st 01 = ESTABLISHED
                if fields.count > 3, fields[2].hasSuffix(wanted), fields[3] == "01" { count += 1 }
            }
        }
        return count
    }
}
