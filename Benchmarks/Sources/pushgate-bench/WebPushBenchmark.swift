import ArgumentParser
import Foundation
import Logging
import PushTransport
import PushgateCore
import WebPush
import WebPushSimulator
import WebPushTransport

/// `pushgate-bench webpush`: one request to N browser subscriptions on one origin, through the Web Push
/// service plug-in (`WebPushPushService`: the message built once, encrypted per subscription) and its
/// client (`WebPushClient`: a pool per origin, VAPID per origin) to the Web Push simulator, in this
/// process. The gateway's own path (store, dispatcher) is not in it (`webpush-gateway` measures that).
/// The simulator's threads are measured apart from the rest (the client and the encryption).
struct WebPushBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "webpush",
        abstract:
            "Web Push: N subscriptions on one origin through WebPushPushService and WebPushClient to the simulator.",
        discussion: """
            Build in release first (swift build -c release --product pushgate-bench). The simulator decrypts \
            every message and verifies its VAPID token unless --no-decrypt; its threads' CPU is reported \
            apart from the client's (encryption included).
            """
    )

    @Option(help: "Subscriptions, each sent one message.")
    var count: Int = 100_000

    @Option(help: "Connections to the origin at most.")
    var connections: Int = 4

    @Option(name: .customLong("in-flight"), help: "Most messages submitted and not yet answered.")
    var inFlight: Int = 4_000

    @Option(help: "Devices per submit (the dispatcher's chunk).")
    var batch: Int = 500

    @Option(name: .customLong("client-threads"), help: "The client's event-loop threads.")
    var clientThreads: Int = 1

    @Option(name: .customLong("simulator-threads"), help: "The simulator's event-loop threads.")
    var simulatorThreads: Int = 1

    @Option(
        name: .customLong("simulator-workers"),
        help: "The simulator's threads that verify VAPID and decrypt (0: on its event loops)."
    )
    var simulatorWorkers: Int = 0

    @Flag(
        name: .customLong("http1"),
        help: "The origin offers HTTP/1.1 only (keep-alive, one message per connection at a time)."
    )
    var http1 = false

    @Flag(
        name: .customLong("decrypt"),
        inversion: .prefixedNo,
        help: "Whether the simulator decrypts each message and verifies its VAPID token."
    )
    var decrypt = true

    @Option(help: "Give up after this many seconds.")
    var timeout: Int = 600

    func validate() throws {
        guard simulatorWorkers >= 0 else { throw ValidationError("--simulator-workers must be at least 0") }
        guard count >= 1, connections >= 1, inFlight >= 1, batch >= 1, clientThreads >= 1, simulatorThreads >= 1 else {
            throw ValidationError("--count, --connections, --in-flight, --batch and thread counts must be at least 1")
        }
    }

    func run() async throws {
        var configuration = WebPushSimulator.Configuration()
        configuration.origins = [.init(offersHTTP2: !http1)]
        configuration.controlPort = nil
        configuration.maximumConcurrentStreams = 1_000
        configuration.recordLimit = 1_000
        configuration.decryptsMessages = decrypt
        configuration.eventLoopThreads = simulatorThreads
        configuration.workerThreads = simulatorWorkers
        configuration.logger.logLevel = .warning
        let threadsBefore = ProcessMetrics.threadIDs()
        try await WebPushSimulator.withRunning(configuration) { simulator in
            let simulatorThreadIDs = ProcessMetrics.threadIDs().subtracting(threadsBefore)
            let key = VAPIDKey.generate()
            print("making \(count) subscriptions…")
            let tokens = try (0..<count).map { _ in
                let made = try simulator.createSubscription(
                    originIndex: 0,
                    applicationServerKey: key.publicKeyBase64URL
                )
                return try WebPushSubscription(jsonBytes: Array(made.json.utf8)).deviceToken
            }
            var client = WebPushClient.Configuration(
                vapidKey: key,
                subject: try VAPIDSubject("mailto:bench@example.com"),
                trustRoots: .caFile(simulator.caCertificatePath)
            )
            client.maximumConnectionsPerOrigin = connections
            client.eventLoopThreads = clientThreads
            client.requestTimeout = .seconds(Int64(timeout))
            client.shutdownGracePeriod = .seconds(2)
            var logger = Logger(label: "pushgate.bench.webpush")
            logger.logLevel = .warning
            try await WebPushClient.withClient(configuration: client, logger: logger) { client in
                let service = WebPushPushService(transport: client)
                let request = NotificationRequest(
                    id: try RequestID("bench"),
                    payload: try Payload(jsonString: #"{"title":"Goal!","body":"Lyon 2 - 1","team":"Lyon"}"#),
                    createdAt: Date()
                )
                let prepared = try service.prepare(request, logger: logger)
                // Warm-up: opens the connections and signs the origin's token; not timed.
                let warmup = BenchReceiver()
                _ = await feed(prepared, tokens: Array(tokens.prefix(min(2_000, count))), receiver: warmup)
                simulator.reset()

                let receiver = BenchReceiver()
                let machineBefore = ProcessMetrics.machineCPU()
                let simulatorBefore = ProcessMetrics.threadsCPU(simulatorThreadIDs)
                let cpuBefore = ProcessMetrics.selfCPU()
                let start = ContinuousClock.now
                let finished = await feed(prepared, tokens: tokens, receiver: receiver)
                let elapsed = ContinuousClock.now - start
                let processCPU = ProcessMetrics.selfCPU() - cpuBefore
                let simulatorCPU = ProcessMetrics.threadsCPU(simulatorThreadIDs) - simulatorBefore
                let machineAfter = ProcessMetrics.machineCPU()
                let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
                let clientCPU = processCPU - simulatorCPU
                let completed = receiver.completed
                let stats = simulator.stats()
                print(
                    """
                    webpush: \(count) subscriptions on one origin (\(http1 ? "HTTP/1.1" : "HTTP/2")), \
                    \(connections) connection(s) at most, in flight \(inFlight), batch \(batch)\
                    \(finished ? "" : " (TIMED OUT)")
                      completed \(completed), failed \(receiver.failed) \(receiver.failuresByLabel)
                      simulator: delivered \(stats.delivered), decrypting \(decrypt), connections \
                    \(simulator.connections(originIndex: 0).peak) at most
                      \(Int(Double(completed) / seconds)) messages/s over \(String(format: "%.2f", seconds)) s
                      CPU: client (service, encryption, client) \
                    \(String(format: "%.1f", clientCPU.total / Double(max(completed, 1)) * 1e6)) µs/message \
                    (\(String(format: "%.2f", clientCPU.total)) s); simulator \
                    \(String(format: "%.1f", simulatorCPU.total / Double(max(completed, 1)) * 1e6)) µs/message \
                    (\(String(format: "%.2f", simulatorCPU.total)) s)
                      machine: \(machineBusy(machineBefore, machineAfter, seconds: seconds)) \
                    load average \(FileSystem.loadAverage() ?? "?")
                    """
                )
            }
        }
    }

    private func machineBusy(
        _ before: (busy: Double, total: Double)?,
        _ after: (busy: Double, total: Double)?,
        seconds: Double
    ) -> String {
        guard let before, let after else { return "busy ?;" }
        return String(format: "%.2f cores busy (all processes);", (after.busy - before.busy) / seconds)
    }

    /// Submits `tokens` in batches of `batch`, never more than `inFlight` unanswered, and waits for every
    /// outcome; false when `timeout` ran out first.
    private func feed(_ prepared: any PreparedPush, tokens: [DeviceToken], receiver: BenchReceiver) async -> Bool {
        let batchSize = max(1, min(batch, inFlight))
        let inFlight = self.inFlight
        let timeout = self.timeout
        return await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                var submitted = 0
                while submitted < tokens.count {
                    let size = min(batchSize, tokens.count - submitted)
                    await receiver.wait(untilCompleted: submitted + size - inFlight)
                    if Task.isCancelled { return false }
                    let sends = (submitted..<submitted + size).map { PushSend(token: tokens[$0], tag: UInt64($0)) }
                    let submission = prepared.submit(sends, sentAt: Date(), to: receiver)
                    for unsendable in submission.unsendable {
                        receiver.receive(
                            .init(webPushUnsendable: unsendable.reason),
                            token: unsendable.send.token,
                            tag: 0
                        )
                    }
                    submitted += size
                }
                await receiver.wait(untilCompleted: tokens.count)
                return receiver.completed >= tokens.count
            }
            group.addTask {
                try? await Task.sleep(for: .seconds(timeout))
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
    }
}

extension BenchReceiver: PushOutcomeReceiver {
    func receive(_ outcome: PushOutcome, token: DeviceToken, tag: UInt64) {
        record(accepted: outcome.verdict == .delivered, label: outcome.reason)
    }
}

extension PushOutcome {
    /// A device the service set apart without sending it.
    init(webPushUnsendable reason: String) {
        self.init(
            service: .webpush,
            verdict: .failed,
            outcomeClass: .rejected,
            status: nil,
            reason: reason,
            metricsReason: reason
        )
    }
}
