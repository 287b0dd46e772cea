import APNsTransport
import Logging
import NIOCore
import NIOSSL
import NIOTLS
import PushTransport
import PushgateCore

/// What a legacy connection handler needs from its pool.
protocol LegacyConnectionDelegate: AnyObject, Sendable {
    /// The TLS handshake completed: the connection takes work.
    func connectionReady(_ id: Int)
    /// The connection takes no new work (error response, identifiers exhausted).
    func connectionRetiring(_ id: Int)
    /// The channel closed; `everReady` false means the connection attempt failed (TLS).
    func connectionClosed(_ id: Int, everReady: Bool, error: String?)
    /// Hands back `released` finished notifications and takes up to `maximum` new ones.
    func pull(connection id: Int, released: Int, maximum: Int) -> [LegacyPooledRequest]
    /// Notifications to send again on another connection (or fail, once their budget is spent).
    func resend(_ requests: [LegacyPooledRequest])
}

/// One connection to the legacy gateway, after TLS and the error-response decoder. Pulls work from the
/// pool in batches as large as its window allows, encodes a batch into one buffer and flushes it once;
/// carries out its window's decisions (`LegacyConnectionStateMachine`) on error responses, ticks and
/// close.
final class LegacyConnectionHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = LegacyErrorResponse
    typealias OutboundOut = ByteBuffer

    let connectionID: Int
    private let delegate: any LegacyConnectionDelegate
    private var window: LegacyConnectionStateMachine<LegacyPooledRequest>
    private let windowSize: Int
    private let tickInterval: TimeAmount
    private var logger: Logger
    private var context: ChannelHandlerContext?
    private var tickTask: RepeatedTask?
    private var ready = false
    private var retiring = false
    /// Asked to close (pool shutdown): take nothing new, close once the window is empty.
    private var closeRequested = false
    private var released = 0
    private var lastError: String?

    init(
        connectionID: Int,
        delegate: any LegacyConnectionDelegate,
        window: LegacyConnectionStateMachine<LegacyPooledRequest>,
        windowSize: Int,
        tickInterval: TimeAmount,
        logger: Logger
    ) {
        self.connectionID = connectionID
        self.delegate = delegate
        self.window = window
        self.windowSize = windowSize
        self.tickInterval = tickInterval
        self.logger = logger
        self.logger[metadataKey: "apns.connection_id"] = "\(connectionID)"
    }

    // MARK: Lifecycle

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        tickTask = context.eventLoop.scheduleRepeatedTask(initialDelay: tickInterval, delay: tickInterval) { _ in
            bound.value.tick()
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        tickTask?.cancel()
        tickTask = nil
        self.context = nil
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .handshakeCompleted? = event as? TLSUserEvent { handshakeCompleted() }
        context.fireUserInboundEventTriggered(event)
    }

    /// The connection is authenticated both ways and may carry notifications.
    func handshakeCompleted() {
        guard !ready else { return }
        ready = true
        delegate.connectionReady(connectionID)
    }

    func channelInactive(context: ChannelHandlerContext) {
        tickTask?.cancel()
        tickTask = nil
        retire()
        let unknown = window.connectionClosed()
        if !unknown.isEmpty {
            logger.info(
                "legacy connection lost without an error response; resending what was not confirmed",
                metadata: ["apns.legacy.resent": "\(unknown.count)", "apns.error": "\(lastError ?? "closed")"]
            )
            delegate.resend(unknown)
        }
        delegate.connectionClosed(connectionID, everReady: ready, error: lastError)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        lastError = TransportTLS.describe(error)
        logger.debug("legacy connection error", metadata: ["apns.error": "\(lastError ?? "")"])
        context.close(promise: nil)
    }

    // MARK: Error responses

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let response = unwrapInboundIn(data)
        let action = window.errorResponseReceived(status: response.status, identifier: response.identifier)
        retire()
        var metadata: Logger.Metadata = [
            "apns.legacy.status": "\(response.status)", "apns.legacy.identifier": "\(response.identifier)",
            "apns.legacy.delivered": "\(action.delivered.count)", "apns.legacy.resent": "\(action.resend.count)",
        ]
        if let failed = action.failed { metadata["push.device"] = "\(failed.request.request.deviceToken.shortened)" }
        if action.identifierUnknown {
            logger.warning(
                "legacy error response for an identifier no longer in the window (answered after the quiet time?); resending the window",
                metadata: metadata
            )
        } else if response.status == .shutdown {
            logger.info("legacy gateway shutting down", metadata: metadata)
        } else {
            logger.debug("legacy error response", metadata: metadata)
        }
        for request in action.delivered { request.complete(.legacyDelivered) }
        if let (request, status) = action.failed { request.complete(status.outcome) }
        if !action.resend.isEmpty { delegate.resend(action.resend) }
        // The gateway closes after its answer; do not wait for it.
        context.close(promise: nil)
    }

    // MARK: Sending

    /// The pool has queued work and this connection has room.
    func wake() {
        pullAndWrite()
    }

    /// Pool shutdown: write nothing new; close once everything written is confirmed.
    func closeGracefully() {
        closeRequested = true
        retire()
        if window.unconfirmedCount == 0 { context?.close(promise: nil) }
    }

    private func tick() {
        guard let context else { return }
        let delivered = window.tick(now: context.eventLoop.now)
        if !delivered.isEmpty {
            released += delivered.count
            for request in delivered { request.complete(.legacyDelivered) }
        }
        if closeRequested {
            if window.unconfirmedCount == 0 { context.close(promise: nil) }
            return
        }
        if released > 0 { pullAndWrite() }
    }

    private func pullAndWrite() {
        guard let context, ready, window.isOpen, !retiring else { return }
        let room = min(windowSize - window.unconfirmedCount, window.remainingIdentifiers)
        let releasing = released
        released = 0
        guard room > 0 else {
            if releasing > 0 { _ = delegate.pull(connection: connectionID, released: releasing, maximum: 0) }
            if window.remainingIdentifiers == 0 { retire() }
            return
        }
        let requests = delegate.pull(connection: connectionID, released: releasing, maximum: room)
        guard !requests.isEmpty else { return }

        var buffer = context.channel.allocator.buffer(capacity: requests.count * 320)
        var sendable: [LegacyPooledRequest] = []
        sendable.reserveCapacity(requests.count)
        var identifier = window.upcomingIdentifier
        for request in requests {
            let content = request.request.notification.content
            do {
                try LegacyNotificationEncoder.writeFrame(
                    identifier: identifier,
                    expiration: content.expiration,
                    // The frame format knows 10 and 5 only; 1 (power saving) is closest to 5.
                    priority: content.priority == .immediate ? .immediate : .conservePower,
                    token: request.request.deviceToken,
                    payload: content.payload,
                    into: &buffer
                )
                sendable.append(request)
                identifier &+= 1
            } catch {
                // The protocol cannot carry it: answered at once, as the gateway would have.
                released += 1
                request.complete(Self.outcome(for: error))
            }
        }
        guard !sendable.isEmpty else { return }
        let identifiers = window.willWrite(sendable)
        guard let last = identifiers.last else { return }
        let promise = context.eventLoop.makePromise(of: Void.self)
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        promise.futureResult.whenSuccess {
            let handler = bound.value
            guard let now = handler.context?.eventLoop.now else { return }
            handler.window.writeCompleted(through: last, at: now)
        }
        context.writeAndFlush(wrapOutboundOut(buffer), promise: promise)
    }

    private func retire() {
        // A connection that never became ready is reported as failed on close (with back-off), not retired.
        guard !retiring, ready else { return }
        retiring = true
        delegate.connectionRetiring(connectionID)
    }

    static func outcome(for error: LegacyEncodingError) -> APNsOutcome {
        APNsOutcome(outcomeClass: .rejected, status: error.apnsReason.status, reason: error.apnsReason)
    }
}
