import DequeModule
import Foundation
import Logging
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOSSL
import NIOTLS
import PushTransport
import PushgateCore

/// What a connection handler needs from its pool. The pool implements it; tests can too.
protocol APNsConnectionDelegate: AnyObject, Sendable {
    /// The first SETTINGS arrived: the connection is usable.
    func connectionReady(_ id: Int, capacity: Int)
    func connectionCapacityChanged(_ id: Int, capacity: Int)
    /// The connection takes no new work (GOAWAY, connection-fatal answer, idle, ping timeout).
    func connectionRetiring(_ id: Int)
    /// The channel closed. `everReady` false means the connection attempt failed (TLS, protocol).
    func connectionClosed(_ id: Int, everReady: Bool, error: String?)
    /// Hands back `released` finished requests and takes up to `maximum` new ones.
    func pull(connection id: Int, released: Int, maximum: Int) -> [PooledRequest]
    /// Requests APNs never processed: queue them again (or fail them when their budget is spent).
    func requeue(_ requests: [PooledRequest], because failure: APNsTransportFailure)
    /// The bearer token for new requests (token auth), or nil for certificate connections.
    func providerToken() throws -> ProviderToken?
    func providerTokenRejectedAsExpired(_ token: ProviderToken)
    /// An answer arrived `roundTrip` after its request was written (for the latency histogram).
    func streamAnswered(roundTrip: TimeAmount)
}

