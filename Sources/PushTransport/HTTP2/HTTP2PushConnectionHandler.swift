public import DequeModule
public import Logging
public import NIOCore
public import NIOHPACK
public import NIOHTTP2
import NIOSSL
public import NIOTLS
public import PushgateCore

/// The per-connection engine of every HTTP/2 push service: it speaks HTTP/2 itself over the TLS byte
/// stream (see ``HTTP2Wire`` for why not through `NIOHTTP2Handler`), with no child channel and no frame
/// value per stream. What a request and its answer are is the ``HTTP2PushExchange``'s.
///
/// Work is pulled from the pool in batches sized by the free streams; each request becomes a HEADERS
/// frame (the exchange's header block) and a DATA frame, appended to one outbound buffer that is written
/// and flushed once per batch, so TLS records are large. Answers arrive as frames keyed by stream id.
/// Decisions (stream accounting, GOAWAY, ping, idle) are the state machine's; this class carries them out.
///
/// It is not itself a channel handler: each service declares one (``HTTP2PushChannelHandler``), so that
/// NIO's calls enter code specialised for the service's exchange. Its methods are `@inlinable` for that.
/// This file holds the state and the lifecycle; `+Inbound` reads frames and answers, `+Outbound` writes.
public final class HTTP2PushConnectionHandler<Exchange: HTTP2PushExchange> {
    public typealias Request = Exchange.Request

    public struct Configuration {
        public var connection: HTTP2ConnectionStateMachine.Configuration
        /// How often deadlines, pings and idleness are checked.
        public var tickInterval: TimeAmount
        /// How long a written request waits for its answer at least, counted from when it was written,
        /// when its caller set no deadline of its own (nil: until the pool's deadline only). The pool's
        /// deadline runs from submission, so without this a request that waited in the queue would have
        /// little time left for its answer: on a busy host it gave up on answers that were merely late,
        /// for requests the service had accepted (issue #27).
        public var answerTimeout: TimeAmount?
        /// The C pushd's `-r`: at most this many new requests per second on this connection (nil: no limit).
        public var requestsPerSecond: Int?
        public var logger: Logger

        public init(
            connection: HTTP2ConnectionStateMachine.Configuration,
            tickInterval: TimeAmount = .milliseconds(100),
            answerTimeout: TimeAmount? = nil,
            requestsPerSecond: Int? = nil,
            logger: Logger
        ) {
            self.connection = connection
            self.tickInterval = tickInterval
            self.answerTimeout = answerTimeout
            self.requestsPerSecond = requestsPerSecond
            self.logger = logger
        }
    }

    /// A request written to a stream, and what has arrived of its answer so far: what every stream
    /// needs. It is read and changed in place (see ``InFlightStreams``); the rest is in ``StreamExtras``.
    public struct InFlight {
        public var request: Request
        public var answer: Exchange.Answer
        public var writtenAt: NIODeadline
        /// When the stream is given up unanswered (``Configuration/answerTimeout``).
        public var answerDeadline: NIODeadline
        /// Flow control: what the server lets us send on this stream.
        public var sendWindow: Int

        @inlinable
        public init(
            request: Request,
            answer: Exchange.Answer,
            writtenAt: NIODeadline,
            answerDeadline: NIODeadline,
            sendWindow: Int
        ) {
            self.request = request
            self.answer = answer
            self.writtenAt = writtenAt
            self.answerDeadline = answerDeadline
            self.sendWindow = sendWindow
        }
    }

    /// What only some streams have: the exchange's extra, an answer's body, DATA still waiting for
    /// window. Kept apart so that the common stream does not carry (and retain and release) them.
    public struct StreamExtras {
        public var extra: Exchange.Extra?
        public var body: ByteBuffer?
        /// The payload not sent yet.
        public var unsentPayload: ByteBuffer?

        @inlinable
        public init() {}
    }

    /// Our SETTINGS: no server push; answers' windows far above any push service's answer.
    public static var localSettings: [(HTTP2Wire.Setting, UInt32)] {
        [(.enablePush, 0), (.maxConcurrentStreams, 100), (.initialWindowSize, 1 << 20), (.maxHeaderListSize, 1 << 16)]
    }
    /// Added to the connection's receive window at start (RFC 9113: it starts at 65,535).
    public static var initialConnectionWindowIncrement: Int { (1 << 24) - HTTP2Wire.defaultInitialWindowSize }
    /// Write the outbound buffer out (unflushed) once it holds this much, so memory stays bounded.
    public static var outboundWriteThreshold: Int { 256 * 1024 }

    public let connectionID: Int
    public let delegate: any HTTP2PushConnectionDelegate<Request>
    public let configuration: Configuration
    public var exchange: Exchange
    public var machine: HTTP2ConnectionStateMachine
    public var inFlight = InFlightStreams<InFlight>()
    public var extras: [HTTP2StreamID: StreamExtras] = [:]
    public var releasedSinceLastPull = 0
    public var context: ChannelHandlerContext?
    public var tickTask: RepeatedTask?
    public var everReady = false
    public var prefaceSent = false
    public var lastError: String?
    public var logger: Logger

    // HTTP/2 state
    public var parser = HTTP2FrameParser()
    public var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
    public var encoder = HPACKRequestEncoder()
    /// Frames written since the last flush.
    public var outbound: ByteBuffer?
    /// Connection-level inbound flow control: consumed since our last WINDOW_UPDATE.
    public var windows = FlowControlWindows()
    /// Streams whose DATA waits for window, oldest first. New streams wait until it is empty.
    public var blockedStreams: Deque<HTTP2StreamID> = []

    /// `requestsPerSecond` as a token bucket (nil: no limit).
    public var rateLimiter: RateLimiter?
    public var rateWakeScheduled = false

