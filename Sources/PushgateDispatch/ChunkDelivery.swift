import Foundation
import PushTransport
import PushgateCore
import Synchronization

/// The result of store work started in the background (a page read ahead, a progress record). The
/// dispatch loop picks it up the next time it looks, and keeps sending meanwhile.
final class BackgroundResult<Value: Sendable>: Sendable {
    private let slot = Mutex<Result<Value, any Error>?>(nil)

    /// Starts `work` in `group`; when it ends, its result waits here and `signal` wakes the loop.
    init(in group: inout DiscardingTaskGroup, signal: WakeSignal, _ work: @escaping @Sendable () async throws -> Value)
    {
        group.addTask { [self] in
            let result: Result<Value, any Error>
            do { result = .success(try await work()) } catch { result = .failure(error) }
            self.slot.withLock { $0 = result }
            signal.signal()
        }
    }

    /// The result once the work is done; nil while it runs.
    var result: Result<Value, any Error>? { slot.withLock { $0 } }
}

/// One chunk on its way out: its targets read a page ahead, sent within the dispatcher's in-flight
/// limit, its outcomes gathered and its progress recorded in the background while sending goes on.
///
/// Several can be under way at once: the next chunk is claimed and started as soon as every target of
/// the current one is sent, so the pipeline never drains at a chunk boundary. Used only by the dispatch
/// loop's task.
final class ChunkDelivery {
    let chunk: WorkChunk
    let request: NotificationRequest
    private let prepared: PreparedRequest
    private unowned let dispatcher: Dispatcher
    private let collector: OutcomeCollector

    /// Read but not yet sent, in cursor order, from `bufferedHead` on.
    private var buffered: [DeliveryTarget] = []
    private var bufferedHead = 0
    /// Where the next page read starts; every target at or below it has been read.
    private var pageCursor: Int64
    private var scanEnded = false
    private var pageRead: BackgroundResult<TargetPage>?
    /// Every target at or below this was sent (or skipped by the store's page).
    private var sentThrough: Int64
    private var order = SendOrder()
    /// Cursors the pages skipped (``TargetPage/skipped``) that no record has covered yet, ascending.
    private var skippedPending: [Int64] = []
    /// The service of each of `skippedPending` (``TargetPage/skippedPlatforms``), for the report's split.
    private var skippedPendingPlatforms: [PushPlatform] = []
    private var batch = ProgressBatch()
    private var tally: OutcomeTally
    /// When the lease was last taken or renewed: renewals are due from it.
    private var lastRecord: Date
    /// The progress record under way; records of one chunk are strictly one after another.
    private var recording: (ticket: RecordTicket, last: Bool, batch: ProgressBatch, tally: OutcomeTally)?
    /// The services' ids of what this chunk submitted, to withdraw the unsent ones on a stop.
    private var submitted: [SubmittedSends] = []
    private var stopDeadline: Date?
    /// Suspect answers the misconfiguration breaker has not decided yet: neither recorded nor counted as
    /// answered, so progress stops before them and a crash sends them again (``MisconfigurationBreaker``).
    private var deferred: [DeferredOutcome] = []
    /// The first send of each batch sent, by sequence, and when it was sent: its answer is a round trip
    /// for the dispatcher's ``InFlightWindow`` (one sample a batch: no clock read per send).
    private var timedSends: [UInt64: Date] = [:]
    private(set) var isDone = false
    /// Every target came in the first page read (a one-device request's chunk, say): nothing more to read.
    private(set) var fitsOnePage = false
    private var pagesAccepted = 0
    /// The store said this chunk's last record completed it (the request may be finished too).
    private(set) var completedChunk = false

