public import Foundation

/// Tells a mistake of configuration from dead devices, per app and service, so that one wrong setting
/// cannot empty the registry.
///
/// A production token sent to the sandbox (or the reverse) makes APNs answer `BadDeviceToken` for every
/// device; a service account of another Firebase project makes FCM answer `SENDER_ID_MISMATCH` for every
/// device; a revoked APNs key makes APNs answer `InvalidProviderToken` to every request. Those answers are
/// *suspect*: each alone may be a dead device (or a passing fault), but most of an app's answers at once
/// mean its configuration is wrong.
///
/// - **The sample**: the last ``Configuration/minimumAnswers`` answers of the app on the service (accepted
///   or rejected; retryable answers and transport failures say nothing about the configuration and are not
///   counted). It *trips* when it is full, all of it lies within ``Configuration/window``, and more than
///   ``Configuration/share`` of it is suspect (by default: more than half of 100 answers within a minute).
/// - **Deferred**: a suspect answer is not acted on while it could still be part of a sample that trips:
///   until ``Configuration/minimumAnswers`` newer answers have come, or ``Configuration/window`` has passed
///   since it (``resolve(_:now:)``). If no trip happened meanwhile it was genuine (``Verdict/proceed``: the
///   device is invalidated or failed as usual); if one did, it is held. So no answer counted in a trip has
///   invalidated anything.
/// - **Tripped**: suspect answers are held (sent again later, never failed nor invalidated), and sending
///   to the app on that service is held (``admit(_:now:)``) until ``Configuration/probeAfter``. Then a
///   *probe* lets ``Configuration/probeAnswers`` notifications through: if more than ``Configuration/share``
///   of their answers are suspect, it trips again with the back-off doubled (up to
///   ``Configuration/probeLimit``); otherwise it clears. A restart starts from a clear state (the devices
///   held wait in the ledger and are judged afresh).
///
/// Pure: the time is an argument; it logs nothing and holds no I/O.
public struct MisconfigurationBreaker: Sendable {
    public struct Configuration: Sendable, Hashable {
        /// The longest span of the sample that may trip.
        public var window: Duration
        /// The sample's size: fewer answers than this within `window` never trip.
        public var minimumAnswers: Int
        /// Trips when more than this share of the sample is suspect (0 < share < 1).
        public var share: Double
        /// How long sending is held after a trip before the first probe.
        public var probeAfter: Duration
        /// The longest hold between probes (the back-off doubles from `probeAfter` up to this).
        public var probeLimit: Duration
        /// Notifications a probe lets through; their answers decide.
        public var probeAnswers: Int

        public init(
            window: Duration = .seconds(60),
            minimumAnswers: Int = 100,
            share: Double = 0.5,
            probeAfter: Duration = .seconds(30),
            probeLimit: Duration = .seconds(600),
            probeAnswers: Int = 10
        ) {
            self.window = window
            self.minimumAnswers = max(1, minimumAnswers)
            self.share = share
            self.probeAfter = probeAfter
            self.probeLimit = max(probeLimit, probeAfter)
            self.probeAnswers = max(1, probeAnswers)
        }
    }

    public struct Key: Hashable, Sendable, CustomStringConvertible {
        public var app: String
        public var service: PushPlatform

        public init(app: String, service: PushPlatform) {
            self.app = app
            self.service = service
        }

        public var description: String { "\(app)/\(service)" }
    }

    /// What a suspect answer suggests is wrong.
    public enum Suspicion: String, Hashable, Sendable, CaseIterable {
        /// `BadDeviceToken`, `BadCertificateEnvironment`: tokens of the other APNs environment.
        case environment
        /// `DeviceTokenNotForTopic`, `TopicDisallowed`: tokens of another app, or a topic the credentials may not use.
        case topic
        /// FCM `SENDER_ID_MISMATCH`: tokens of another Firebase project.
        case project
        /// APNs `InvalidProviderToken` from Apple: the provider token's key, key id or team id is refused
        /// (a revoked key, a key of another team). Every request carries the same token, so a storm of it
        /// is the configuration; the devices are held, not failed, until a probe finds it accepted.
        case credentials

        /// What an operator should check first.
        public var likelyCause: String {
            switch self {
            case .environment: "sandbox token sent to production (or the reverse)? check the app's environment"
            case .topic: "device tokens of another app, or a topic these credentials may not use? check the app's topic"
            case .project: "service account of another Firebase project? check the app's FCM service account"
            case .credentials: "APNs refuses the provider token? check the app's key (.p8), key id and team id"
            }
        }
    }

    /// An answer that says something about the configuration.
    public enum Answer: Hashable, Sendable {
        /// Accepted, or rejected for a reason that does not point at the configuration.
        case sane
        case suspect(Suspicion)
    }

    /// A deferred suspect answer, to be resolved later (``resolve(_:now:)``).
    public struct Ticket: Hashable, Sendable {
        public var key: Key
        /// The answer's place among the key's answers.
        public var sequence: UInt64
        public var answeredAt: Date
    }

