import APNsHTTP2
import APNsTransport
import Foundation
import Logging
import NIOCore
import PushTransport
import PushgateCore
import Synchronization

/// Counts outcomes for every request of a run (one receiver for all of them, as the dispatcher
/// uses it: no task, closure or continuation per notification) and wakes the feeder when enough
/// have completed.
final class BenchReceiver: APNsOutcomeReceiver {
    private struct Waiter {
        var target: Int
        var continuation: CheckedContinuation<Void, Never>
    }

    private let completedCount = Atomic<Int>(0)
    private let failedCount = Atomic<Int>(0)
    /// The completion count the waiting feeder needs (Int.max: nobody waits). Read on every
    /// outcome without the lock; the lock is only taken when the target is reached.
    private let waitTarget = Atomic<Int>(Int.max)
    private let waiter = Mutex<Waiter?>(nil)
    /// Failures by reason or transport failure (rare: only failed outcomes take this lock).
    private let failures = Mutex<[String: Int]>([:])

    var completed: Int { completedCount.load(ordering: .sequentiallyConsistent) }
    var failed: Int { failedCount.load(ordering: .sequentiallyConsistent) }
    var failuresByLabel: [String: Int] { failures.withLock { $0 } }

    func receive(_ outcome: APNsOutcome, for request: APNsRequest) {
        record(
            accepted: outcome.isAccepted,
            label: outcome.transportFailure.map { "\($0.label)" } ?? outcome.reasonLabel
        )
    }

    /// One outcome, from any service's receiver conformance (`label` is read only for a failure).
    func record(accepted: Bool, label: @autoclosure () -> String) {
        if !accepted {
            failedCount.add(1, ordering: .relaxed)
            let label = label()
            failures.withLock { $0[label, default: 0] += 1 }
        }
        // Sequentially consistent with the waiter's store-then-load: either this load sees the
        // target, or the waiter's re-check sees this increment.
        let done = completedCount.add(1, ordering: .sequentiallyConsistent).newValue
        if done >= waitTarget.load(ordering: .sequentiallyConsistent) { wakeIfReached() }
    }

    private func wakeIfReached() {
        let continuation = waiter.withLock { waiter -> CheckedContinuation<Void, Never>? in
            guard let current = waiter, completed >= current.target else { return nil }
            waiter = nil
            waitTarget.store(Int.max, ordering: .sequentiallyConsistent)
            return current.continuation
        }
        continuation?.resume()
    }

    /// Returns once at least `target` outcomes have arrived, or when the task is cancelled.
    /// One waiter at a time.
    func wait(untilCompleted target: Int) async {
        if completed >= target || Task.isCancelled { return }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = waiter.withLock { waiter -> Bool in
                    if Task.isCancelled { return true }
                    waiter = Waiter(target: target, continuation: continuation)
                    waitTarget.store(target, ordering: .sequentiallyConsistent)
                    guard completed >= target else { return false }
                    waiter = nil
                    waitTarget.store(Int.max, ordering: .sequentiallyConsistent)
                    return true
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            let continuation = waiter.withLock { waiter -> CheckedContinuation<Void, Never>? in
                defer {
                    waiter = nil
                    waitTarget.store(Int.max, ordering: .sequentiallyConsistent)
                }
                return waiter?.continuation
            }
            continuation?.resume()
        }
    }
}

/// Distinct 32-byte device tokens: a random 24-byte prefix per run, then the index.
struct DeviceTokenFactory {
    private let prefix: [UInt8]
    private static let digits = Array("0123456789abcdef".utf8)

    init() {
        var generator = SystemRandomNumberGenerator()
        var prefix: [UInt8] = []
        prefix.reserveCapacity(48)
        for _ in 0..<24 {
            let byte = UInt8.random(in: 0...255, using: &generator)
            prefix.append(Self.digits[Int(byte >> 4)])
            prefix.append(Self.digits[Int(byte & 0x0f)])
        }
        self.prefix = prefix
    }

    func token(_ index: Int) -> DeviceToken {
        let hex = String(unsafeUninitializedCapacity: 64) { buffer in
            for position in 0..<48 { buffer[position] = prefix[position] }
            var value = UInt64(truncatingIfNeeded: index)
            for position in stride(from: 63, through: 48, by: -1) {
                buffer[position] = Self.digits[Int(value & 0x0f)]
                value >>= 4
            }
            return 64
        }
        // Valid by construction (64 lower-case hex digits).
        return try! DeviceToken(hex: hex)
    }
}

/// One timed run of our client against a target.
struct ClientRunResult: Sendable, Codable {
    var connectionsRequested: Int
    var connectionsUsed: Int
    var notifications: Int
    var completed: Int
    var accepted: Int
    var failed: Int
    var failures: [String: Int]
    var timedOut: Bool
    var seconds: Double
    var notificationsPerSecond: Double
    /// getrusage(RUSAGE_SELF) over the timed part: the client plus, in process, the simulator.
    var processCPU: CPUTime
    /// The simulator's share: its event-loop threads (in process) or its process.
    var simulatorCPU: CPUTime?
    /// processCPU minus the simulator's threads when they share the process.
    var clientCPU: CPUTime
    var clientCPUMicrosecondsPerNotification: Double
    /// Everything else on the machine during the run (other jobs, the kernel's own threads).
    var otherMachineCPUSeconds: Double?
    var peakRSSBytes: Int?
    var simulatorPeakRSSBytes: Int?
    var simulatorAccepted: Int?
    var placement: BenchTarget.Placement
}

enum ClientBenchmark {
    static let payload = #"{"aps":{"alert":"Hello from pushgate-bench"}}"#