    init(
        chunk: WorkChunk,
        prepared: PreparedRequest,
        dispatcher: Dispatcher,
        signal: WakeSignal
    ) {
        self.chunk = chunk
        self.request = prepared.request
        self.prepared = prepared
        self.dispatcher = dispatcher
        self.collector = OutcomeCollector(signal: signal)
        self.pageCursor = chunk.progress
        self.sentThrough = chunk.progress
        self.tally = dispatcher.metrics.tally()
        // From when the lease was taken, not from now: a chunk that waited before its start (handed over
        // by a submission, or after a failed start) has less of its lease left, and renews it sooner.
        self.lastRecord = min(
            dispatcher.clock.now(),
            chunk.leaseExpiresAt.addingTimeInterval(-dispatcher.configuration.leaseDuration.seconds)
        )
    }

    /// Every target has been handed to the client (none left to read or send).
    var isAllSent: Bool { scanEnded && pageRead == nil && bufferedHead == buffered.count }

    var inFlight: Int { collector.inFlight }

    private var configuration: Dispatcher.Configuration { dispatcher.configuration }

    /// Stop sending: take back what the client has not written yet, and wait for the rest at most
    /// `deadline`.
    func stop(deadline: Date) {
        guard stopDeadline == nil else { return }
        stopDeadline = deadline
        let withdrawn = submitted.withdraw()
        dispatcher.logger.debug("stopping: withdrew unsent notifications", metadata: ["push.withdrawn": "\(withdrawn)"])
    }

    /// Does whatever can be done now without waiting: picks up finished background work, gathers
    /// outcomes, sends up to `room` more, starts the next page read, and adds the next progress record to
    /// `records` (the loop writes a turn's records together). `isDone` turns true once the chunk is
    /// finished (its last record written, or its lease lost).
    func advance(
        room: inout Int,
        budget: Int,
        window: inout InFlightWindow,
        records: inout ProgressRecords,
        group: inout DiscardingTaskGroup,
        signal: WakeSignal
    ) {
        guard !isDone else { return }
        collectBackgroundWork()
        if isDone { return }
        gatherOutcomes(window: &window, capacity: budget)
        resolveDeferred()
        if stopDeadline == nil {
            send(room: &room)
            readAhead(keeping: budget, group: &group, signal: signal)
        }
        startRecordIfDue(records: &records)
    }

    /// A store error is counted and backed off; a failed read is read again, and the outcomes of a
    /// failed record go back into the next record, so none is lost.
    private func collectBackgroundWork() {
        let health = dispatcher.storeHealth
        if let read = pageRead, let result = read.result {
            pageRead = nil
            switch result {
            case .success(let page):
                health.succeeded()
                accept(page)
            case .failure(let error):
                health.failed(.readTargets, error)
            }
        }
        if let (ticket, last, recordedBatch, recordedTally) = recording, let result = ticket.result {
            recording = nil
            let outcome: ProgressResult
            switch result {
            case .success(let value):
                health.succeeded()
                outcome = value
            case .failure(let error):
                health.failed(.recordProgress, error)
                batch.prepend(recordedBatch)
                tally.merge(recordedTally)
                if let stopDeadline, dispatcher.clock.now() >= stopDeadline {
                    // Stopping and the store still fails: the next run sends these devices again.
                    isDone = true
                }
                return
            }
            if outcome != .leaseLost {
                // Counted only once the ledger holds them, so metrics never run ahead of the ledger.
                var counted = recordedTally
                dispatcher.metrics.record(&counted)
            }
            switch outcome {
            case .leaseLost:
                dispatcher.logger.warning(
                    "lost the lease of a chunk; another instance resumes it",
                    metadata: ["push.chunk": "\(chunk.id)"]
                )
                isDone = true
            case .chunkCompleted:
                completedChunk = true
                isDone = true
            case .recorded:
                if last { isDone = true }
            }
        }
    }