    /// What becomes of a suspect answer.
    public enum Verdict: Hashable, Sendable {
        /// As if there were no breaker: a genuine answer (or a sane one).
        case proceed
        /// Not decided yet: keep it aside, neither recorded nor invalidated, and ask again.
        case deferred(Ticket)
        /// The device waits: sent again no earlier than this, never failed or invalidated for this answer.
        case hold(until: Date)
    }

    public enum Admission: Hashable, Sendable {
        case send
        /// Do not send now; the device waits until then.
        case hold(until: Date)
    }

    /// A configuration alarm: in force from ``since`` until a probe clears it.
    public struct Alarm: Hashable, Sendable {
        public var key: Key
        /// The suspicion most of the tripping sample shared.
        public var suspicion: Suspicion
        public var since: Date
        /// The next probe.
        public var probeAt: Date
        /// Suspect answers among the answers of the sample (or the probe) that tripped it.
        public var suspects: Int
        public var answers: Int
    }

    public enum Transition: Hashable, Sendable {
        /// The sample tripped: an alarm is raised.
        case tripped(Alarm)
        /// A probe's answers were still suspect: the alarm stays, the next probe is later.
        case probeFailed(Alarm)
        /// A probe's answers were sane: the alarm is over.
        case cleared(Key, since: Date)
    }

    public struct Decision: Hashable, Sendable {
        public var verdict: Verdict
        public var transition: Transition?

        public init(verdict: Verdict, transition: Transition?) {
            self.verdict = verdict
            self.transition = transition
        }
    }