    static func run(
        options: BenchOptions,
        connections: Int,
        target: BenchTarget,
        key: ThrowawayKey
    ) async throws -> ClientRunResult {
        let signer = try ProviderTokenSigner(
            pemRepresentation: key.privateKeyPEM,
            keyID: ThrowawayKey.keyID,
            teamID: ThrowawayKey.teamID
        )
        let tokens = ProviderTokenManager(signer: signer)
        var configuration = APNsClient.Configuration(
            endpoint: .init(host: target.host, port: target.port),
            authentication: .token(tokens),
            trustRoots: target.caPath.map { .caFile($0) } ?? .system
        )
        configuration.maximumConnections = connections
        configuration.maximumStreamsPerConnection = options.streams
        configuration.eventLoopThreads = options.clientThreads
        configuration.requestTimeout = .seconds(Int64(options.timeout))
        configuration.shutdownGracePeriod = .seconds(2)
        var logger = Logger(label: "pushgate.bench.client")
        logger.logLevel = .warning

        let notification = PreparedNotification(
            try NotificationContent(
                topic: Topic(options.topic),
                pushType: .alert,
                priority: .immediate,
                expiration: .immediately,
                collapseID: nil,
                payload: Payload(jsonString: payload)
            )
        )

        return try await APNsClient.withClient(configuration: configuration, logger: logger) { client in
            let factory = DeviceTokenFactory()
            // Warm-up: opens the connections (the pool opens another only while the open ones are
            // full) and lets the HPACK tables fill; not timed.
            if options.warmup > 0 {
                let warmupReceiver = BenchReceiver()
                let finished = await feed(
                    client: client,
                    notification: notification,
                    receiver: warmupReceiver,
                    tokens: factory,
                    firstIndex: 1 << 40,
                    count: options.warmup,
                    options: options
                )
                guard finished, warmupReceiver.failed == 0 else {
                    throw BenchError(
                        "warm-up did not complete: \(warmupReceiver.completed) of \(options.warmup) answered, failures \(warmupReceiver.failuresByLabel)"
                    )
                }
            }
            let connectionsUsed = client.statistics.connections
            let acceptedBefore = target.simulatorAccepted?()

            ProcessMetrics.resetPeakRSS()
            let receiver = BenchReceiver()
            let machineBefore = ProcessMetrics.machineCPU()
            let simulatorBefore = target.simulatorCPU()
            let cpuBefore = ProcessMetrics.selfCPU()
            let start = ContinuousClock.now
            let finished = await feed(
                client: client,
                notification: notification,
                receiver: receiver,
                tokens: factory,
                firstIndex: 0,
                count: options.count,
                options: options
            )
            let elapsed = ContinuousClock.now - start
            let cpuAfter = ProcessMetrics.selfCPU()
            let simulatorAfter = target.simulatorCPU()
            let machineAfter = ProcessMetrics.machineCPU()
            let peak = ProcessMetrics.peakRSS()

            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            let processCPU = cpuAfter - cpuBefore
            let simulatorCPU: CPUTime? = {
                guard let before = simulatorBefore, let after = simulatorAfter else { return nil }
                return after - before
            }()
            let clientCPU = target.placement == .inProcess ? processCPU - (simulatorCPU ?? .zero) : processCPU
            var other: Double? = nil
            if let before = machineBefore, let after = machineAfter {
                var ours = processCPU.total
                if target.placement == .process { ours += simulatorCPU?.total ?? 0 }
                other = max(0, (after.busy - before.busy) - ours)
            }
            let completed = receiver.completed
            return ClientRunResult(
                connectionsRequested: connections,
                connectionsUsed: max(connectionsUsed, client.statistics.connections),
                notifications: options.count,
                completed: completed,
                accepted: completed - receiver.failed,
                failed: receiver.failed,
                failures: receiver.failuresByLabel,
                timedOut: !finished,
                seconds: seconds,
                notificationsPerSecond: Double(completed) / seconds,
                processCPU: processCPU,
                simulatorCPU: simulatorCPU,
                clientCPU: clientCPU,
                clientCPUMicrosecondsPerNotification: clientCPU.total / Double(max(completed, 1)) * 1e6,
                otherMachineCPUSeconds: other,
                peakRSSBytes: peak,
                simulatorPeakRSSBytes: target.simulatorPeakRSS(),
                simulatorAccepted: acceptedBefore.flatMap { before in target.simulatorAccepted.map { $0() - before } },
                placement: target.placement
            )
        }
    }

    /// Submits `count` requests in batches, never more than `options.inFlight` outstanding, and
    /// waits for every outcome. Returns false when `options.timeout` ran out first.
    static func feed(
        client: APNsClient,
        notification: PreparedNotification,
        receiver: BenchReceiver,
        tokens: DeviceTokenFactory,
        firstIndex: Int,
        count: Int,
        options: BenchOptions
    ) async -> Bool {
        let batchSize = max(1, min(options.batch, options.inFlight))
        let inFlight = options.inFlight
        return await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                var submitted = 0
                var requests: [APNsRequest] = []
                requests.reserveCapacity(batchSize)
                while submitted < count {
                    let size = min(batchSize, count - submitted)
                    // Room for this batch: outstanding = submitted - completed must stay <= inFlight.
                    await receiver.wait(untilCompleted: submitted + size - inFlight)
                    if Task.isCancelled { return false }
                    requests.removeAll(keepingCapacity: true)
                    for offset in 0..<size {
                        let index = firstIndex + submitted + offset
                        requests.append(
                            APNsRequest(
                                notification: notification,
                                deviceToken: tokens.token(index),
                                tag: UInt64(index),
                                receiver: receiver
                            )
                        )
                    }
                    client.submit(requests)
                    submitted += size
                }
                await receiver.wait(untilCompleted: count)
                return receiver.completed >= count
            }
            group.addTask {
                try? await Task.sleep(for: .seconds(options.timeout))
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
    }
}
