import Foundation
import PushgateCore

/// The Web Push simulator of a gateway benchmark: `pushgate simulate` as a process of its own (its APNs
/// side idle on a free port), one HTTP/2 origin, so that its CPU is apart from the gateway's. With
/// `decryptEvery` 1 it verifies every VAPID signature and decrypts every message (on `workers` threads);
/// above 1 it checks what a real push service checks (which decrypts nothing: a signature once per
/// distinct `Authorization` header, every message's headers and record header) and decrypts a sample.
struct WebPushStandIn: Sendable {
    var origin: String
    var controlPort: Int
    var caPath: String
    var processPID: Int32
    var workers: Int
    var decryptEvery: Int

    var description: String {
        let checks =
            decryptEvery == 1
            ? "VAPID verified and every message decrypted"
            : "as a real push service checks (VAPID signature once per distinct Authorization header, every "
                + "message's headers and aes128gcm record header), every \(decryptEvery)th message decrypted"
        return "our Web Push simulator as a separate process, origin \(origin), \(checks), on \(workers) worker "
            + "thread(s)"
    }

    func cpu() -> CPUTime? { ProcessMetrics.processCPU(pid: processPID) }

    /// The simulator's `GET /stats`.
    struct Stats: Sendable, Equatable {
        var requests: Int
        var delivered: Int
        var subscriptionsDelivered: Int
        var duplicates: Int
        var decrypted: Int
        var tokensVerified: Int

        /// Push requests answered, whatever the answer.
        var answered: Int { requests }
    }

    func stats() throws -> Stats {
        Self.stats(from: try ControlAPI.getJSON(port: controlPort, path: "/stats"))
    }

    static func stats(from json: [String: Any]) -> Stats {
        func integer(_ key: String) -> Int { (json[key] as? NSNumber)?.intValue ?? (json[key] as? Int) ?? -1 }
        return Stats(
            requests: integer("requests"),
            delivered: integer("delivered"),
            subscriptionsDelivered: integer("subscriptionsDelivered"),
            duplicates: integer("duplicates"),
            decrypted: integer("decrypted"),
            tokensVerified: integer("tokensVerified")
        )
    }

    /// The app's `webpush.*` keys as the gateway's flags: the bench's VAPID key, this simulator's CA, the
    /// connections per origin.
    func gatewayArguments(vapidKeyPath: String, connections: Int) -> [String] {
        [
            "--app-default-webpush-vapid-key", vapidKeyPath, "--app-default-webpush-subject",
            "mailto:bench@pushgate.invalid", "--app-default-webpush-ca", caPath,
            "--app-default-webpush-pool-max-connections-per-origin", String(connections),
        ]
    }

    /// `count` subscriptions on the origin, made for `applicationServerKey` (the simulator keeps their
    /// private keys), as browser device tokens.
    func createSubscriptions(count: Int, applicationServerKey: String) throws -> [DeviceToken] {
        let body = #"{"origin":0,"count":\#(count),"applicationServerKey":"\#(applicationServerKey)"}"#
        let text = try ControlAPI.requestText(
            port: controlPort,
            method: "POST",
            path: "/subscriptions/batch",
            body: body,
            timeoutSeconds: 300
        )
        let tokens = try text.split(separator: "\n").map { line in
            do {
                return try WebPushSubscription(tokenValue: String(line)).deviceToken
            } catch {
                throw BenchError("the simulator's subscription \(line.prefix(80)) does not parse: \(error)")
            }
        }
        guard tokens.count == count else { throw BenchError("asked for \(count) subscriptions, got \(tokens.count)") }
        return tokens
    }

    static func arguments(options: GatewayBenchOptions, workers: Int, decryptEvery: Int) -> [String] {
        [
            "simulate", "--host", "127.0.0.1", "--port", "0", "--control-port", "0", "--legacy-port=-1",
            "--feedback-port=-1", "--fcm-port=-1", "--webpush-port", "0", "--webpush-http1-port=-1",
            "--webpush-control-port", "0", "--webpush-worker-threads", String(workers),
            "--webpush-decrypt-every", String(decryptEvery), "--threads",
            String(options.simulatorThreads), "--record-limit", "0", "--log-level", "warning",
        ]
    }

    /// Runs `body` with a fresh simulator, and stops it afterwards.
    static func with<Result: Sendable>(
        options: GatewayBenchOptions,
        binary: String? = nil,
        workers: Int,
        decryptEvery: Int = 1,
        _ body: (WebPushStandIn) async throws -> Result
    ) async throws -> Result {
        let child = try SimulatorProcess.start(
            binary: try binary ?? options.binary(),
            arguments: arguments(options: options, workers: workers, decryptEvery: decryptEvery),
            role: .webPushSimulator
        )
        do {
            let origin = try await child.waitForValue(
                line: "Web Push simulator origin 0 (HTTP/2 and HTTP/1.1, TLS) listening on",
                timeout: 30
            )
            let controlPort = try await child.waitForPort(
                line: "Web Push control API (HTTP/1.1) listening on http://",
                timeout: 30
            )
            let caPath = try await child.waitForValue(line: "Web Push CA certificate written to ", timeout: 30)
            let standIn = WebPushStandIn(
                origin: origin,
                controlPort: controlPort,
                caPath: caPath,
                processPID: child.pid,
                workers: workers,
                decryptEvery: decryptEvery
            )
            let result = try await body(standIn)
            await child.stop()
            return result
        } catch {
            await child.stop()
            throw error
        }
    }
}
