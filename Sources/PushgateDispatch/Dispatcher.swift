public import APNsClient
import Foundation
public import Logging
public import PushgateCore
public import ServiceLifecycle
import Synchronization

/// Where an app's notifications go: its transport to APNs (the HTTP/2 client with the app's
/// credentials, environment and pool, or the legacy binary interface) and its topic.
public struct DeliveryRoute: Sendable {
    public var client: any NotificationTransport
    public var topic: Topic

    public init(client: any NotificationTransport, topic: Topic) {
        self.client = client
        self.topic = topic
    }
}

/// Turns the ledger's work into APNs requests: claims chunks of a request's targets, streams them into
/// the app's APNs client with bounded in-flight work, and records outcomes in batches (progress,
/// retries, failures, invalidations in one transaction per batch). Also sends retries when they fall
/// due. Nothing about a notification lives only in memory: a crash loses at most the outcomes of the
/// batch in flight, and those devices are sent to again on restart.
public final class Dispatcher: Service, NotificationIntake {
    public struct Configuration: Sendable {
        /// This process's identity in the ledger's leases. A restart with the same id reclaims its
        /// own chunks at once.
        public var instanceID: InstanceID
        /// Targets per chunk: a unit of work claimed (and, with several instances, shared).
        public var chunkSize: Int = 20_000
        /// Targets read from the store at a time.
        public var pageSize: Int = 4_000
        /// Notifications sent but not yet answered, at most (the crash-duplicate window).
        public var maximumInFlight: Int = 2_000
        /// Outcomes recorded per transaction, at most; and the longest they wait to be recorded.
        public var progressBatch: Int = 4_000
        public var progressInterval: Duration = .milliseconds(100)
        public var leaseDuration: Duration = .seconds(60)
        /// When there is nothing to do and nobody wakes us, look again this often.
        public var idleInterval: Duration = .seconds(1)
        /// Retries claimed at a time.
        public var retryBatch: Int = 1_000
        public var retryPolicy: RetryPolicy = RetryPolicy()
        /// On shutdown, how long in-flight notifications may take to be answered.
        public var shutdownGracePeriod: Duration = .seconds(5)

        public init(instanceID: InstanceID) {
            self.instanceID = instanceID
        }
    }

    private let store: any PushStore
    private let routes: [String: DeliveryRoute]
    private let configuration: Configuration
    private let clock: any WallClock
    private let logger: Logger
    private let metrics: DispatchMetrics
    private let wake = WakeSignal()
    private let stopping = Atomic<Bool>(false)
    /// Prepared notifications per request: a request is immutable, so its wire form is built once.
    private let prepared = Mutex<[RequestID: (NotificationRequest, PreparedNotification)]>([:])
    private let random = Mutex(SystemRandomNumberGenerator())

    public init(
        store: any PushStore, routes: [String: DeliveryRoute], configuration: Configuration,
        clock: any WallClock = SystemWallClock(), logger: Logger = Logger(label: "pushgate.dispatch"),
        metrics: DispatchMetrics = .disabled
    ) {
        self.metrics = metrics
        self.store = store
        self.routes = routes
        self.configuration = configuration
        self.clock = clock
        self.logger = logger
    }

    // MARK: Intake

    /// Stores the request durably, then wakes the dispatch loop.
    public func submit(_ request: NotificationRequest) async throws -> EnqueueResult {
        guard routes[request.app] != nil else {
            throw StoreError(code: StoreError.Code("unknown_app"), message: "unknown app \"\(request.app)\"")
        }
        let result = try await store.enqueue(request)
        metrics.requestAccepted(app: request.app, targets: result.targetCount)
        logger.debug(
            "notification request queued",
            metadata: ["push.request_id": "\(result.id)", "push.targets": "\(result.targetCount)", "push.app": "\(request.app)"])
        wake.signal()
        return result
    }

    /// Wakes the dispatch loop when work was added elsewhere (another instance, through the store's
    /// notifications), instead of waiting for its idle interval.
    public func wakeUp() { wake.signal() }

    // MARK: The loop

    public func run() async throws {
        let released = try await store.releaseLeases(owner: configuration.instanceID, now: clock.now())
        if released > 0 {
            logger.info("resuming work left by the previous run", metadata: ["push.leases_released": "\(released)"])
        }
        try await withGracefulShutdownHandler {
            try await loop()
        } onGracefulShutdown: {
            self.stopping.store(true, ordering: .relaxed)
            self.wake.signal()
        }
        // Whatever is unfinished is claimable at once by the next start (or another instance).
        _ = try? await store.releaseLeases(owner: configuration.instanceID, now: clock.now())
        logger.info("dispatcher stopped")
    }