    /// Appends a page of targets to what waits to be sent.
    func accept(_ page: TargetPage) {
        pagesAccepted += 1
        if pagesAccepted == 1 { fitsOnePage = page.isEnd }
        if bufferedHead == buffered.count {
            buffered.removeAll(keepingCapacity: true)
            bufferedHead = 0
            if page.targets.isEmpty { sentThrough = page.scannedThrough }
        } else if bufferedHead > 0 {
            buffered.removeFirst(bufferedHead)
            bufferedHead = 0
        }
        buffered.append(contentsOf: page.targets)
        skippedPending.append(contentsOf: page.skipped)
        skippedPendingPlatforms += page.skipped.indices.map {
            $0 < page.skippedPlatforms.count ? page.skippedPlatforms[$0] : .apns
        }
        pageCursor = page.scannedThrough
        scanEnded = page.isEnd
    }

    private func gatherOutcomes(window: inout InFlightWindow, capacity: Int) {
        let completed = collector.drain()
        guard !completed.isEmpty else { return }
        let now = dispatcher.clock.now()
        let stopping = stopDeadline != nil
        dispatcher.random.withLock { generator in
            for outcome in completed {
                if stopping, outcome.outcome.failure == .cancelled {
                    // Withdrawn before it was sent: it stays pending, so progress stops before it and
                    // the next run sends it.
                    continue
                }
                if !timedSends.isEmpty, let sentAt = timedSends.removeValue(forKey: outcome.tag) {
                    window.answered(
                        roundTrip: now.timeIntervalSince(sentAt),
                        service: outcome.token.platform,
                        now: now,
                        capacity: capacity
                    )
                }
                let disposition = OutcomeDisposition.decide(
                    outcome.outcome,
                    token: outcome.token,
                    attempt: 1,
                    request: request,
                    policy: configuration.retryPolicy,
                    now: now,
                    using: &generator
                )
                switch dispatcher.misconfiguration.judge(outcome.outcome, app: request.app, now: now) {
                case .proceed: settle(outcome, disposition, now: now)
                case .hold(let until):
                    settle(outcome, dispatcher.held(disposition, until: until, request: request, now: now), now: now)
                case .deferred(let ticket):
                    deferred.append(DeferredOutcome(completed: outcome, disposition: disposition, ticket: ticket))
                }
            }
        }
        if dispatcher.logger.logLevel <= .debug {
            for outcome in completed {
                dispatcher.logger.debug(
                    "device outcome",
                    metadata: [
                        "push.request_id": "\(request.id)", "push.device": "\(outcome.token)",
                        "push.outcome": "\(outcome.outcome)",
                    ]
                )
            }
        }
    }

    /// Records one answered device.
    private func settle(_ outcome: OutcomeCollector.Completed, _ disposition: OutcomeDisposition, now: Date) {
        order.complete(sequence: outcome.tag)
        batch.add(disposition, token: outcome.token, at: now)
        tally.add(outcome.outcome, disposition: disposition, request: request, now: now)
        dispatcher.raiseAlarmIfAny(outcome.outcome, request: request)
    }

    /// Records the deferred answers the breaker has decided since: genuine ones as usual, the others held.
    private func resolveDeferred() {
        guard !deferred.isEmpty else { return }
        let now = dispatcher.clock.now()
        var undecided: [DeferredOutcome] = []
        for item in deferred {
            switch dispatcher.misconfiguration.resolve(item.ticket, now: now) {
            case .proceed: settle(item.completed, item.disposition, now: now)
            case .hold(let until):
                let held = dispatcher.held(item.disposition, until: until, request: request, now: now)
                settle(item.completed, held, now: now)
            case .deferred: undecided.append(item)
            }
        }
        deferred = undecided
    }