    public let configuration: Configuration
    private var keys: [Key: KeyState] = [:]
    /// Keys with an alarm in force (read on every send: kept, not counted).
    private var trippedKeys = 0

    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
    }

    /// The alarms in force.
    public var alarms: [Alarm] {
        keys.values.compactMap { $0.tripped?.alarm }.sorted {
            ($0.key.app, $0.key.service) < ($1.key.app, $1.key.service)
        }
    }

    /// Whether any key is tripped (sending to it may be held).
    public var isHoldingAny: Bool { trippedKeys > 0 }

    // MARK: Events

    /// An answer of `key` at `now`. Sane answers always proceed; they count in the sample (and may trip it).
    public mutating func answered(_ key: Key, _ answer: Answer, now: Date) -> Decision {
        var state = keys[key, default: KeyState(capacity: configuration.minimumAnswers)]
        defer { keys[key] = state }
        let suspicion: Suspicion?
        switch answer {
        case .sane: suspicion = nil
        case .suspect(let kind): suspicion = kind
        }

        if var tripped = state.tripped {
            // Answers of notifications sent before the trip, or a probe's.
            var transition: Transition? = nil
            if var probe = tripped.probe {
                if suspicion != nil { probe.suspects += 1 } else { probe.sane += 1 }
                tripped.probe = probe
                state.tripped = tripped
                if probe.sane + probe.suspects >= configuration.probeAnswers {
                    transition = conclude(&state, key: key, now: now)
                }
            }
            guard suspicion != nil else { return Decision(verdict: .proceed, transition: transition) }
            return Decision(verdict: .hold(until: holdUntil(state, now: now)), transition: transition)
        }

        state.sequence += 1
        state.push(Entry(at: now, suspicion: suspicion))
        if trips(state, now: now) {
            let alarm = Alarm(
                key: key,
                suspicion: state.mostCommonSuspicion,
                since: now,
                probeAt: now.addingTimeInterval(configuration.probeAfter.timeInterval),
                suspects: state.suspects,
                answers: state.count
            )
            state.tripped = Tripped(alarm: alarm, backoff: configuration.probeAfter)
            state.lastTripSequence = state.sequence
            trippedKeys += 1
            let verdict: Verdict = suspicion == nil ? .proceed : .hold(until: alarm.probeAt)
            return Decision(verdict: verdict, transition: .tripped(alarm))
        }
        guard suspicion != nil else { return Decision(verdict: .proceed, transition: nil) }
        return Decision(
            verdict: .deferred(Ticket(key: key, sequence: state.sequence, answeredAt: now)),
            transition: nil
        )
    }

    /// Asks again about a deferred answer.
    public func resolve(_ ticket: Ticket, now: Date) -> Verdict {
        guard let state = keys[ticket.key] else { return .proceed }
        if state.tripped != nil { return .hold(until: holdUntil(state, now: now)) }
        let reach = UInt64(configuration.minimumAnswers)
        if let trip = state.lastTripSequence, trip >= ticket.sequence, trip < ticket.sequence + reach {
            // Part of a sample that tripped, since cleared by a probe: sent again, and judged afresh.
            return .hold(until: now)
        }
        if state.sequence >= ticket.sequence + reach
            || now >= ticket.answeredAt.addingTimeInterval(configuration.window.timeInterval)
        {
            return .proceed
        }
        return .deferred(ticket)
    }

    /// Whether a notification to `key` may be sent now. While tripped, it waits for the probe; a probe
    /// lets ``Configuration/probeAnswers`` through per round.
    public mutating func admit(_ key: Key, now: Date) -> (admission: Admission, transition: Transition?) {
        guard var state = keys[key], var tripped = state.tripped else { return (.send, nil) }
        defer { keys[key] = state }
        guard var probe = tripped.probe else {
            guard now >= tripped.alarm.probeAt else { return (.hold(until: tripped.alarm.probeAt), nil) }
            tripped.probe = Probe(startedAt: now, admitted: 1)
            state.tripped = tripped
            return (.send, nil)
        }
        if probe.admitted < configuration.probeAnswers {
            probe.admitted += 1
            tripped.probe = probe
            state.tripped = tripped
            return (.send, nil)
        }
        guard now >= probe.startedAt.addingTimeInterval(configuration.window.timeInterval) else {
            return (.hold(until: holdUntil(state, now: now)), nil)
        }
        // The round is over and not all its answers came (lost, or not counted): decide on those that did.
        guard probe.sane + probe.suspects > 0 else {
            tripped.probe = Probe(startedAt: now, admitted: 1)
            state.tripped = tripped
            return (.send, nil)
        }
        let transition = conclude(&state, key: key, now: now)
        if let tripped = state.tripped { return (.hold(until: tripped.alarm.probeAt), transition) }
        return (.send, transition)
    }

    // MARK: Internals

    private struct Entry {
        var at: Date
        var suspicion: Suspicion?
    }

    private struct Probe {
        var startedAt: Date
        var admitted = 0
        var sane = 0
        var suspects = 0
    }

    private struct Tripped {
        var alarm: Alarm
        var backoff: Duration
        var probe: Probe? = nil
    }

    /// One key's sample (a ring of the last answers), its place in the sequence of answers, and its alarm.
    private struct KeyState {
        let capacity: Int
        private(set) var entries: [Entry] = []
        /// Where the next entry goes once the ring is full (the oldest entry's index then).
        private var next = 0
        private(set) var suspects = 0
        /// Answers counted while watching, ever.
        var sequence: UInt64 = 0
        var lastTripSequence: UInt64?
        var tripped: Tripped?

        init(capacity: Int) {
            self.capacity = capacity
            entries.reserveCapacity(min(capacity, 1_024))
        }

        var count: Int { entries.count }
        var oldest: Entry? { entries.count < capacity ? entries.first : entries[next] }

        mutating func push(_ entry: Entry) {
            if entry.suspicion != nil { suspects += 1 }
            if entries.count < capacity {
                entries.append(entry)
                return
            }
            if entries[next].suspicion != nil { suspects -= 1 }
            entries[next] = entry
            next = (next + 1) % capacity
        }

        mutating func clearSample() {
            entries.removeAll(keepingCapacity: true)
            next = 0
            suspects = 0
        }

        var mostCommonSuspicion: Suspicion {
            var counts: [Suspicion: Int] = [:]
            for entry in entries { if let suspicion = entry.suspicion { counts[suspicion, default: 0] += 1 } }
            return Suspicion.allCases.max { counts[$0, default: 0] < counts[$1, default: 0] } ?? .environment
        }
    }

    private func trips(_ state: KeyState, now: Date) -> Bool {
        guard state.count >= configuration.minimumAnswers, let oldest = state.oldest else { return false }
        guard oldest.at >= now.addingTimeInterval(-configuration.window.timeInterval) else { return false }
        return Double(state.suspects) > configuration.share * Double(state.count)
    }

    /// Where a held device waits: the next probe, or during a probe, a probe interval from now.
    private func holdUntil(_ state: KeyState, now: Date) -> Date {
        guard let tripped = state.tripped else { return now }
        if tripped.probe == nil { return max(tripped.alarm.probeAt, now) }
        return now.addingTimeInterval(configuration.probeAfter.timeInterval)
    }

    /// A probe's answers decide: trip again with a longer back-off, or clear.
    private mutating func conclude(_ state: inout KeyState, key: Key, now: Date) -> Transition {
        guard var tripped = state.tripped, let probe = tripped.probe else { preconditionFailure("no probe under way") }
        let answers = probe.sane + probe.suspects
        if Double(probe.suspects) > configuration.share * Double(answers) {
            tripped.backoff = min(tripped.backoff * 2, configuration.probeLimit)
            tripped.alarm.probeAt = now.addingTimeInterval(tripped.backoff.timeInterval)
            tripped.alarm.suspects = probe.suspects
            tripped.alarm.answers = answers
            tripped.probe = nil
            state.tripped = tripped
            return .probeFailed(tripped.alarm)
        }
        state.tripped = nil
        trippedKeys -= 1
        state.clearSample()
        return .cleared(key, since: tripped.alarm.since)
    }
}

extension Duration {
    fileprivate var timeInterval: TimeInterval {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