    private var isStopping: Bool { stopping.load(ordering: .relaxed) || Task.isCancelled }

    private func loop() async throws {
        var lastExpiry = Date.distantPast
        while !isStopping {
            let now = clock.now()
            if now.timeIntervalSince(lastExpiry) >= 1 {
                lastExpiry = now
                for id in try await store.expireOverdue(now: now) {
                    logger.info("notification request expired before every device was reached", metadata: ["push.request_id": "\(id)"])
                    await logCompletion(of: id)
                }
            }
            if let chunk = try await store.claimChunk(
                owner: configuration.instanceID, now: now, leaseDuration: configuration.leaseDuration,
                chunkSize: configuration.chunkSize)
            {
                try await deliver(chunk)
                continue
            }
            let retries = try await store.claimRetries(
                owner: configuration.instanceID, now: now, leaseDuration: configuration.leaseDuration,
                limit: configuration.retryBatch)
            if !retries.isEmpty {
                try await deliver(retries)
                continue
            }
            var timeout = configuration.idleInterval
            if let next = try await store.nextWakeUp(after: now) {
                let seconds = max(0, next.timeIntervalSince(clock.now()))
                timeout = min(timeout, .milliseconds(Int64(seconds * 1000) + 1))
            }
            await wake.wait(timeout: timeout)
        }
    }

    private func requestAndNotification(_ id: RequestID) async throws -> (NotificationRequest, PreparedNotification)? {
        if let cached = prepared.withLock({ $0[id] }) { return cached }
        guard let request = try await store.request(id) else { return nil }
        guard let route = routes[request.app] else {
            logger.error("request for an app that is not configured", metadata: ["push.request_id": "\(id)", "push.app": "\(request.app)"])
            return nil
        }
        let content = try NotificationContent(
            topic: route.topic, pushType: request.pushType, priority: request.priority, expiration: request.expiration,
            collapseID: request.collapseID, payload: request.payload)
        let entry = (request, PreparedNotification(content))
        prepared.withLock { cache in
            if cache.count > 1_000 { cache.removeAll() }
            cache[id] = entry
        }
        return entry
    }

    // MARK: Chunks