    @inlinable
    public init(
        connectionID: Int,
        delegate: any HTTP2PushConnectionDelegate<Request>,
        exchange: Exchange,
        configuration: Configuration,
        now: NIODeadline
    ) {
        self.connectionID = connectionID
        self.delegate = delegate
        self.exchange = exchange
        self.configuration = configuration
        self.rateLimiter = configuration.requestsPerSecond.map(RateLimiter.init(rate:))
        self.machine = HTTP2ConnectionStateMachine(configuration: configuration.connection, now: now)
        self.logger = configuration.logger
        self.logger[metadataKey: Self.key("connection_id")] = "\(connectionID)"
    }

    /// A log metadata key with the exchange's prefix.
    @inlinable
    public static func key(_ name: String) -> String { Exchange.metadataPrefix + "." + name }

    // MARK: Lifecycle

    @inlinable
    public func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        let interval = configuration.tickInterval
        let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
        tickTask = context.eventLoop.scheduleRepeatedTask(initialDelay: interval, delay: interval) { _ in
            loopBound.value.tick()
        }
        let eventLoop = context.eventLoop
        exchange.attached { eventLoop.execute { loopBound.value.wake() } }
        if context.channel.isActive { sendPreface(context: context) }
    }

    @inlinable
    public func handlerRemoved(context: ChannelHandlerContext) {
        tickTask?.cancel()
        tickTask = nil
        self.context = nil
    }

    @inlinable
    public func channelActive(context: ChannelHandlerContext) {
        sendPreface(context: context)
        context.fireChannelActive()
    }

    /// RFC 9113 §3.4: the preface, our SETTINGS, and a larger connection window for answers. TLS
    /// holds the bytes until its handshake is done.
    @inlinable
    public func sendPreface(context: ChannelHandlerContext) {
        guard !prefaceSent else { return }
        prefaceSent = true
        var buffer = context.channel.allocator.buffer(capacity: 64)
        HTTP2Wire.writeClientPreface(
            settings: Self.localSettings,
            connectionWindowIncrement: Self.initialConnectionWindowIncrement,
            into: &buffer
        )
        context.writeAndFlush(NIOAny(buffer), promise: nil)
    }

    @inlinable
    public func channelInactive(context: ChannelHandlerContext) {
        tickTask?.cancel()
        tickTask = nil
        let wasReady = everReady
        _ = machine.channelClosed()
        let abandoned = inFlight.removeAll()
        extras.removeAll()
        blockedStreams.removeAll()
        outbound = nil
        if !abandoned.isEmpty {
            logger.debug(
                "connection closed with unanswered streams",
                metadata: [Self.key("streams"): "\(abandoned.count)"]
            )
        }
        // Written but unanswered: the service may or may not have processed them, so they go back to
        // the caller (as the exchange says) rather than being resent behind its back. (A request whose
        // DATA never left is no different: its HEADERS did.)
        for (_, entry) in abandoned { exchange.connectionLost(entry.request) }
        delegate.connectionClosed(connectionID, everReady: wasReady, error: lastError)
        context.fireChannelInactive()
    }

    public func errorCaught(context: ChannelHandlerContext, error: any Error) {
        lastError = TransportTLS.describe(error)
        logger.debug("connection error", metadata: [Self.key("error"): "\(lastError ?? "")"])
        context.close(promise: nil)
    }

    @inlinable
    public func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case let TLSUserEvent.handshakeCompleted(negotiatedProtocol) = event {
            // No ALPN is tolerated (HTTP/2 by prior knowledge, as some servers and proxies do); any
            // protocol other than h2 is not.
            if let negotiatedProtocol, negotiatedProtocol != "h2" {
                lastError = "server negotiated \(negotiatedProtocol) instead of h2"
                context.close(promise: nil)
                return
            }
        }
        context.fireUserInboundEventTriggered(event)
    }

    @inlinable
    public func retire(because reason: String) {
        logger.debug("retiring connection", metadata: [Self.key("reason"): "\(reason)"])
        delegate.connectionRetiring(connectionID)
        if machine.closeRequested() { flushAndClose() }
    }

    @inlinable
    public func flushAndClose() {
        guard let context else { return }
        flushOutbound(context: context)
        context.close(promise: nil)
    }

    // MARK: Timer

    @inlinable
    public func tick() {
        guard let context else { return }
        let now = context.eventLoop.now
        if !inFlight.isEmpty {
            let expiredIDs = inFlight.ids(where: { $0.answerDeadline <= now })
            if !expiredIDs.isEmpty {
                let expired = expiredIDs.compactMap { abandon($0) }
                logger.debug(
                    "answers not received in time; streams reset",
                    metadata: [Self.key("streams"): "\(expired.count)"]
                )
                // Free the streams in the pool's books before the callers hear about them.
                sendQueuedWork()
                flushOutbound(context: context)
                // Written: the service may have processed them, so the caller must not take this as
                // "not sent" (``PushTransportFailure/mayHaveReachedService``).
                for entry in expired { entry.request.fail(.answerTimeout) }
            }
        }
        switch machine.tick(now: now) {
        case .none:
            break
        case .sendPing:
            logger.trace("sending PING")
            HTTP2Wire.writePing(now.uptimeNanoseconds, acknowledging: false, into: &outboundBuffer)
            flushOutbound(context: context)
        case .closeIdle:
            logger.debug("closing idle connection")
            delegate.connectionRetiring(connectionID)
            flushAndClose()
        case .closePingTimedOut:
            logger.debug("PING not answered in time; closing")
            lastError = everReady ? "ping timeout" : "no SETTINGS from server"
            delegate.connectionRetiring(connectionID)
            context.close(promise: nil)
        }
    }
}
