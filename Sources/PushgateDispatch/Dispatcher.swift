import Foundation
public import Logging
public import PushTransport
public import PushgateCore
public import ServiceLifecycle
import Synchronization

/// Where an app's notifications go: its services (``PushService``), registered by the platform of the
/// devices each serves. The gateway registers each service an app is configured for in one line
/// (`APNsPushService(transport:topic:)`, `FCMPushService(transport:)`...); a device whose platform has no
/// service here fails (``OutcomeDisposition/notConfigured(_:)``) instead of waiting for one.
public struct DeliveryRoute: Sendable {
    /// In registration order, one per platform.
    public let services: [any PushService]

    public init(services: [any PushService]) {
        var seen = Set<PushPlatform>()
        for service in services {
            precondition(seen.insert(service.platform).inserted, "two services for \(service.platform)")
        }
        self.services = services
    }

    /// The service of `platform`'s devices; nil when the app has none.
    public func service(for platform: PushPlatform) -> (any PushService)? {
        services.first { $0.platform == platform }
    }
}

/// Turns the ledger's work into requests to the push services: claims chunks of a request's targets, streams
/// each device into its own service (``RoutedSends``, through ``PushService``) with one bounded in-flight budget, and
/// records outcomes in batches (progress,
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
        /// A cap on notifications sent but not yet answered (the crash-duplicate window). Nil: what
        /// the routes' transports can carry (``Dispatcher/inFlightBudget``).
        public var maximumInFlight: Int? = nil
        /// Hold a broadcast's sends to the ``InFlightWindow`` (round trips measured as answers come);
        /// `dispatch.inFlightWindow`. On by default: one-device requests sent during a broadcast do not
        /// wait behind the queue it would build at the server (docs/benchmarks.md, "Singles during a
        /// broadcast"). Off, the window stays lifted and the sends are exactly as before it.
        public var holdsToInFlightWindow = true
        /// Outcomes recorded per transaction, at most; and the longest they wait to be recorded.
        public var progressBatch: Int = 4_000
        public var progressInterval: Duration = .milliseconds(100)
        /// Group commit: at most this many requests stored, and chunks' progress records written, in one
        /// store transaction (those that arrived while the previous one was written); also the most
        /// chunks claimed with a batch of requests.
        public var intakeBatch: Int = 256
        /// Chunks under way at most. ``DispatchLoop`` allows three, counting the chunks whose targets all
        /// came in their first page (one-device requests, each a chunk of its own, claimed by a group
        /// commit) as one together: this bounds how many of those share the in-flight budget and the
        /// group-committed records.
        public var maximumChunksUnderWay: Int = 256
        public var leaseDuration: Duration = .seconds(60)
        /// When there is nothing to do and nobody wakes us, look again this often.
        public var idleInterval: Duration = .seconds(1)
        /// Retries claimed at a time.
        public var retryBatch: Int = 1_000
        public var retryPolicy: RetryPolicy = RetryPolicy()
        /// On shutdown, how long in-flight notifications may take to be answered.
        public var shutdownGracePeriod: Duration = .seconds(5)
        /// After a store operation fails, how long until the next one (doubling per failure, up to its
        /// limit). Store failures never end the dispatcher.
        public var storeBackoff = StoreBackoff()
        /// When most of an app's answers on a service say its devices are not for this configuration (wrong
        /// environment, topic or Firebase project), its devices are held instead of invalidated or failed
        /// (``MisconfigurationBreaker``). nil: off.
        public var misconfiguration: MisconfigurationBreaker.Configuration? = MisconfigurationBreaker.Configuration()

        public init(instanceID: InstanceID) {
            self.instanceID = instanceID
        }
    }

    let store: any PushStore
    let routes: [String: DeliveryRoute]
    let configuration: Configuration
    let clock: any WallClock
    let logger: Logger
    let metrics: DispatchMetrics
    /// Store failures at run time: counted, backed off, shown in readiness.
    let storeHealth: StoreHealth
    /// Wakes the loop: new work, an outcome of a chunk under way, a page read or a record finished.
    let wake = WakeSignal()
    /// Set when a request was added (here or by another instance): there may be chunks to claim.
    let workAdded = Atomic<Bool>(true)
    /// What the intake's group commits may claim with their enqueue (``DeliveryLedger/write(_:)``), and the
    /// chunks they claimed for the loop to start (``IntakeHandOff``). A stop closes it, then waits for the
    /// claims under way before it releases this instance's leases.
    let handOff = Mutex(IntakeHandOff())

    /// Whether a request submitted now may be claimed with its enqueue (the loop would claim, and has room).
    package var handOffIsOpen: Bool { handOff.withLock { $0.isOpen && $0.room > 0 } }

    let stopping = Atomic<Bool>(false)
    /// One retry batch at a time, in the background; its unanswered notifications count in the budget.
    let retryBatchUnderWay = Atomic<Bool>(false)
    let retriesInFlightCount = Atomic<Int>(0)
    /// Prepared notifications per request: a request is immutable, so its wire forms are built once.
    private let prepared = Mutex<[RequestID: PreparedRequest]>([:])
    /// Devices failed or held for their app's configuration (devices of a service the app has no
    /// credentials for, a service refusing the credentials): one warning per app and kind a minute, with a count.
    private let alarms: SharedFailureStorm<AlarmKey>
    /// Tells a wrong configuration from dead devices: answers are judged and sends admitted through it.
    let misconfiguration: MisconfigurationMonitor
    /// Retries whose last answer waits for the breaker's verdict (``UndecidedRetries``).
    let undecidedRetries = UndecidedRetries()
    let random = Mutex(SystemRandomNumberGenerator())
    /// Group commit of submitted requests (``submit(_:)``) and of chunks' progress records, together: the
    /// records that fall due while requests are being stored share the next requests' transaction and fsync.
    let ledgerWrites: GroupCommit<LedgerItem, LedgerAnswer>

    public init(
        store: any PushStore,
        routes: [String: DeliveryRoute],
        configuration: Configuration,
        clock: any WallClock = SystemWallClock(),
        logger: Logger = Logger(label: "pushgate.dispatch"),
        metrics: DispatchMetrics = .disabled
    ) {
        self.metrics = metrics
        self.store = store
        self.routes = routes
        self.configuration = configuration
        self.clock = clock
        self.logger = logger
        self.alarms = SharedFailureStorm(clock: clock, interval: 60)
        self.ledgerWrites = GroupCommit(maximumBatch: max(1, configuration.intakeBatch))
        self.misconfiguration = MisconfigurationMonitor(
            configuration: configuration.misconfiguration,
            logger: logger,
            factory: metrics.factory
        )
        self.storeHealth = StoreHealth(
            backoff: configuration.storeBackoff,
            clock: clock,
            logger: logger,
            factory: metrics.factory
        )
    }

    /// Notifications that may be sent and not yet answered: the sum of what the routes' services' transports
    /// can carry now (connections x streams; a transport shared by several apps once), within the configured
    /// cap. Read on every loop turn, so it follows the transports as their capacity changes.
    public var inFlightBudget: Int {
        var seen = Set<ObjectIdentifier>()
        var capacity = 0
        for route in routes.values {
            for service in route.services where seen.insert(service.transportID).inserted {
                capacity += service.inFlightCapacity
            }
        }
        return max(1, min(capacity, configuration.maximumInFlight ?? .max))
    }

    /// The dispatcher's half of readiness: false from a failed store operation until one succeeds.
    public var isStoreHealthy: Bool { storeHealth.isHealthy }

    /// The configuration alarms in force (``MisconfigurationBreaker``): `/readyz` names them.
    public var misconfigurationAlarms: [MisconfigurationBreaker.Alarm] { misconfiguration.alarms }

    // MARK: The loop

    public func run() async throws {
        await withGracefulShutdownHandler {
            await releaseOwnLeases()
            await loop()
        } onGracefulShutdown: {
            self.stopping.store(true, ordering: .relaxed)
            self.wake.signal()
        }
        // A submission claiming with its enqueue commits a lease of ours: it must be released below.
        stopping.store(true, ordering: .sequentiallyConsistent)
        handOff.withLock { $0.close() }
        while handOff.withLock({ $0.claimsUnderWay }) > 0 {
            await wake.wait(timeout: .milliseconds(10))
        }
        // Whatever is unfinished is claimable at once by the next start (or another instance).
        _ = try? await store.releaseLeases(owner: configuration.instanceID, now: clock.now())
        logger.info("dispatcher stopped")
    }

    /// What a previous run of this instance held becomes claimable at once. Retried until the store
    /// answers (or the dispatcher stops).
    private func releaseOwnLeases() async {
        while !isStopping {
            if let released = await storeHealth.attempt(
                .releaseLeases,
                {
                    try await store.releaseLeases(owner: configuration.instanceID, now: clock.now())
                }
            ) {
                if released > 0 {
                    logger.info(
                        "resuming work left by the previous run",
                        metadata: ["push.leases_released": "\(released)"]
                    )
                }
                return
            }
            await waitForStore(atMost: configuration.storeBackoff.limit)
        }
    }

    /// Waits for a signal, at most `timeout` and at most until the store back-off ends.
    private func waitForStore(atMost timeout: Duration) async {
        var timeout = timeout
        if let retryAt = storeHealth.retryAt {
            let seconds = max(0, retryAt.timeIntervalSince(clock.now()))
            timeout = min(timeout, .milliseconds(Int64(seconds * 1000) + 1))
        }
        await wake.wait(timeout: timeout)
    }

    var isStopping: Bool { stopping.load(ordering: .relaxed) || Task.isCancelled }

    private func loop() async {
        var active: [ChunkDelivery] = []
        await withDiscardingTaskGroup { group in
            await loop(active: &active, group: &group)
            // Background reads and records end on their own; the group waits for them.
        }
    }

    /// Performs what ``DispatchLoop`` decides. Store errors never leave this loop: each failed
    /// operation is counted and backed off (``StoreHealth``), and what it was for is done again once
    /// the store answers.
    private func loop(active: inout [ChunkDelivery], group: inout DiscardingTaskGroup) async {
        var machine = DispatchLoop(
            idleInterval: configuration.idleInterval,
            progressInterval: configuration.progressInterval
        )
        /// Claimed chunks not started yet (still leased to us): handed over by a submission, with their first
        /// page, or claimed here and their start failed on a store error.
        var unstarted: [ClaimedChunk] = []
        /// How many broadcast sends may be unanswered (``InFlightWindow``). One for all apps, its limit on
        /// all their sends together: windows of their own, an app that started while another's queue was
        /// already built would take that queue's round trip for the path's and never shrink, while the first
        /// shrank to its minimum (twoapps: one app 95 s, the other not done in 300 s).
        var window = InFlightWindow()
        while true {
            if workAdded.exchange(false, ordering: .acquiringAndReleasing) { machine.workAdded() }
            let (handed, submissionsClaiming) = handOff.withLock { ($0.takeHanded(), $0.claimsUnderWay) }
            unstarted += handed.map { ClaimedChunk(chunk: $0.chunk, firstPage: $0.firstPage) }
            // Chunks read in one page count as one together when nothing else is under way, and not at all
            // beside a broadcast's chunks (so singles never hold up a broadcast's next chunk, nor the next
            // single), up to ``Configuration/maximumChunksUnderWay`` in all: a stream of one-device requests
            // is many of those, and a broadcast's chunks keep the loop's limit of three.
            let fitOnePage = active.count(where: \.fitsOnePage)
            let large = active.count - fitOnePage
            let counted =
                active.count >= configuration.maximumChunksUnderWay
                ? active.count : (large > 0 ? large : min(fitOnePage, 1))
            let allSent = active.allSatisfy(\.isAllSent)
            // Open whenever the loop would claim new work (``DispatchLoop``: up to twice its limit), even
            // while a broadcast's chunk is still sending: a new request claims with its enqueue (the
            // scheduler puts a new request first).
            let mayClaim =
                active.isEmpty
                || (counted < 2 * machine.maximumActiveChunks && active.count < configuration.maximumChunksUnderWay)
            // Beside as many of a broadcast's chunks as may be under way, a claim takes new requests only. The
            // intake claims while claims of its own are under way and chunks wait to start: their chunks are
            // counted in the room (``IntakeHandOff``).
            handOff.withLock {
                $0.loopTurn(
                    mayClaim: mayClaim && !isStopping,
                    newRequestsOnly: large >= machine.maximumActiveChunks,
                    room: configuration.maximumChunksUnderWay - active.count - unstarted.count
                )
            }
            let snapshot = DispatchLoop.Snapshot(
                now: clock.now(),
                stopRequested: isStopping,
                active: counted,
                allSent: allSent,
                unstarted: unstarted.count,
                storeAvailable: storeHealth.mayTry(),
                storeRetryAt: storeHealth.retryAt
            )
            switch machine.next(snapshot) {
            case .beginStop:
                let deadline = snapshot.now.addingTimeInterval(configuration.shutdownGracePeriod.seconds)
                for delivery in active { delivery.stop(deadline: deadline) }
            case .stop:
                return
            case .expireOverdue:
                await expireOverdueRequests(now: snapshot.now)
            case .startUnstarted:
                // A batch per wake-up: after the first, the chunks whose first page holds all their targets
                // (one-device requests handed over by a group commit) start in the same turn. One whose
                // start fails goes back to the end of `unstarted`, so it is not tried again in this turn.
                let waiting = unstarted.count
                var taken = 0
                while taken < waiting, let claimed = unstarted.first,
                    taken == 0
                        || (claimed.firstPage?.isEnd == true && active.count < configuration.maximumChunksUnderWay)
                {
                    unstarted.removeFirst()
                    taken += 1
                    guard claimed.chunk.leaseExpiresAt > snapshot.now else {
                        // Its lease ran out while it waited: it is anyone's to take over now, ours included,
                        // through a claim (which renews the generation, so no one else's progress is disturbed).
                        workAdded.store(true, ordering: .releasing)
                        continue
                    }
                    await start(claimed, active: &active, unstarted: &unstarted)
                }
            case .claimChunk where submissionsClaiming > 0:
                // That submission's claim is the next one; it wakes the loop when it is done.
                machine.claimed(.nothing)
            case .claimChunk:
                // Many one-page chunks (one-device requests) in one transaction, up to the room under way.
                let claim = BatchClaim(
                    lease: LeaseWindow(
                        owner: configuration.instanceID,
                        now: snapshot.now,
                        duration: configuration.leaseDuration
                    ),
                    chunkSize: configuration.chunkSize,
                    pageLimit: configuration.pageSize,
                    maximumChunks: max(1, configuration.maximumChunksUnderWay - active.count),
                    // New work claimed beside the most of a broadcast's chunks (``DispatchLoop``'s rule of twice
                    // the limit) must not take the broadcast's next chunk in its place.
                    newRequestsOnly: active.count(where: { !$0.fitsOnePage }) >= machine.maximumActiveChunks
                )
                switch await storeHealth.attempt(.claimChunk, { try await store.claimChunks(claim) }) {
                case .none: machine.claimed(.failed)
                case .some(let claimed) where claimed.isEmpty: machine.claimed(.nothing)
                case .some(let claimed):
                    machine.claimed(.found)
                    for work in claimed {
                        await start(
                            ClaimedChunk(chunk: work.chunk, firstPage: work.firstPage),
                            active: &active,
                            unstarted: &unstarted
                        )
                    }
                }
                // The claim may have finished a broadcast whose chunks were all done (``finishUnreported``).
                logFinishUnreported(in: &group)
            case .claimRetries:
                machine.retriesClaimed(started: await startRetries(now: snapshot.now, group: &group))
            case .advance:
                let budget = inFlightBudget
                var room = budget - active.reduce(0) { $0 + $1.inFlight } - retriesInFlight
                var records = ProgressRecords()
                // Chunks read in one page (one-device requests) are offered room first: a single never waits
                // behind a broadcast's buffered page for the room its answers free. They may use all the
                // transports' room; broadcasts, all apps together, only the ``InFlightWindow``'s limit, so a
                // single never waits behind a queue the broadcast built at the server either.
                for delivery in active where delivery.fitsOnePage {
                    delivery.advance(
                        room: &room,
                        budget: budget,
                        window: &window,
                        records: &records,
                        group: &group,
                        signal: wake
                    )
                }
                var appInFlight: [String: Int] = [:]
                var wanting = Set<String>()
                for delivery in active where !delivery.fitsOnePage {
                    appInFlight[delivery.request.app, default: 0] += delivery.inFlight
                    if !delivery.isAllSent { wanting.insert(delivery.request.app) }
                }
                for delivery in active where !delivery.fitsOnePage {
                    let app = delivery.request.app
                    var windowRoom = min(
                        room,
                        window.room(for: app, inFlight: appInFlight, wanting: wanting, capacity: budget)
                    )
                    let offered = windowRoom
                    delivery.advance(
                        room: &windowRoom,
                        budget: budget,
                        window: &window,
                        records: &records,
                        group: &group,
                        signal: wake
                    )
                    let sent = max(0, offered - windowRoom)
                    room -= sent
                    appInFlight[app, default: 0] += sent
                }
                records.start(in: &group, dispatcher: self, signal: wake)
                // One task for the turn's completions, not one per chunk (one-device requests end many at once).
                let completed = active.filter { $0.isDone && $0.completedChunk }
                if !completed.isEmpty {
                    // A broadcast still unfinished may be finished by a claim later (``finishUnreported``).
                    let onePage = completed.filter(\.fitsOnePage).map(\.request.id)
                    let broadcasts = completed.filter { !$0.fitsOnePage }.map(\.request.id)
                    group.addTask {
                        await self.logCompletion(of: onePage)
                        await self.logCompletion(of: broadcasts, rememberingUnfinished: true)
                    }
                }
                forgetPrepared(active.filter { $0.isDone && $0.fitsOnePage }.map(\.request.id))
                active.removeAll(where: \.isDone)
            case .again:
                continue
            case .idle(var until):
                logFinishUnreported(in: &group)
                if storeHealth.mayTry(),
                    let next = await storeHealth.attempt(
                        .nextWakeUp,
                        { try await store.nextWakeUp(after: snapshot.now) }
                    ) ?? nil
                {
                    until = min(until, next)
                }
                await wake.wait(timeout: timeout(until: until))
            case .waitForAnswers(let until):
                await wake.wait(timeout: timeout(until: until))
            }
        }
    }

    /// From now until `date` on the dispatcher's clock (1 ms at least, rounded up).
    private func timeout(until date: Date) -> Duration {
        .milliseconds(Int64(max(0, date.timeIntervalSince(clock.now())) * 1000) + 1)
    }

    /// Expires overdue requests (``DispatchLoop`` decides when).
    private func expireOverdueRequests(now: Date) async {
        let expired = await storeHealth.attempt(.expireOverdue, { try await store.expireOverdue(now: now) })
        guard let expired else { return }
        for id in expired {
            logger.info(
                "notification request expired before every device was reached",
                metadata: ["push.request_id": "\(id)"]
            )
        }
        await logCompletion(of: expired)
    }

    /// A chunk leased to us, not started yet, and its first page if it was read with the claim.
    private struct ClaimedChunk {
        var chunk: WorkChunk
        var firstPage: TargetPage? = nil
    }

    /// Starts a claimed chunk; on a store error it waits in `unstarted` (still leased to us).
    private func start(
        _ claimed: ClaimedChunk,
        active: inout [ChunkDelivery],
        unstarted: inout [ClaimedChunk]
    ) async {
        do {
            if let delivery = try await startDelivery(of: claimed.chunk, firstPage: claimed.firstPage) {
                active.append(delivery)
            }
            storeHealth.succeeded()
        } catch {
            storeHealth.failed(.readRequest, error)
            unstarted.append(claimed)
        }
    }

    /// Prepares a claimed chunk for delivery, or fails its targets at once when it cannot be sent (an
    /// app no longer configured).
    private func startDelivery(of chunk: WorkChunk, firstPage: TargetPage?) async throws -> ChunkDelivery? {
        guard let prepared = try await preparedRequest(chunk.requestID), routes[prepared.request.app] != nil else {
            try await failWholeChunk(chunk, reason: "unknown_app")
            return nil
        }
        if chunk.isTakeover {
            logger.info(
                "taking over an unfinished chunk",
                metadata: ["push.request_id": "\(chunk.requestID)", "push.chunk": "\(chunk.id)"]
            )
        }
        let delivery = ChunkDelivery(
            chunk: chunk,
            prepared: prepared,
            dispatcher: self,
            signal: wake
        )
        if let firstPage {
            delivery.accept(firstPage)
            return delivery
        }
        // The first page is read here rather than in the background: one hand-over less between a
        // request's arrival and its first send.
        // On a store error the delivery reads it again itself, after the back-off.
        if let page = await storeHealth.attempt(
            .readTargets,
            {
                try await store.targets(of: chunk, after: chunk.progress, limit: configuration.pageSize)
            }
        ) {
            delivery.accept(page)
        }
        return delivery
    }

    func preparedRequest(_ id: RequestID) async throws -> PreparedRequest? {
        if let cached = prepared.withLock({ $0[id] }) { return cached }
        guard let request = try await store.request(id) else { return nil }
        guard routes[request.app] != nil else {
            logger.error(
                "request for an app that is not configured",
                metadata: ["push.request_id": "\(id)", "push.app": "\(request.app)"]
            )
            return nil
        }
        do {
            return try prepare(request)
        } catch {
            logger.error("stored request cannot be sent", metadata: ["push.request_id": "\(id)", "error": "\(error)"])
            return nil
        }
    }

    /// Builds a request's wire forms once, one per service of its app, and keeps them for the chunks and
    /// retries that follow. Done at intake too, so that the first chunk does not read back the request it
    /// was just given.
    @discardableResult
    func prepare(_ request: NotificationRequest) throws -> PreparedRequest? {
        guard let route = routes[request.app] else { return nil }
        let entry = try PreparedRequest(request, route: route, logger: logger)
        prepared.withLock { cache in
            if cache.count >= Self.preparedCapacity { cache.removeAll() }
            cache[request.id] = entry
        }
        return entry
    }

    /// Prepared requests kept at most. Under a backlog every request waiting for its first chunk is
    /// here (prepared at intake), so this is the backlog that is sent without reading requests back.
    static let preparedCapacity = 20_000

    /// Requests whose chunk read in one page (one-device requests) is done: most have no other chunk, so
    /// they leave the cache instead of pushing out the requests still waiting (a later chunk or retry
    /// of theirs reads the request again).
    private func forgetPrepared(_ ids: [RequestID]) {
        guard !ids.isEmpty else { return }
        prepared.withLock { cache in for id in ids { cache[id] = nil } }
    }

    /// A device failed for its app's configuration, not for itself: a warning, at most one per app and
    /// kind a minute (with how many devices since the last one), worded by its service; counted in the
    /// metrics by the tally.
    func raiseAlarm(_ key: AlarmKey, requestID: RequestID) {
        guard let count = alarms.record(key) else { return }
        let message: String
        if key.reason == OutcomeDisposition.notConfigured(key.service) {
            let name = key.service.rawValue.uppercased()
            message =
                "\(name) devices of an app without \(name) credentials fail; configure app.NAME.\(key.service.rawValue)"
        } else if let service = routes[key.app]?.service(for: key.service) {
            message = service.alarmMessage(reason: key.reason)
        } else {
            message = "the service refused the app's configuration; its devices are not pruned"
        }
        logger.warning(
            "\(message)",
            metadata: [
                "push.app": "\(key.app)", "push.request_id": "\(requestID)", "push.reason": "\(key.reason)",
                "push.devices": "\(count)",
            ]
        )
    }

    /// A device that cannot be sent (``RoutedSends``'s unsendable) fails for good: counted in `tally` as a
    /// failure and an alarm, and warned about.
    func failUnsendable(
        _ device: UnsendablePush,
        request: NotificationRequest,
        now: Date,
        tally: inout OutcomeTally
    ) -> OutcomeDisposition {
        let platform = device.send.token.platform
        tally.addUnsendable(service: platform, reason: device.reason, request: request, now: now)
        raiseAlarm(AlarmKey(app: request.app, service: platform, reason: device.reason), requestID: request.id)
        return .failed(reason: device.reason, status: nil, invalidation: nil)
    }

    /// An outcome that is an alarm of the app's configuration is warned about (it is counted by the tally).
    func raiseAlarmIfAny(_ outcome: PushOutcome, request: NotificationRequest) {
        guard outcome.isConfigurationAlarm else { return }
        let alarm = AlarmKey(app: request.app, service: outcome.service, reason: outcome.metricsReason)
        raiseAlarm(alarm, requestID: request.id)
    }

    // MARK: Chunks

    private func failWholeChunk(_ chunk: WorkChunk, reason: String) async throws {
        var cursor = chunk.progress
        while true {
            let page = try await store.targets(of: chunk, after: cursor, limit: configuration.pageSize)
            var batch = ProgressBatch()
            batch.skipped = page.skipped.count  // the record covers the whole page
            batch.skippedByService = page.skippedByService(first: page.skipped.count)
            for target in page.targets {
                batch.add(.failed(reason: reason, status: nil, invalidation: nil), token: target.token, at: clock.now())
            }
            cursor = page.scannedThrough
            _ = try await store.recordProgress(
                batch.progress(for: chunk, through: cursor, completes: page.isEnd),
                owner: configuration.instanceID,
                now: clock.now(),
                leaseDuration: configuration.leaseDuration
            )
            if page.isEnd { return }
        }
    }

    // MARK: Reporting

    private let completionLogged = Mutex<Set<RequestID>>([])
    /// Broadcasts a chunk of which completed while the request did not finish. A request is finished by
    /// the transaction that finds it complete: usually its last chunk's record, but a chunk cut of a full
    /// chunk size cannot tell that no target follows (``LedgerArithmetic/MemberScan``), so the request's cut
    /// is marked done by the next claim that looks for more, and when its chunks are all done by then, that
    /// claim finishes it (``ChunkBatchClaim``), with no record of ours to log it: its done line never came
    /// when its last chunk was answered before that claim (two apps' broadcasts taking turns). Looked at
    /// again after the loop's claims and when it idles (one read of all their reports); a request leaves
    /// once its report is finished or gone.
    private let finishUnreported = Mutex<Set<RequestID>>([])

    /// One info line per request of `ids` that is finished, their reports read together: targets,
    /// accepted, failed by reason, skipped (targets invalidated after the request was stored), duration.
    /// With `rememberingUnfinished`, those not finished are kept in ``finishUnreported`` to be looked at
    /// again (``logFinishUnreported(in:)``); a request found finished or gone leaves it.
    func logCompletion(of ids: [RequestID], rememberingUnfinished: Bool = false) async {
        guard !ids.isEmpty, let reports = try? await store.reports(ids) else { return }
        let unfinished = Set(reports.filter { !$0.state.isFinished }.map(\.id))
        finishUnreported.withLock { waiting in
            if rememberingUnfinished {
                waiting.subtract(ids)
                waiting.formUnion(unfinished)
            } else {
                waiting.subtract(ids.filter { !unfinished.contains($0) })
            }
        }
        for report in reports where report.state.isFinished { logCompletion(report) }
    }

    /// `duration` in seconds with three decimals (`12.034`), as `String(format: "%.3f")` writes it
    /// without Foundation's formatter: it is on every request's "done" line.
    static func seconds(_ duration: TimeInterval) -> String {
        let millis = Int64((max(0, duration) * 1000).rounded())
        let fraction = String(millis % 1000)
        return "\(millis / 1000)." + String(repeating: "0", count: 3 - fraction.count) + fraction
    }

    /// Reads again the reports of the requests in ``finishUnreported`` (in the background) and logs those
    /// that finished meanwhile.
    private func logFinishUnreported(in group: inout DiscardingTaskGroup) {
        let waiting = finishUnreported.withLock { Array($0) }
        guard !waiting.isEmpty else { return }
        group.addTask { await self.logCompletion(of: waiting, rememberingUnfinished: true) }
    }

    /// `apns=T/A/F/S,fcm=…,webpush=…` (targets/accepted/failed/skipped) for the services with targets.
    static func serviceSummary(_ split: ServiceSplit) -> String {
        let parts = PushPlatform.allCases.filter { split.targets[$0] > 0 }.map { platform in
            let counts = [split.targets, split.accepted, split.failed, split.skipped].map { String($0[platform]) }
            return "\(platform)=" + counts.joined(separator: "/")
        }
        return parts.isEmpty ? "none" : parts.joined(separator: ",")
    }

    private func logCompletion(_ report: DeliveryReport) {
        let id = report.id
        let first = completionLogged.withLock { logged -> Bool in
            if logged.count > 10_000 { logged.removeAll() }
            return logged.insert(id).inserted
        }
        guard first else { return }
        let failed = report.failedByReason.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(
            separator: ","
        )
        let duration = (report.finishedAt ?? clock.now()).timeIntervalSince(report.createdAt)
        logger.info(
            "notification request \(report.state)",
            metadata: [
                "push.request_id": "\(id)", "push.app": "\(report.app)", "push.targets": "\(report.targets)",
                "push.accepted": "\(report.accepted)", "push.failed": "\(report.failed)",
                "push.failed_by_reason": "\(failed)", "push.skipped": "\(report.skipped)",
                "push.by_service": "\(report.byService.map(Self.serviceSummary) ?? "none")",
                "push.duration_s": "\(Self.seconds(duration))",
            ]
        )
    }
}
