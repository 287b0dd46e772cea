public import Foundation
public import Logging
public import NIOCore
import NIOPosix
public import PushgateCore
public import ServiceLifecycle
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The pushd-compatible UDP ingress: the registration port (7734) and the notification port (7874) on
/// every address of the listen host.
///
/// Each datagram is parsed on its event loop (``RegistrationDatagram``, ``NotificationDatagram``);
/// one that does not parse is logged with its reason and counted, and nothing of it is applied.
/// Registrations are applied in batches: what arrives while one transaction is being written goes
/// into the next (up to ``Configuration/registrationBatchLimit``), and when too many wait
/// (``Configuration/pendingRegistrationLimit``) the sockets are not read, so the burst waits in the
/// kernel's receive buffer instead of being dropped. Notification requests go to the
/// ``NotificationIntake`` in arrival order, what was read together as one batch
/// (``NotificationIntake/submit(batch:)``: the dispatcher stores it in one transaction).
///
/// A `Service`: ``run()`` binds, serves until a graceful shutdown or cancellation, then stops reading,
/// applies what was already read, and returns. Nothing starts in `init`.
public final class UDPIngress: Service, Sendable {
    /// Where the listener is bound, once ``run()`` has bound it.
    public struct BoundAddresses: Hashable, Sendable {
        public var registration: [SocketAddress]
        public var notification: [SocketAddress]

        /// The registration port (the same on every address).
        public var registrationPort: Int { registration.first?.port ?? 0 }
        /// The notification port (the same on every address).
        public var notificationPort: Int { notification.first?.port ?? 0 }
    }

    public let configuration: Configuration
    private let registry: any DeviceRegistry
    private let intake: any NotificationIntake
    private let clock: any WallClock
    private let makeRequestID: @Sendable (Date) -> RequestID
    private let eventLoopGroup: any EventLoopGroup
    private let logger: Logger
    private let counters: UDPIngressCounters
    private let binding = BindingState()
    private let onBound: @Sendable (BoundAddresses) async -> Void
    /// Warnings (refused and rejected datagrams, store failures): one line per second and kind
    /// (`FailureStorm`), shared by every socket's handler and the writers.
    private let warnings: SharedFailureStorm<String>

    /// - Parameters:
    ///   - registry: where registrations are written (``DeviceRegistry/register(batch:)``, ``DeviceRegistry/unassign(app:token:group:)``).
    ///   - intake: where notification requests are submitted.
    ///   - clock: the receive time of each datagram (registration time, request `createdAt`).
    ///   - makeRequestID: the id of an accepted notification request, from its receive time.
    ///   - eventLoopGroup: where the sockets live; nil uses NIO's shared singleton group.
    ///   - onBound: called once the sockets are bound (for example to print the ports).
    public init(
        configuration: Configuration = .init(),
        registry: any DeviceRegistry,
        intake: any NotificationIntake,
        clock: any WallClock = SystemWallClock(),
        makeRequestID: @escaping @Sendable (Date) -> RequestID = { RequestID.generate(at: $0) },
        eventLoopGroup: (any EventLoopGroup)? = nil,
        observer: any UDPIngressObserver = NoOpUDPIngressObserver(),
        logger: Logger = Logger(label: "pushgate.udp"),
        onBound: @escaping @Sendable (BoundAddresses) async -> Void = { _ in }
    ) {
        self.configuration = configuration
        self.registry = registry
        self.intake = intake
        self.clock = clock
        self.makeRequestID = makeRequestID
        self.eventLoopGroup = eventLoopGroup ?? MultiThreadedEventLoopGroup.singleton
        self.logger = logger
        self.counters = UDPIngressCounters(observer: observer)
        self.onBound = onBound
        self.warnings = SharedFailureStorm(clock: clock)
    }

    /// The counters so far: datagrams received, applied and rejected by reason, per port.
    public var statistics: UDPIngressStatistics { counters.snapshot }

    /// Waits until ``run()`` has bound the sockets and returns where. Throws the start-up error if
    /// binding failed, or `CancellationError`.
    public func boundAddresses() async throws -> BoundAddresses {
        try await binding.wait()
    }