    private func send(room: inout Int) {
        let available = buffered.count - bufferedHead
        let count = min(room, available)
        guard count > 0 else { return }
        var sends = RoutedSends(reservingCapacity: count)
        let now = dispatcher.clock.now()
        var timed = !configuration.holdsToInFlightWindow
        for index in bufferedHead..<(bufferedHead + count) {
            let target = buffered[index]
            let sequence = order.append(target.cursor)
            let admission = dispatcher.misconfiguration.admit(
                app: request.app,
                service: target.token.platform,
                now: now
            )
            if case .hold(let until) = admission {
                // A configuration alarm holds the app's sending on this service: the device waits in the ledger.
                order.complete(sequence: sequence)
                let waiting = OutcomeDisposition.retry(at: now, reason: MisconfigurationMonitor.heldReason)
                batch.add(
                    dispatcher.held(waiting, until: until, request: request, now: now),
                    token: target.token,
                    at: now
                )
                tally.addHeld(service: target.token.platform, request: request, now: now)
                continue
            }
            // A chunk read in one page (a one-device request's) goes by the transports' express lane.
            sends.add(target.token, tag: sequence, prepared: prepared, express: fitsOnePage)
            if !timed {
                timed = true
                timedSends[sequence] = now
            }
        }
        bufferedHead += count
        // Announced before they are submitted: an answer may come before `submit` returns.
        collector.willSend(sends.sendCount)
        let unsendableBefore = sends.unsendable.count
        submitted.merge(sends.submit(sentAt: now, to: collector))
        collector.willNotSend(sends.unsendable.count - unsendableBefore)
        sentThrough = bufferedHead == buffered.count ? pageCursor : buffered[bufferedHead].cursor - 1
        room -= sends.sendCount - (sends.unsendable.count - unsendableBefore)
        failUnsendable(sends.unsendable)
    }

    /// Devices that cannot be sent fail for good at once, recorded with the next progress.
    private func failUnsendable(_ unsendable: [UnsendablePush]) {
        guard !unsendable.isEmpty else { return }
        let now = dispatcher.clock.now()
        for device in unsendable {
            order.complete(sequence: device.send.tag)
            let disposition = dispatcher.failUnsendable(device, request: request, now: now, tally: &tally)
            batch.add(disposition, token: device.send.token, at: now)
        }
    }

    /// Reads ahead until a page and the in-flight budget's worth wait to be sent, so that sending never
    /// waits for the store and the budget can be filled at once when answers free it.
    private func readAhead(keeping budget: Int, group: inout DiscardingTaskGroup, signal: WakeSignal) {
        guard pageRead == nil, !scanEnded, buffered.count - bufferedHead < max(configuration.pageSize, budget),
            dispatcher.storeHealth.mayTry()
        else { return }
        let (store, chunk, cursor, limit) = (dispatcher.store, chunk, pageCursor, configuration.pageSize)
        pageRead = BackgroundResult(in: &group, signal: signal) {
            try await store.targets(of: chunk, after: cursor, limit: limit)
        }
    }

    private func startRecordIfDue(records: inout ProgressRecords) {
        guard recording == nil, dispatcher.storeHealth.mayTry() else { return }
        let inFlight = collector.inFlight
        let finished = stopDeadline == nil && isAllSent && inFlight == 0 && order.isEmpty
        let now = dispatcher.clock.now()
        let stoppedWaiting = stopDeadline.map { inFlight == 0 || now >= $0 } ?? false
        let sinceLast = now.timeIntervalSince(lastRecord)
        // The lease is renewed every third of it, even with nothing to record: well before half is gone.
        let due =
            sinceLast >= configuration.progressInterval.seconds
            && (batch.count > 0 || sinceLast >= configuration.leaseDuration.seconds / 3)
        guard finished || stoppedWaiting || batch.count >= configuration.progressBatch || due else { return }

        let through = order.firstPending.map { $0 - 1 } ?? sentThrough
        // Skipped targets go with the record whose progress first covers them: once and only once, as
        // a holder after a crash reads again from the recorded progress.
        let covered = finished ? skippedPending.count : skippedPending.prefix { $0 <= through }.count
        batch.skipped += covered
        batch.skippedByService += ServiceCounts(skippedPendingPlatforms.prefix(covered))
        skippedPendingPlatforms.removeFirst(covered)
        tally.addSkipped(covered, app: request.app)
        skippedPending.removeFirst(covered)
        let progress = batch.progress(for: chunk, through: through, completes: finished)
        let (recordedBatch, recordedTally) = (batch, tally)
        tally = dispatcher.metrics.tally()
        batch = ProgressBatch()
        lastRecord = now
        recording = (
            records.add(progress),
            finished || stoppedWaiting,
            recordedBatch,
            recordedTally
        )
    }
}