/// The per-connection engine: it speaks HTTP/2 itself over the TLS byte stream (see ``HTTP2Wire`` for
/// why not through `NIOHTTP2Handler`), with no child channel and no frame value per stream.
///
/// Work is pulled from the pool in batches sized by the free streams; each request becomes a HEADERS
/// frame (its notification's shared header block, encoded once, plus `:path` and `authorization`) and a
/// DATA frame, appended to one outbound buffer that is written and flushed once per batch, so TLS
/// records are large. Answers arrive as frames keyed by stream id. Decisions (stream accounting,
/// GOAWAY, ping, idle) are the state machine's; this class carries them out.
///
/// This file holds the state and the lifecycle; `+Inbound` reads frames and answers, `+Outbound` writes.
final class APNsConnectionHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    struct Configuration {
        var connection: APNsConnectionStateMachine.Configuration
        /// `:authority`
        var authority: String
        /// How often deadlines, pings and idleness are checked.
        var tickInterval: TimeAmount = .milliseconds(100)
        /// The C pushd's `-r`: at most this many new requests per second on this connection (nil: no limit).
        var requestsPerSecond: Int? = nil
        var logger: Logger
    }

    /// A request written to a stream, and what has arrived of its answer so far: what every stream
    /// needs. It is read and changed in place (see ``InFlightStreams``); the rest is in ``StreamExtras``.
    struct InFlight {
        var request: PooledRequest
        var providerToken: ProviderToken?
        var writtenAt: NIODeadline
        var status: Int?
        var apnsID: String?
        /// Flow control: what the server lets us send on this stream.
        var sendWindow: Int
    }

    /// What only some streams have: an error answer's body, an `apns-unique-id` (development
    /// only), DATA still waiting for window. Kept apart so that the common stream does not carry
    /// (and retain and release) them.
    struct StreamExtras {
        var apnsUniqueID: String?
        var body: ByteBuffer?
        /// The payload not sent yet.
        var unsentPayload: ByteBuffer?
    }

    /// Our SETTINGS: no server push; answers' windows far above any APNs answer.
    static let localSettings: [(HTTP2Wire.Setting, UInt32)] = [
        (.enablePush, 0), (.maxConcurrentStreams, 100), (.initialWindowSize, 1 << 20), (.maxHeaderListSize, 1 << 16),
    ]
    /// Added to the connection's receive window at start (RFC 9113: it starts at 65,535).
    static let initialConnectionWindowIncrement = (1 << 24) - HTTP2Wire.defaultInitialWindowSize
    /// Write the outbound buffer out (unflushed) once it holds this much, so memory stays bounded.
    static let outboundWriteThreshold = 256 * 1024

    let connectionID: Int
    let delegate: any APNsConnectionDelegate
    let configuration: Configuration
    var machine: APNsConnectionStateMachine
    var inFlight = InFlightStreams<InFlight>()
    var extras: [HTTP2StreamID: StreamExtras] = [:]
    /// The last answer's `apns-id`, reused while answers repeat it (a stand-in that always answers the same id).
    var lastAnswerAPNsID: String?
    var releasedSinceLastPull = 0
    var context: ChannelHandlerContext?
    var tickTask: RepeatedTask?
    var everReady = false
    var prefaceSent = false
    var lastError: String?
    /// GOAWAY's debug data, when it carried an APNs reason (e.g. `BadCertificateEnvironment`).
    var goAwayReason: APNsReason?
    var logger: Logger

    // HTTP/2 state
    var parser = HTTP2FrameParser()
    var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
    var encoder = HPACKRequestEncoder()
    /// Frames written since the last flush.
    var outbound: ByteBuffer?
    /// Connection-level inbound flow control: consumed since our last WINDOW_UPDATE.
    var windows = FlowControlWindows()
    /// Streams whose DATA waits for window, oldest first. New streams wait until it is empty.
    var blockedStreams: Deque<HTTP2StreamID> = []
    /// The last notification's shared header block and the table generation it was encoded at.
    var sharedBlock: (notification: PreparedNotification, generation: UInt64, bytes: ByteBuffer)?
    /// The `authorization` literal of the current provider token (it changes hourly).
    var authorizationBlock: (token: ProviderToken, bytes: ByteBuffer)?

    /// `requestsPerSecond` as a token bucket (nil: no limit).
    var rateLimiter: RateLimiter?
    var rateWakeScheduled = false

    init(connectionID: Int, delegate: any APNsConnectionDelegate, configuration: Configuration, now: NIODeadline) {
        self.connectionID = connectionID
        self.delegate = delegate
        self.configuration = configuration
        self.rateLimiter = configuration.requestsPerSecond.map(RateLimiter.init(rate:))
        self.machine = APNsConnectionStateMachine(configuration: configuration.connection, now: now)
        self.logger = configuration.logger
        self.logger[metadataKey: "apns.connection_id"] = "\(connectionID)"
    }

    // MARK: Lifecycle

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        let interval = configuration.tickInterval
        let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
        tickTask = context.eventLoop.scheduleRepeatedTask(initialDelay: interval, delay: interval) { _ in
            loopBound.value.tick()
        }
        if context.channel.isActive { sendPreface(context: context) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        tickTask?.cancel()
        tickTask = nil
        self.context = nil
    }

    func channelActive(context: ChannelHandlerContext) {
        sendPreface(context: context)
        context.fireChannelActive()
    }

    /// RFC 9113 §3.4: the preface, our SETTINGS, and a larger connection window for answers. TLS
    /// holds the bytes until its handshake is done.
    func sendPreface(context: ChannelHandlerContext) {
        guard !prefaceSent else { return }
        prefaceSent = true
        var buffer = context.channel.allocator.buffer(capacity: 64)
        HTTP2Wire.writeClientPreface(
            settings: Self.localSettings,
            connectionWindowIncrement: Self.initialConnectionWindowIncrement,
            into: &buffer
        )
        context.writeAndFlush(wrapOutboundOut(buffer), promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        tickTask?.cancel()
        tickTask = nil
        let wasReady = everReady
        _ = machine.channelClosed()
        let abandoned = inFlight.removeAll()
        extras.removeAll()
        blockedStreams.removeAll()
        outbound = nil
        if !abandoned.isEmpty {
            logger.debug("connection closed with unanswered streams", metadata: ["apns.streams": "\(abandoned.count)"])
        }
        // Written but unanswered: APNs may or may not have processed them, so they go back to the
        // caller as retryable rather than being resent behind its back. (A request whose DATA never
        // left is no different: its HEADERS did.)
        for (_, entry) in abandoned {
            var outcome = APNsOutcome.failed(.connectionLost)
            if let goAwayReason {
                outcome.reason = goAwayReason
                outcome.outcomeClass = goAwayReason.outcomeClass == .rejected ? .rejected : .retryable
            }
            entry.request.complete(outcome)
        }
        delegate.connectionClosed(connectionID, everReady: wasReady, error: lastError)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        lastError = TransportTLS.describe(error)
        logger.debug("connection error", metadata: ["apns.error": "\(lastError ?? "")"])
        context.close(promise: nil)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
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

    func retire(because reason: APNsReason) {
        logger.debug("retiring connection", metadata: ["apns.reason": "\(reason)"])
        delegate.connectionRetiring(connectionID)
        if machine.closeRequested() { flushAndClose() }
    }

    func flushAndClose() {
        guard let context else { return }
        flushOutbound(context: context)
        context.close(promise: nil)
    }

    // MARK: Timer

    func tick() {
        guard let context else { return }
        let now = context.eventLoop.now
        if !inFlight.isEmpty {
            let expiredIDs = inFlight.ids(where: { $0.request.deadline <= now })
            if !expiredIDs.isEmpty {
                let expired = expiredIDs.compactMap { abandon($0) }
                // Free the streams in the pool's books before the callers hear about them.
                sendQueuedWork()
                flushOutbound(context: context)
                for entry in expired { entry.request.complete(.failed(.deadlineExceeded)) }
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