    public func run() async throws {
        let bound: BoundAddresses
        let channels: [any Channel]
        let registrations = IngressQueue<RegistrationCommand>(
            capacity: configuration.pendingRegistrationLimit,
            batchLimit: configuration.registrationBatchLimit
        )
        let notifications = IngressQueue<NotificationRequest>(
            capacity: configuration.pendingNotificationLimit,
            batchLimit: 64
        )
        do {
            try configuration.validate()
            let addresses = try ListenAddresses.resolve(configuration.host)
            (bound, channels) = try await bindAll(addresses, registrations: registrations, notifications: notifications)
        } catch {
            binding.fail(error)
            throw error
        }
        binding.succeed(bound)
        await onBound(bound)

        let stop = try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await self.applyRegistrations(from: registrations) }
            group.addTask { await self.submitNotifications(from: notifications) }
            let stop = await waitForStop(channels)
            logger.info("UDP ingress stopping: no more datagrams are read; applying the ones already read")
            registrations.finish()
            notifications.finish()
            try await group.waitForAll()
            return stop
        }
        binding.stopped()
        logger.info(
            "UDP ingress stopped",
            metadata: [
                "udp.registrations_applied": "\(statistics.registration.applied)",
                "udp.notifications_applied": "\(statistics.notification.applied)",
            ]
        )
        if case .socketClosed(let address) = stop {
            throw UDPIngressError.socketClosed(address)
        }
    }

    // MARK: - Binding

    private func bindAll(
        _ addresses: [SocketAddress],
        registrations: IngressQueue<RegistrationCommand>,
        notifications: IngressQueue<NotificationRequest>
    ) async throws -> (BoundAddresses, [any Channel]) {
        var channels: [any Channel] = []
        do {
            var registrationAddresses: [SocketAddress] = []
            var notificationAddresses: [SocketAddress] = []
            // With port 0 the first address picks the port and the others reuse it, so each port is the
            // same on every address.
            var registrationPort = configuration.registrationPort
            var notificationPort = configuration.notificationPort
            for address in addresses {
                let registration = try await bind(address, port: registrationPort, kind: .registration) {
                    self.makeRegistrationHandler(queue: registrations)
                }
                channels.append(registration)
                let registrationBound = registration.localAddress ?? address
                registrationPort = registrationBound.port ?? registrationPort
                registrationAddresses.append(registrationBound)

                let notification = try await bind(address, port: notificationPort, kind: .notification) {
                    self.makeNotificationHandler(queue: notifications)
                }
                channels.append(notification)
                let notificationBound = notification.localAddress ?? address
                notificationPort = notificationBound.port ?? notificationPort
                notificationAddresses.append(notificationBound)
            }
            return (BoundAddresses(registration: registrationAddresses, notification: notificationAddresses), channels)
        } catch {
            for channel in channels { try? await channel.close() }
            throw error
        }
    }

    private func bind(
        _ address: SocketAddress,
        port: Int,
        kind: UDPIngressPort,
        makeHandler: @escaping @Sendable () -> any ChannelHandler
    ) async throws -> any Channel {
        var target = address
        target.port = port
        let channel: any Channel
        do {
            var bootstrap = DatagramBootstrap(group: eventLoopGroup)
                .channelOption(
                    .socketOption(.so_rcvbuf),
                    value: SocketOptionValue(clamping: configuration.receiveBufferBytes)
                )
                .channelOption(
                    .recvAllocator,
                    value: FixedSizeRecvByteBufferAllocator(
                        capacity: configuration.maximumDatagramBytes * configuration.datagramsPerSystemCall
                    )
                )
                .channelOption(.maxMessagesPerRead, value: UInt(configuration.messagesPerRead))
            #if os(Linux)
            if configuration.datagramsPerSystemCall > 1 {
                bootstrap = bootstrap.channelOption(
                    .datagramVectorReadMessageCount,
                    value: configuration.datagramsPerSystemCall
                )
            }
            #endif
            channel =
                try await bootstrap
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(makeHandler())
                    }
                }
                .bind(to: target)
                .get()
        } catch {
            throw UDPIngressError.bindFailed("\(target)", detail: "\(error)")
        }
        let granted = await receiveBufferSize(of: channel)
        logger.info(
            "UDP \(kind) port listening",
            metadata: [
                UDPIngressMetadata.address: "\(channel.localAddress.map { "\($0)" } ?? "\(target)")",
                UDPIngressMetadata.receiveBuffer: "\(granted.map(String.init) ?? "unknown")",
                "udp.receive_buffer_requested": "\(configuration.receiveBufferBytes)",
            ]
        )
        return channel
    }

    /// Reads back the receive buffer the kernel granted. Linux caps `SO_RCVBUF` at `net.core.rmem_max`
    /// (and reports twice the granted size); a privileged process may go beyond with `SO_RCVBUFFORCE`.
    private func receiveBufferSize(of channel: any Channel) async -> Int? {
        let option = ChannelOptions.socketOption(.so_rcvbuf)
        var granted = try? await channel.getOption(option).get()
        #if os(Linux)
        // Linux reports twice what it granted (the doubling covers its bookkeeping overhead).
        if let current = granted, Int(current) < 2 * configuration.receiveBufferBytes {
            let force = ChannelOptions.Types.SocketOption(level: .socket, name: .init(rawValue: SO_RCVBUFFORCE))
            if (try? await channel.setOption(
                force,
                value: SocketOptionValue(clamping: configuration.receiveBufferBytes)
            )
            .get()) != nil {
                granted = try? await channel.getOption(option).get()
            }
        }
        #endif
        return granted.map { Int($0) }
    }

    private func makeRegistrationHandler(queue: IngressQueue<RegistrationCommand>) -> any ChannelHandler {
        DatagramIngressHandler<RegistrationCommand>(
            port: .registration,
            queue: queue,
            clock: clock,
            maximumDatagramBytes: configuration.maximumDatagramBytes,
            counters: counters,
            logger: logger,
            allowedSenders: configuration.allowedSenders,
            warnings: warnings,
            parse: { buffer, now throws(ValidationError) in try RegistrationDatagram.parse(buffer, receivedAt: now) },
            describe: { command in
                [
                    PushLogKey.app: "\(command.app)",
                    PushLogKey.device: "\(command.token.shortened)",
                    PushLogKey.group: "\(command.group)",
                    "udp.action": "\(command.isRemoval ? "unassign" : "register")",
                ]
            }
        )
    }

    private func makeNotificationHandler(queue: IngressQueue<NotificationRequest>) -> any ChannelHandler {
        let makeRequestID = self.makeRequestID
        return DatagramIngressHandler<NotificationRequest>(
            port: .notification,
            queue: queue,
            clock: clock,
            maximumDatagramBytes: configuration.maximumDatagramBytes,
            counters: counters,
            logger: logger,
            allowedSenders: configuration.allowedSenders,
            warnings: warnings,
            parse: { buffer, now throws(ValidationError) in
                try NotificationDatagram.parse(buffer, id: makeRequestID(now), receivedAt: now)
            },
            describe: { request in
                [
                    PushLogKey.requestID: "\(request.id)",
                    PushLogKey.app: "\(request.app)",
                    "push.groups": "\(request.groups.count)",
                    "push.devices": "\(request.devices.count)",
                    "push.push_type": "\(request.pushType)",
                    "push.payload_bytes": "\(request.payload.count)",
                ]
            }
        )
    }

    // MARK: - Stopping

    private enum StopReason: Sendable {
        case shutdown
        case socketClosed(String)
    }

    /// Returns on graceful shutdown, cancellation, or a socket that closed on its own; every socket is
    /// closed when it returns.
    private func waitForStop(_ channels: [any Channel]) async -> StopReason {
        await withTaskGroup(of: StopReason.self) { group in
            group.addTask {
                // Throws CancellationError when cancelled: stop the same way.
                try? await gracefulShutdown()
                return .shutdown
            }
            for channel in channels {
                let description = "\(channel.localAddress.map { "\($0)" } ?? "?")"
                group.addTask {
                    try? await channel.closeFuture.get()
                    return .socketClosed(description)
                }
            }
            let first = await group.next() ?? .shutdown
            group.cancelAll()
            // Closing every socket lets the close-watching children finish.
            for channel in channels { try? await channel.close() }
            while await group.next() != nil {}
            return first
        }
    }

    // MARK: - Applying

    private func applyRegistrations(from queue: IngressQueue<RegistrationCommand>) async {
        var run: [Registration] = []
        while let batch = await queue.nextBatch() {
            run.reserveCapacity(batch.count)
            for command in batch {
                switch command {
                case .register(let registration):
                    run.append(registration)
                case .unassign(let app, let token, let group):
                    // Keep arrival order: what was registered before the removal is written first.
                    await write(run, queue: queue)
                    run.removeAll(keepingCapacity: true)
                    await unassign(app: app, token: token, group: group)
                }
            }
            await write(run, queue: queue)
            run.removeAll(keepingCapacity: true)
        }
    }

    /// Writes the registrations. During a store outage it waits for the store (what arrives meanwhile
    /// waits in the queue, up to the outage limit, and is applied after them, in order).
    private func write(
        _ registrations: [Registration],
        queue registrationQueue: IngressQueue<RegistrationCommand>
    ) async {
        guard !registrations.isEmpty else { return }
        var waiting = await writeSeparatingOutage(registrations)
        guard !waiting.isEmpty else { return }
        // Every write failed with a transient error: the store is out, not one registration bad. Keep what
        // was read, read on into the outage buffer, and write everything once the store answers again.
        outageBegan(waiting: waiting.count, queue: registrationQueue)
        var generator = SystemRandomNumberGenerator()
        var attempt = 0
        while !waiting.isEmpty {
            attempt += 1
            do {
                try await Task.sleep(for: configuration.storeRetryBackoff.delay(forAttempt: attempt, using: &generator))
            } catch {
                break  // cancelled: the shutdown timeout ended the wait
            }
            waiting = await writeSeparatingOutage(waiting)
        }
        registrationQueue.outageEnded()
        if waiting.isEmpty {
            logger.info("The store answers again; the registrations read during its outage are applied")
        } else {
            for _ in waiting { counters.rejected(on: .registration, reason: UDPIngressRejection.storeOutageShutdown) }
            logger.error(
                "Registrations read during a store outage were not applied: the shutdown timeout ended the wait",
                metadata: [UDPIngressMetadata.count: "\(waiting.count)"]
            )
        }
    }

    /// Writes the batch; if it fails, one by one. Answers the registrations that failed with a transient
    /// error when none of the batch could be written (an outage, to wait out); when some could, the ones
    /// that failed are tried once more alone, and those that fail again are rejected (counted and logged),
    /// as one bad registration must not cost the others.
    private func writeSeparatingOutage(_ registrations: [Registration]) async -> [Registration] {
        let start = ContinuousClock.now
        do {
            _ = try await registry.register(batch: registrations)
            let duration = ContinuousClock.now - start
            counters.registrationBatchWritten(count: registrations.count, duration: duration)
            counters.applied(on: .registration, count: registrations.count)
            logger.debug(
                "Registrations written",
                metadata: [UDPIngressMetadata.count: "\(registrations.count)", "udp.duration": "\(duration)"]
            )
            return []
        } catch {
            if registrations.count > 1 {
                logStoreFailure(
                    "Registration batch failed; applying its registrations one at a time",
                    kind: "registration-batch",
                    metadata: [
                        UDPIngressMetadata.count: "\(registrations.count)", UDPIngressMetadata.error: "\(error)",
                    ]
                )
            }
        }
        let first = await writeOneByOne(registrations)
        if first.failed.isEmpty { return [] }
        if first.written == 0 { return first.failed.map(\.0) }
        // Some were written, some failed with a transient error: one bad registration, or an outage that
        // ended (or began) during the pass. Those that failed get one more try on their own: after an
        // outage that ended they go through; what fails again beside writes that went through is rejected.
        let second = await writeOneByOne(first.failed.map(\.0))
        for (registration, error) in second.failed { rejectRegistration(registration, error) }
        return []
    }

    /// Writes each registration alone; rejects those that fail for good, and answers how many were
    /// written and those that failed with a transient error.
    private func writeOneByOne(
        _ registrations: [Registration]
    ) async -> (written: Int, failed: [(Registration, any Error)]) {
        var written = 0
        var failed: [(Registration, any Error)] = []
        for registration in registrations {
            do {
                _ = try await registry.register(batch: [registration])
                counters.applied(on: .registration, count: 1)
                written += 1
            } catch {
                guard StoreFailureKind(classifying: error) == .transient else {
                    rejectRegistration(registration, error)
                    continue
                }
                failed.append((registration, error))
            }
        }
        return (written, failed)
    }

    private func rejectRegistration(_ registration: Registration, _ error: any Error) {
        storeRejected(
            error,
            port: .registration,
            metadata: [
                PushLogKey.app: "\(registration.app)",
                PushLogKey.device: "\(registration.token.shortened)",
                PushLogKey.group: "\(registration.group)",
            ]
        )
    }

    /// The outage began: read on, and keep up to the outage limit.
    private func outageBegan(waiting: Int, queue: IngressQueue<RegistrationCommand>) {
        logStoreFailure(
            "Store out: registrations wait for it and are applied when it answers again; the port is read on",
            kind: "registration-outage",
            metadata: [
                UDPIngressMetadata.count: "\(waiting)",
                "udp.outage_limit": "\(configuration.outageRegistrationLimit)",
            ]
        )
        queue.outageBegan(limit: configuration.outageRegistrationLimit)
    }

    private func unassign(app: String, token: DeviceToken, group: String) async {
        let metadata: Logger.Metadata = [
            PushLogKey.app: "\(app)", PushLogKey.device: "\(token.shortened)",
            PushLogKey.group: "\(group)",
        ]
        do {
            let wasMember = try await registry.unassign(app: app, token: token, group: group)
            counters.applied(on: .registration, count: 1)
            logger.debug("Device unassigned", metadata: metadata.merging(["udp.was_member": "\(wasMember)"]) { $1 })
        } catch {
            storeRejected(error, port: .registration, metadata: metadata)
        }
    }

    private func submitNotifications(from queue: IngressQueue<NotificationRequest>) async {
        while let batch = await queue.nextBatch() { await submit(batch, queue: queue) }
    }

    /// Submits what was read together as one batch (the intake may store it in one transaction), in
    /// arrival order. Requests that failed for a transient store error (`StoreFailureKind`) are submitted
    /// again, with back-off, until stored; meanwhile the sockets are not read. Gives up only when the
    /// ingress task is cancelled.
    private func submit(_ batch: [NotificationRequest], queue: IngressQueue<NotificationRequest>) async {
        var pending = batch
        var retries = 0
        var generator = SystemRandomNumberGenerator()
        defer { if retries > 0 { queue.storeRecovered() } }
        while true {
            let answers = await intake.submit(batch: pending)
            var failed: [(request: NotificationRequest, failure: any Error)] = []
            for (request, answer) in zip(pending, answers) {
                switch answer {
                case .success(let result):
                    counters.applied(on: .notification, count: 1)
                    // Built only when written: this runs for every request.
                    logger.debug(
                        "Notification request stored",
                        metadata: Self.metadata(of: request).merging(["push.targets": "\(result.targetCount)"]) { $1 }
                    )
                case .failure(let failure):
                    if retries > 0, (failure as? StoreError)?.code == .duplicateRequestID {
                        // An earlier attempt was stored, though its answer was lost.
                        counters.applied(on: .notification, count: 1)
                    } else if StoreFailureKind(classifying: failure) == .transient {
                        failed.append((request, failure))
                    } else {
                        storeRejected(failure, port: .notification, metadata: Self.metadata(of: request))
                    }
                }
            }
            guard let first = failed.first else { return }
            retries += 1
            if retries == 1 { queue.storeFailed() }
            logStoreFailure(
                "Store failed; the notification request will be retried, socket reads are held meanwhile",
                kind: "notification-retry",
                metadata: Self.metadata(of: first.request).merging(
                    [
                        UDPIngressMetadata.error: "\(first.failure)", "udp.retries": "\(retries)",
                        "udp.requests": "\(failed.count)",
                    ]
                ) { $1 }
            )
            do {
                try await Task.sleep(for: configuration.storeRetryBackoff.delay(forAttempt: retries, using: &generator))
            } catch {
                for (request, failure) in failed {
                    storeRejected(failure, port: .notification, metadata: Self.metadata(of: request))
                }
                return
            }
            pending = failed.map(\.request)
        }
    }

    private static func metadata(of request: NotificationRequest) -> Logger.Metadata {
        [
            PushLogKey.requestID: "\(request.id)", PushLogKey.app: "\(request.app)",
            "push.groups": "\(request.groups.count)", "push.devices": "\(request.devices.count)",
        ]
    }

    private func storeRejected(_ error: any Error, port: UDPIngressPort, metadata: Logger.Metadata) {
        var metadata = metadata
        metadata[UDPIngressMetadata.port] = "\(port)"
        let reason: String
        if let storeError = error as? StoreError {
            reason = storeError.code.rawValue
            metadata[UDPIngressMetadata.detail] = "\(storeError.message)"
        } else {
            reason = UDPIngressRejection.storeFailure
            metadata[UDPIngressMetadata.detail] = "\(error)"
        }
        metadata[UDPIngressMetadata.reason] = "\(reason)"
        counters.rejected(on: port, reason: reason)
        logStoreFailure("Datagram not applied", kind: "\(port)/\(reason)", metadata: metadata)
    }

    /// A warning about a store failure, at most one line per second per `kind`, with the count since the
    /// last line (`udp.repeated`); the metadata is the failure that writes the line.
    private func logStoreFailure(_ message: Logger.Message, kind: String, metadata: Logger.Metadata) {
        guard let count = warnings.record(kind) else { return }
        var metadata = metadata
        if count > 1 { metadata[UDPIngressMetadata.repeated] = "\(count)" }
        logger.warning(message, metadata: metadata)
    }
}