/// A suspect answer waiting for the misconfiguration breaker's decision.
struct DeferredOutcome: Sendable {
    var completed: OutcomeCollector.Completed
    /// What it would be recorded as if genuine.
    var disposition: OutcomeDisposition
    var ticket: MisconfigurationBreaker.Ticket
}

/// The targets sent and not yet answered, in send order. A target's send sequence number is its tag
/// in the client, so an answer finds its place without hashing; the oldest unanswered one bounds the
/// progress that may be recorded.
struct SendOrder {
    private var cursors: [Int64] = []
    private var answered: [Bool] = []
    /// Sequence number of `cursors[0]`.
    private var base: UInt64 = 0
    private var head = 0

    /// Appends a target's cursor; returns its sequence number.
    mutating func append(_ cursor: Int64) -> UInt64 {
        cursors.append(cursor)
        answered.append(false)
        return base + UInt64(cursors.count - 1)
    }

    mutating func complete(sequence: UInt64) {
        guard sequence >= base else { return }
        let index = Int(sequence - base)
        if index < answered.count { answered[index] = true }
    }

    var isEmpty: Bool {
        mutating get {
            advance()
            return head == cursors.count
        }
    }

    var firstPending: Int64? {
        mutating get {
            advance()
            return head < cursors.count ? cursors[head] : nil
        }
    }

    private mutating func advance() {
        while head < cursors.count, answered[head] { head += 1 }
        if head > 4_096, head * 2 > cursors.count {
            cursors.removeFirst(head)
            answered.removeFirst(head)
            base += UInt64(head)
            head = 0
        }
    }
}

/// Outcomes gathered for one progress record.
struct ProgressBatch {
    var accepted = 0
    /// Targets the pages skipped that this record covers (``ChunkProgress/skipped``).
    var skipped = 0
    /// `accepted` and `skipped` by service (``ChunkProgress/acceptedByService``).
    var acceptedByService = ServiceCounts.zero
    var skippedByService = ServiceCounts.zero
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
            acceptedByService[token.platform] += 1
            if let apnsID { lastAPNsID = apnsID }
        case .failed(let reason, let status, let invalidation):
            failures.append(FailureEntry(token: token, reason: reason, status: status, at: now))
            if let invalidation { invalidations.append(invalidation) }
        case .retry(let at, let reason):
            retries.append(RetryEntry(token: token, attempt: 1, nextAttemptAt: at, reason: reason))
        }
    }

    /// Puts `earlier` (a batch whose record failed) before this one.
    mutating func prepend(_ earlier: ProgressBatch) {
        accepted += earlier.accepted
        skipped += earlier.skipped
        acceptedByService += earlier.acceptedByService
        skippedByService += earlier.skippedByService
        lastAPNsID = lastAPNsID ?? earlier.lastAPNsID
        retries = earlier.retries + retries
        failures = earlier.failures + failures
        invalidations = earlier.invalidations + invalidations
        count += earlier.count
    }

    func progress(for chunk: WorkChunk, through: Int64, completes: Bool) -> ChunkProgress {
        ChunkProgress(
            chunk: chunk,
            through: through,
            accepted: accepted,
            lastAPNsID: lastAPNsID,
            retries: retries,
            failures: failures,
            invalidations: invalidations,
            completesChunk: completes,
            skipped: skipped,
            acceptedByService: acceptedByService,
            skippedByService: skippedByService
        )
    }
}