    /// Streams a chunk's targets into the APNs client and records outcomes as they come back.
    private func deliver(_ chunk: WorkChunk) async throws {
        guard let (request, notification) = try await requestAndNotification(chunk.requestID),
            let route = routes[request.app]
        else {
            // Cannot be sent (unknown app after a configuration change): fail its targets for good.
            try await failWholeChunk(chunk, reason: "unknown_app")
            return
        }
        if chunk.isTakeover {
            logger.info("taking over an unfinished chunk", metadata: ["push.request_id": "\(chunk.requestID)", "push.chunk": "\(chunk.id)"])
        }
        let collector = OutcomeCollector()
        var pageCursor = chunk.progress
        var buffered: ArraySlice<DeliveryTarget> = []
        var scanEnded = false
        /// Every target at or below this was sent (or skipped by the store's page).
        var sentThrough = chunk.progress
        var pending = PendingCursors()
        var batch = ProgressBatch()
        var tally = metrics.tally()
        var lastRecord = ContinuousClock.now
        var stopDeadline: ContinuousClock.Instant? = nil
        /// The client's ids of what this chunk submitted, to withdraw the unsent ones on a stop.
        var submittedIDs: [UInt64] = []

        while true {
            for completed in collector.drain() {
                let cursor = Int64(bitPattern: completed.tag)
                if stopDeadline != nil, completed.outcome.transportFailure == .cancelled {
                    // Withdrawn before it was sent: it stays pending, so progress stops before it
                    // and the next run sends it.
                    continue
                }
                pending.complete(cursor)
                let disposition = random.withLock { generator in
                    OutcomeDisposition.decide(
                        completed.outcome, token: completed.token, attempt: 1, request: request, policy: configuration.retryPolicy,
                        now: clock.now(), using: &generator)
                }
                batch.add(disposition, token: completed.token, at: clock.now())
                tally.add(completed.outcome, disposition: disposition, request: request, now: clock.now())
                logger.debug(
                    "device outcome",
                    metadata: ["push.request_id": "\(request.id)", "push.device": "\(completed.token.hex)", "apns.outcome": "\(completed.outcome)"])
            }

            if isStopping, stopDeadline == nil {
                stopDeadline = .now + configuration.shutdownGracePeriod
                // What is still queued in the client never reached APNs: take it back so that only
                // streams on the wire are waited for.
                let withdrawn = route.client.withdraw(submittedIDs)
                logger.debug("stopping: withdrew unsent notifications", metadata: ["push.withdrawn": "\(withdrawn)"])
            }
            if stopDeadline == nil {
                var room = configuration.maximumInFlight - collector.inFlight
                while room > 0 {
                    if buffered.isEmpty {
                        if scanEnded { break }
                        let page = try await store.targets(of: chunk, after: pageCursor, limit: configuration.pageSize)
                        buffered = page.targets[...]
                        pageCursor = page.scannedThrough
                        scanEnded = page.isEnd
                        if buffered.isEmpty {
                            sentThrough = pageCursor
                            continue
                        }
                    }
                    let count = min(room, buffered.count)
                    let slice = buffered.prefix(count)
                    buffered.removeFirst(count)
                    var requests: [APNsRequest] = []
                    requests.reserveCapacity(count)
                    for target in slice {
                        pending.append(target.cursor)
                        requests.append(
                            APNsRequest(notification: notification, deviceToken: target.token, tag: UInt64(bitPattern: target.cursor), receiver: collector))
                    }
                    collector.willSend(count)
                    submittedIDs.append(contentsOf: route.client.submit(requests))
                    sentThrough = buffered.isEmpty ? pageCursor : buffered.first!.cursor - 1
                    room -= count
                }
            }

            let allSent = buffered.isEmpty && scanEnded
            let inFlight = collector.inFlight
            let finished = stopDeadline == nil && allSent && inFlight == 0 && pending.isEmpty
            let stoppedWaiting = stopDeadline.map { inFlight == 0 || ContinuousClock.now >= $0 } ?? false
            let due = ContinuousClock.now - lastRecord >= configuration.progressInterval
            if finished || stoppedWaiting || batch.count >= configuration.progressBatch || (due && (batch.count > 0 || ContinuousClock.now - lastRecord >= leaseRenewalInterval)) {
                let through = pending.firstPending.map { $0 - 1 } ?? sentThrough
                let result = try await store.recordProgress(
                    batch.progress(for: chunk, through: through, completes: finished), owner: configuration.instanceID,
                    now: clock.now(), leaseDuration: configuration.leaseDuration)
                if case .leaseLost = result {} else { metrics.record(&tally) }
                batch = ProgressBatch()
                lastRecord = .now
                switch result {
                case .leaseLost:
                    logger.warning("lost the lease of a chunk; another instance resumes it", metadata: ["push.chunk": "\(chunk.id)"])
                    return
                case .chunkCompleted:
                    await logCompletion(of: request.id)
                    return
                case .recorded:
                    break
                }
                if finished || stoppedWaiting { return }
            }
            if collector.inFlight >= configuration.maximumInFlight || allSent || stopDeadline != nil {
                await collector.signal.wait(timeout: configuration.progressInterval)
            }
        }
    }

    private var leaseRenewalInterval: Duration { configuration.leaseDuration / 3 }

    private func failWholeChunk(_ chunk: WorkChunk, reason: String) async throws {
        var cursor = chunk.progress
        while true {
            let page = try await store.targets(of: chunk, after: cursor, limit: configuration.pageSize)
            var batch = ProgressBatch()
            for target in page.targets {
                batch.add(.failed(reason: reason, status: nil, invalidation: nil), token: target.token, at: clock.now())
            }
            cursor = page.scannedThrough
            _ = try await store.recordProgress(
                batch.progress(for: chunk, through: cursor, completes: page.isEnd), owner: configuration.instanceID, now: clock.now(),
                leaseDuration: configuration.leaseDuration)
            if page.isEnd { return }
        }
    }

    // MARK: Retries

