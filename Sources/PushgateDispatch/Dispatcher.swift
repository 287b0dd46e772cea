public import APNsClient
public import PushTransport
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

    let store: any PushStore
    private let routes: [String: DeliveryRoute]
    let configuration: Configuration
    let clock: any WallClock
    let logger: Logger
    let metrics: DispatchMetrics
    /// Wakes the loop: new work, an outcome of a chunk under way, a page read or a record finished.
    private let wake = WakeSignal()
    /// Set when a request was added (here or by another instance): there may be chunks to claim.
    private let workAdded = Atomic<Bool>(true)
    private let stopping = Atomic<Bool>(false)
    /// Prepared notifications per request: a request is immutable, so its wire form is built once.
    private let prepared = Mutex<[RequestID: (NotificationRequest, PreparedNotification)]>([:])
    let random = Mutex(SystemRandomNumberGenerator())

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
        // Stored: from here on a failure to prepare it is the dispatcher's to report, not the caller's.
        _ = try? prepare(request)
        metrics.requestAccepted(app: request.app, targets: result.targetCount)
        workAdded.store(true, ordering: .releasing)
        logger.debug(
            "notification request queued",
            metadata: ["push.request_id": "\(result.id)", "push.targets": "\(result.targetCount)", "push.app": "\(request.app)"])
        wake.signal()
        return result
    }

    /// Wakes the dispatch loop when work was added elsewhere (another instance, through the store's
    /// notifications), instead of waiting for its idle interval.
    public func wakeUp() {
        workAdded.store(true, ordering: .releasing)
        wake.signal()
    }

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

    /// Chunks under way at once, at most: the one being sent and those whose last answers are still
    /// coming back. More would only spread the in-flight limit thinner.
    static let maximumActiveChunks = 3

    private func loop() async throws {
        var active: [ChunkDelivery] = []
        var failure: (any Error)?
        await withDiscardingTaskGroup { group in
            do {
                try await loop(active: &active, group: &group)
            } catch {
                failure = error
            }
            // Background reads and records end on their own; the group waits for them.
        }
        if let failure { throw failure }
    }

    private func loop(active: inout [ChunkDelivery], group: inout DiscardingTaskGroup) async throws {
        var lastExpiry = Date.distantPast
        var stopDeadline: ContinuousClock.Instant? = nil
        /// False once a claim found nothing, until new work is announced: no claim per loop turn.
        var mayHaveChunks = true
        while true {
            let newWork = workAdded.exchange(false, ordering: .acquiringAndReleasing)
            if newWork { mayHaveChunks = true }
            if isStopping, stopDeadline == nil {
                let deadline = ContinuousClock.now + configuration.shutdownGracePeriod
                stopDeadline = deadline
                for delivery in active { delivery.stop(deadline: deadline) }
            }
            if stopDeadline != nil, active.isEmpty { return }

            let now = clock.now()
            if stopDeadline == nil, !newWork, active.allSatisfy(\.isAllSent) {
                try await expireOverdueRequests(now: now, last: &lastExpiry)
            }

            // The next chunk starts as soon as everything of the current ones is sent.
            var claimed = false
            if stopDeadline == nil, active.isEmpty || (mayHaveChunks && active.count < Self.maximumActiveChunks && active.allSatisfy(\.isAllSent)) {
                mayHaveChunks = false
                if let chunk = try await store.claimChunk(
                    owner: configuration.instanceID, now: now, leaseDuration: configuration.leaseDuration,
                    chunkSize: configuration.chunkSize)
                {
                    claimed = true
                    mayHaveChunks = true
                    if let delivery = try await startDelivery(of: chunk) { active.append(delivery) }
                }
            }
            if active.isEmpty {
                if claimed { continue }
                if stopDeadline != nil { return }
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
                continue
            }

            var room = configuration.maximumInFlight - active.reduce(0) { $0 + $1.inFlight }
            for delivery in active {
                try delivery.advance(room: &room, group: &group, signal: wake)
            }
            for delivery in active where delivery.isDone && delivery.completedChunk {
                let id = delivery.request.id
                group.addTask { await self.logCompletion(of: id) }
            }
            active.removeAll(where: \.isDone)
            if claimed { continue }
            if active.isEmpty || (mayHaveChunks && active.allSatisfy(\.isAllSent) && active.count < Self.maximumActiveChunks && stopDeadline == nil) {
                continue
            }
            await wake.wait(timeout: configuration.progressInterval)
        }
    }

    /// Expires overdue requests, at most once a second. Called only while idle or waiting for answers,
    /// not between a new request and its first send.
    private func expireOverdueRequests(now: Date, last: inout Date) async throws {
        guard now.timeIntervalSince(last) >= 1 else { return }
        last = now
        for id in try await store.expireOverdue(now: now) {
            logger.info("notification request expired before every device was reached", metadata: ["push.request_id": "\(id)"])
            await logCompletion(of: id)
        }
    }

    /// Prepares a claimed chunk for delivery, or fails its targets at once when it cannot be sent (an
    /// app no longer configured).
    private func startDelivery(of chunk: WorkChunk) async throws -> ChunkDelivery? {
        guard let (request, notification) = try await requestAndNotification(chunk.requestID),
            let route = routes[request.app]
        else {
            try await failWholeChunk(chunk, reason: "unknown_app")
            return nil
        }
        if chunk.isTakeover {
            logger.info("taking over an unfinished chunk", metadata: ["push.request_id": "\(chunk.requestID)", "push.chunk": "\(chunk.id)"])
        }
        let delivery = ChunkDelivery(chunk: chunk, request: request, notification: notification, route: route, dispatcher: self, signal: wake)
        // The first page is read here rather than in the background: one hand-over less between a
        // request's arrival and its first send.
        delivery.accept(try await store.targets(of: chunk, after: chunk.progress, limit: configuration.pageSize))
        return delivery
    }

    private func requestAndNotification(_ id: RequestID) async throws -> (NotificationRequest, PreparedNotification)? {
        if let cached = prepared.withLock({ $0[id] }) { return cached }
        guard let request = try await store.request(id) else { return nil }
        guard routes[request.app] != nil else {
            logger.error("request for an app that is not configured", metadata: ["push.request_id": "\(id)", "push.app": "\(request.app)"])
            return nil
        }
        return try prepare(request)
    }

    /// Builds a request's wire form once and keeps it for the chunks and retries that follow. Done at
    /// intake too, so that the first chunk does not read back the request it was just given.
    @discardableResult
    private func prepare(_ request: NotificationRequest) throws -> (NotificationRequest, PreparedNotification)? {
        guard let route = routes[request.app] else { return nil }
        let content = try NotificationContent(
            topic: route.topic, pushType: request.pushType, priority: request.priority, expiration: request.expiration,
            collapseID: request.collapseID, payload: request.payload)
        let entry = (request, PreparedNotification(content))
        prepared.withLock { cache in
            if cache.count > 1_000 { cache.removeAll() }
            cache[request.id] = entry
        }
        return entry
    }

    // MARK: Chunks

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
