import Logging
import NIOCore
import Synchronization

/// State shared by every connection of one running simulator: faults, device states, the
/// recorder, counters and the registry of live connections. Thread-safe: each part is a `Mutex`
/// or an `Atomic`.
final class SimulatorCore: Sendable {
    /// A live connection, reachable from other threads to apply settings or drop it.
    struct LiveConnection: Sendable {
        let eventLoop: any EventLoop
        let handler: NIOLoopBound<SimulatorConnectionHandler>
    }

    private struct FaultState: Sendable {
        var faults: SimulatorFaults
        var random: SplitMix64
    }

    let handling: NotificationHandling
    let validator: APNsRequestValidator
    let clock: any SimulatorClock
    let recorder: NotificationRecorder
    let devices: DeviceRegistry
    /// The legacy binary gateway and feedback ports' shared state.
    let legacy: LegacyGatewayCore
    let requiresClientCertificateAuthority: Bool
    let hasTokenKeys: Bool
    let defaultMaxConcurrentStreams: Int
    let sendsUniqueID: Bool
    let initialFaults: SimulatorFaults
    let logger: Logger

    private let faultState: Mutex<FaultState>
    /// Bumped on every fault change; connections re-read their cached faults when it moves.
    private let faultsGeneration = Atomic<Int>(0)
    private let connections = Mutex<[Int: LiveConnection]>([:])
    /// The common name of the client certificate each connection presented, by connection id (kept after
    /// the connection closes).
    private let clientCertificates = Mutex<[Int: String]>([:])
    private let nextConnectionID = Atomic<Int>(1)

    let connectionsOpened = Atomic<Int>(0)
    let connectionsActive = Atomic<Int>(0)
    let streams = StreamGauge()
    let goAwaysSent = Atomic<Int>(0)

    init(
        handling: NotificationHandling,
        tokenVerifier: ProviderTokenVerifier,
        clock: any SimulatorClock,
        recordLimit: Int,
        tracksDevices: Bool,
        hasClientCertificateAuthority: Bool,
        defaultMaxConcurrentStreams: Int,
        sendsUniqueID: Bool = true,
        faults: SimulatorFaults,
        seed: UInt64?,
        logger: Logger
    ) {
        self.handling = handling
        let devices = DeviceRegistry()
        self.devices = devices
        self.legacy = LegacyGatewayCore(
            devices: devices,
            clock: clock,
            recordLimit: recordLimit,
            requiresClientCertificate: hasClientCertificateAuthority,
            hasTokenKeys: !tokenVerifier.isEmpty,
            logger: logger
        )
        self.validator = APNsRequestValidator(tokenVerifier: tokenVerifier)
        self.clock = clock
        self.recorder = NotificationRecorder(recordLimit: recordLimit, tracksDevices: tracksDevices)
        self.requiresClientCertificateAuthority = hasClientCertificateAuthority
        self.hasTokenKeys = !tokenVerifier.isEmpty
        self.defaultMaxConcurrentStreams = defaultMaxConcurrentStreams
        self.sendsUniqueID = sendsUniqueID
        self.initialFaults = faults
        self.logger = logger
        self.faultState = Mutex(FaultState(faults: faults, random: seed.map(SplitMix64.init(seed:)) ?? SplitMix64()))
    }

    // MARK: Faults

    var faultsGenerationValue: Int {
        self.faultsGeneration.load(ordering: .acquiring)
    }

    var faults: SimulatorFaults {
        self.faultState.withLock { $0.faults }
    }

    func effectiveMaxConcurrentStreams(_ faults: SimulatorFaults) -> Int {
        faults.maxConcurrentStreams ?? self.defaultMaxConcurrentStreams
    }

    /// Replaces the faults; sends a new SETTINGS frame to every live connection when the
    /// effective `SETTINGS_MAX_CONCURRENT_STREAMS` changes; reseeds when `seed` is given.
    func setFaults(_ faults: SimulatorFaults, seed: UInt64? = nil) throws {
        let validated = try faults.validated()
        let previous: SimulatorFaults = self.faultState.withLock { state in
            let previous = state.faults
            state.faults = validated
            if let seed { state.random = SplitMix64(seed: seed) }
            return previous
        }
        self.faultsGeneration.add(1, ordering: .releasing)
        let newLimit = self.effectiveMaxConcurrentStreams(validated)
        if newLimit != self.effectiveMaxConcurrentStreams(previous) {
            self.forEachConnection { $0.applyMaxConcurrentStreams(newLimit) }
        }
        if previous.holdAnswers, !validated.holdAnswers {
            self.forEachConnection { $0.releaseHeldAnswers() }
        }
    }

    /// Draws the injected error for one request, if the error rates pick one.
    func drawInjectedFailure(_ faults: SimulatorFaults) -> SimulatedReason? {
        guard faults.hasErrorRates else { return nil }
        let draw = self.faultState.withLock { $0.random.nextUnit() }
        if draw < faults.rate429 { return .tooManyRequests }
        if draw < faults.rate429 + faults.rate500 { return .internalServerError }
        if draw < faults.rate429 + faults.rate500 + faults.rate503 { return .serviceUnavailable }
        return nil
    }

    // MARK: Connections

    func makeConnectionID() -> Int {
        self.nextConnectionID.wrappingAdd(1, ordering: .relaxed).oldValue
    }

    func recordClientCertificate(connectionID: Int, commonName: String) {
        clientCertificates.withLock { $0[connectionID] = commonName }
    }

    var clientCertificateNames: [Int: String] { clientCertificates.withLock { $0 } }

    func register(connectionID: Int, _ connection: LiveConnection) {
        self.connections.withLock { $0[connectionID] = connection }
        self.connectionsOpened.add(1, ordering: .relaxed)
        self.connectionsActive.add(1, ordering: .relaxed)
    }

    func unregister(connectionID: Int) {
        let removed = self.connections.withLock { $0.removeValue(forKey: connectionID) }
        if removed != nil { self.connectionsActive.subtract(1, ordering: .relaxed) }
    }

    /// Closes every live connection at once (no GOAWAY).
    func dropAllConnections() {
        self.forEachConnection { $0.dropNow() }
    }

    private func forEachConnection(_ body: @escaping @Sendable (SimulatorConnectionHandler) -> Void) {
        let live = self.connections.withLock { Array($0.values) }
        for connection in live {
            let handler = connection.handler
            connection.eventLoop.execute { body(handler.value) }
        }
    }

    // MARK: Stats and reset

    func stats() -> SimulatorStats {
        var stats = SimulatorStats()
        self.recorder.fill(&stats)
        stats.connectionsOpened = self.connectionsOpened.load(ordering: .relaxed)
        stats.connectionsActive = self.connectionsActive.load(ordering: .relaxed)
        let streams = self.streams.read()
        stats.currentStreams = streams.current
        stats.peakStreams = streams.peak
        stats.peakStreamsByConnection = streams.peakByConnection
        stats.goAwaysSent = self.goAwaysSent.load(ordering: .relaxed)
        return stats
    }

    /// Forgets records, counters, stream peaks and device states; restores the configured faults.
    /// Live connections stay open (`connectionsOpened` restarts from the live count).
    func reset() throws {
        self.recorder.reset()
        self.streams.resetPeaks()
        self.devices.removeAll()
        self.legacy.reset()
        self.goAwaysSent.store(0, ordering: .relaxed)
        self.connectionsOpened.store(self.connectionsActive.load(ordering: .relaxed), ordering: .relaxed)
        try self.setFaults(self.initialFaults)
    }
}