    private func deliver(_ claims: [RetryClaim]) async throws {
        let collector = OutcomeCollector()
        var byTag: [UInt64: (RetryClaim, NotificationRequest)] = [:]
        var requestsByApp: [String: [APNsRequest]] = [:]
        var outcomes: [RetryOutcome] = []
        var tally = metrics.tally()
        for (index, claim) in claims.enumerated() {
            guard let (request, notification) = try await requestAndNotification(claim.requestID) else {
                outcomes.append(RetryOutcome(claim: claim, result: .failed(reason: "unknown_app", status: nil)))
                continue
            }
            byTag[UInt64(index)] = (claim, request)
            requestsByApp[request.app, default: []].append(
                APNsRequest(notification: notification, deviceToken: claim.token, tag: UInt64(index), receiver: collector))
        }
        let total = byTag.count
        collector.willSend(total)
        for (app, requests) in requestsByApp { routes[app]?.client.submit(requests) }
        var received = 0
        let deadline = ContinuousClock.now + .seconds(120)
        while received < total, ContinuousClock.now < deadline {
            for completed in collector.drain() {
                received += 1
                guard let (claim, request) = byTag[completed.tag] else { continue }
                let disposition = random.withLock { generator in
                    OutcomeDisposition.decide(
                        completed.outcome, token: claim.token, attempt: claim.attempt + 1, request: request,
                        policy: configuration.retryPolicy, now: clock.now(), using: &generator)
                }
                tally.add(completed.outcome, disposition: disposition, request: request, now: clock.now())
                switch disposition {
                case .accepted(let apnsID):
                    outcomes.append(RetryOutcome(claim: claim, result: .accepted(apnsID: apnsID)))
                case .failed(let reason, let status, let invalidation):
                    outcomes.append(RetryOutcome(claim: claim, result: .failed(reason: reason, status: status), invalidation: invalidation))
                case .retry(let at, let reason):
                    outcomes.append(RetryOutcome(claim: claim, result: .retry(nextAttemptAt: at, reason: reason)))
                }
            }
            if received < total { await collector.signal.wait(timeout: configuration.progressInterval) }
        }
        let result = try await store.recordRetryOutcomes(outcomes, owner: configuration.instanceID, now: clock.now())
        metrics.record(&tally)
        logger.debug("retries sent", metadata: ["push.retries": "\(claims.count)", "push.applied": "\(result.applied)"])
        for id in Set(claims.map(\.requestID)) { await logCompletion(of: id) }
    }

    // MARK: Reporting

    private let completionLogged = Mutex<Set<RequestID>>([])

    /// One info line per request when it is finished: targets, accepted, failed by reason, duration.
    private func logCompletion(of id: RequestID) async {
        guard let report = try? await store.report(id), report.state.isFinished else { return }
        let first = completionLogged.withLock { logged -> Bool in
            if logged.count > 10_000 { logged.removeAll() }
            return logged.insert(id).inserted
        }
        guard first else { return }
        let failed = report.failedByReason.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ",")
        let duration = (report.finishedAt ?? clock.now()).timeIntervalSince(report.createdAt)
        logger.info(
            "notification request \(report.state)",
            metadata: [
                "push.request_id": "\(id)", "push.app": "\(report.app)", "push.targets": "\(report.targets)",
                "push.accepted": "\(report.accepted)", "push.failed": "\(report.failed)", "push.failed_by_reason": "\(failed)",
                "push.duration_s": "\(String(format: "%.3f", duration))",
            ])
    }
}

/// The cursors sent and not yet answered, in send order: the lowest one bounds the progress that may
/// be recorded.
struct PendingCursors {
    private var order: [Int64] = []
    private var head = 0
    private var done: Set<Int64> = []

    mutating func append(_ cursor: Int64) { order.append(cursor) }

    mutating func complete(_ cursor: Int64) { done.insert(cursor) }

    var isEmpty: Bool {
        mutating get { advance(); return head == order.count }
    }

    var firstPending: Int64? {
        mutating get {
            advance()
            return head < order.count ? order[head] : nil
        }
    }

    private mutating func advance() {
        while head < order.count, done.remove(order[head]) != nil { head += 1 }
        if head > 4_096, head * 2 > order.count {
            order.removeFirst(head)
            head = 0
        }
    }
}

/// Outcomes gathered for one progress record.
struct ProgressBatch {
    var accepted = 0
    var lastAPNsID: String?
    var retries: [RetryEntry] = []
    var failures: [FailureEntry] = []
    var invalidations: [DeviceInvalidation] = []
    private(set) var count = 0

    mutating func add(_ disposition: OutcomeDisposition, token: DeviceToken, at now: Date) {
        count += 1
        switch disposition {
        case .accepted(let apnsID):
            accepted += 1
            if let apnsID { lastAPNsID = apnsID }
        case .failed(let reason, let status, let invalidation):
            failures.append(FailureEntry(token: token, reason: reason, status: status, at: now))
            if let invalidation { invalidations.append(invalidation) }
        case .retry(let at, let reason):
            retries.append(RetryEntry(token: token, attempt: 1, nextAttemptAt: at, reason: reason))
        }
    }

    func progress(for chunk: WorkChunk, through: Int64, completes: Bool) -> ChunkProgress {
        ChunkProgress(
            chunk: chunk, through: through, accepted: accepted, lastAPNsID: lastAPNsID, retries: retries, failures: failures,
            invalidations: invalidations, completesChunk: completes)
    }
}
