import Foundation

/// The FCM simulator of an e2e run: `pushgate simulate` as a process of its own (its APNs side idle
/// on a free port), so that its CPU is FCM's alone. It writes a throwaway service account it knows,
/// which the gateway gets with `--fcm-service-account`, `--fcm-host` and `--fcm-ca`, as
/// `pushgate gateway --simulator` wires its FCM.
struct FCMStandIn: Sendable {
    var port: Int
    var controlPort: Int
    var caPath: String
    var serviceAccountPath: String
    var processPID: Int32?

    var authority: String { "127.0.0.1:\(port)" }

    /// What the gateway needs to reach this simulator (its token endpoint is in the account file).
    var gatewayArguments: [String] {
        ["--fcm-service-account", serviceAccountPath, "--fcm-host", authority, "--fcm-ca", caPath]
    }

    func cpu() -> CPUTime? { processPID.flatMap(ProcessMetrics.processCPU) }

    /// The simulator's `GET /stats`.
    struct Stats: Sendable, Equatable {
        var accepted: Int
        var rejected: Int
        /// Distinct registration tokens accepted, and messages to a token accepted before.
        var devices: Int
        var duplicates: Int
        var accessTokensIssued: Int
    }

    func stats() throws -> Stats {
        try Self.stats(from: ControlAPI.getJSON(port: controlPort, path: "/stats"))
    }

    static func stats(from json: [String: Any]) -> Stats {
        func integer(_ key: String) -> Int { (json[key] as? NSNumber)?.intValue ?? (json[key] as? Int) ?? -1 }
        return Stats(
            accepted: integer("accepted"),
            rejected: integer("rejected"),
            devices: integer("devices"),
            duplicates: integer("duplicates"),
            accessTokensIssued: integer("accessTokensIssued")
        )
    }

    static func arguments(
        options: GatewayBenchOptions,
        accountPath: String,
        latencyMilliseconds: Int
    ) -> [String] {
        [
            "simulate", "--host", "127.0.0.1", "--port", "0", "--control-port", "0", "--legacy-port=-1",
            "--feedback-port=-1", "--fcm-port", "0", "--fcm-control-port", "0", "--fcm-account-out", accountPath,
            "--fcm-latency-ms", String(latencyMilliseconds), "--threads", String(options.simulatorThreads),
            "--record-limit", "0", "--log-level", "warning",
        ]
    }

    static func describe(_ options: GatewayBenchOptions) -> String {
        let arguments = Self.arguments(
            options: options,
            accountPath: "<file>",
            latencyMilliseconds: options.rttMilliseconds ?? 0
        )
        return "our FCM simulator as a separate process (pushgate \(arguments.joined(separator: " "))): "
            + "an access token per hour, messages validated, 100 streams per connection (Google's)"
    }

    /// Runs `body` with a fresh FCM simulator holding every answer `--rtt-ms` (0 without it), and
    /// stops it afterwards.
    static func with<Result: Sendable>(
        options: GatewayBenchOptions,
        workDirectory: URL,
        _ body: (FCMStandIn) async throws -> Result
    ) async throws -> Result {
        let accountPath = workDirectory.appendingPathComponent("fcm-account-\(UUID().uuidString).json").path
        let child = try SimulatorProcess.start(
            binary: try options.binary(),
            arguments: arguments(
                options: options,
                accountPath: accountPath,
                latencyMilliseconds: options.rttMilliseconds ?? 0
            ),
            role: .fcmSimulator
        )
        do {
            let port = try await child.waitForPort(
                line: "FCM simulator (HTTP/2, TLS) listening on https://",
                timeout: 30
            )
            let controlPort = try await child.waitForPort(
                line: "FCM control API (HTTP/1.1) listening on http://",
                timeout: 30
            )
            let caPath = try await child.waitForValue(line: "FCM CA certificate written to ", timeout: 30)
            _ = try await child.waitForValue(line: "FCM service account written to ", timeout: 30)
            let standIn = FCMStandIn(
                port: port,
                controlPort: controlPort,
                caPath: caPath,
                serviceAccountPath: accountPath,
                processPID: child.pid
            )
            let result = try await body(standIn)
            await child.stop()
            try? FileManager.default.removeItem(atPath: accountPath)
            return result
        } catch {
            await child.stop()
            try? FileManager.default.removeItem(atPath: accountPath)
            throw error
        }
    }
}