extension RegistrationCommand {
    var isRemoval: Bool {
        if case .unassign = self { return true }
        return false
    }
}

extension UDPIngressError {
    static func socketClosed(_ address: String) -> Self {
        .bindFailed(address, detail: "the socket closed unexpectedly")
    }
}

/// The one-shot "bound" signal behind ``UDPIngress/boundAddresses()``.
private final class BindingState: Sendable {
    private enum State {
        case waiting([Int: CheckedContinuation<UDPIngress.BoundAddresses, any Error>], nextID: Int)
        case bound(UDPIngress.BoundAddresses)
        case failed(any Error)
    }

    private let state = Mutex(State.waiting([:], nextID: 0))

    func wait() async throws -> UDPIngress.BoundAddresses {
        let id = Mutex<Int?>(nil)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let immediate: Result<UDPIngress.BoundAddresses, any Error>? = state.withLock { state in
                    switch state {
                    case .bound(let addresses): return .success(addresses)
                    case .failed(let error): return .failure(error)
                    case .waiting(var waiters, let nextID):
                        if Task.isCancelled { return .failure(CancellationError()) }
                        waiters[nextID] = continuation
                        id.withLock { $0 = nextID }
                        state = .waiting(waiters, nextID: nextID + 1)
                        return nil
                    }
                }
                if let immediate { continuation.resume(with: immediate) }
            }
        } onCancel: {
            guard let waiterID = id.withLock({ $0 }) else { return }
            let continuation = state.withLock { state -> CheckedContinuation<UDPIngress.BoundAddresses, any Error>? in
                guard case .waiting(var waiters, let nextID) = state else { return nil }
                let continuation = waiters.removeValue(forKey: waiterID)
                state = .waiting(waiters, nextID: nextID)
                return continuation
            }
            continuation?.resume(throwing: CancellationError())
        }
    }

    func succeed(_ addresses: UDPIngress.BoundAddresses) { settle(.bound(addresses)) }
    func fail(_ error: any Error) { settle(.failed(error)) }
    func stopped() { settle(.failed(CancellationError())) }

    private func settle(_ final: State) {
        let waiters = state.withLock { state -> [CheckedContinuation<UDPIngress.BoundAddresses, any Error>] in
            guard case .waiting(let waiters, _) = state else {
                if case .bound = state, case .failed = final { state = final }
                return []
            }
            state = final
            return Array(waiters.values)
        }
        for waiter in waiters {
            switch final {
            case .bound(let addresses): waiter.resume(returning: addresses)
            case .failed(let error): waiter.resume(throwing: error)
            case .waiting: break
            }
        }
    }
}
