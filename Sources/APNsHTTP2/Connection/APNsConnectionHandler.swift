import DequeModule
import Foundation
import Logging
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOSSL
import NIOTLS
import PushgateCore
import PushTransport

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
            settings: Self.localSettings, connectionWindowIncrement: Self.initialConnectionWindowIncrement,
            into: &buffer)
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

    // MARK: Inbound frames

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        parser.append(&bytes)
        let now = context.eventLoop.now
        do {
            while let frame = try parser.nextFrame() {
                try handle(frame, now: now, context: context)
                if self.context == nil { return }
            }
        } catch let error as HTTP2ConnectionError {
            connectionError(error, context: context)
        } catch {
            connectionError(HTTP2ConnectionError(code: .compressionError, message: "\(error)"), context: context)
        }
    }

    func handle(_ frame: HTTP2InboundFrame, now: NIODeadline, context: ChannelHandlerContext) throws {
        switch frame {
        case .headers(let streamID, var block, let endStream):
            machine.frameRead(now: now)
            let id = HTTP2StreamID(Int32(streamID))
            if let fields = HPACKAnswerReader.read(block, maximumHeaderListSize: decoder.maxHeaderListSize) {
                // The decoder sees only what changes its table (even for a stream we no longer track).
                if var insertions = fields.tableInsertions { _ = try decoder.decodeHeaders(from: &insertions) }
                guard inFlight.contains(id) else { return }
                readHeaders(fields, streamID: id)
            } else {
                // Decoded even for a stream we no longer track: the HPACK table must stay in step.
                let headers = try decoder.decodeHeaders(from: &block)
                guard inFlight.contains(id) else { return }
                readHeaders(headers, streamID: id)
            }
            if endStream { finishStream(id, now: now) }
        case .data(let streamID, var data, let endStream, let flowControlledLength):
            machine.frameRead(now: now)
            windows.received(flowControlledLength)
            let id = HTTP2StreamID(Int32(streamID))
            guard inFlight.contains(id) else { return }
            if data.readableBytes > 0 { extras[id, default: StreamExtras()].body.setOrWriteBuffer(&data) }
            if endStream { finishStream(id, now: now) }
        case .rstStream(let streamID, let code):
            machine.frameRead(now: now)
            resetByServer(HTTP2StreamID(Int32(streamID)), code: code, now: now)
        case .settings(let settings):
            try apply(settings, now: now)
        case .settingsAcknowledged:
            machine.frameRead(now: now)
        case .ping(let opaque, let ack):
            if ack {
                machine.pingAcknowledged(now: now)
            } else {
                machine.frameRead(now: now)
                HTTP2Wire.writePing(opaque, acknowledging: true, into: &outboundBuffer)
            }
        case .goAway(let lastStreamID, let errorCode, let debugData):
            goAwayReceived(lastStreamID: HTTP2StreamID(Int32(lastStreamID)), errorCode: errorCode, debugData: debugData, now: now)
        case .windowUpdate(let streamID, let increment):
            machine.frameRead(now: now)
            if streamID == 0 {
                try windows.connectionWindowUpdate(increment)
            } else {
                let window = inFlight.update(HTTP2StreamID(Int32(streamID))) { stream in
                    stream.sendWindow += Int(increment)
                    return stream.sendWindow
                }
                if let window, window > HTTP2Wire.maximumWindowSize {
                    throw HTTP2ConnectionError(code: .flowControlError, message: "window of stream \(streamID) above 2^31-1")
                }
            }
            sendBlockedData()
        case .ignored:
            machine.frameRead(now: now)
        }
    }

    /// A server SETTINGS frame: apply it, acknowledge it, and tell the state machine.
    func apply(_ settings: [(parameter: UInt16, value: UInt32)], now: NIODeadline) throws {
        var maximum: Int? = nil
        for (parameter, value) in settings {
            switch HTTP2Wire.Setting(rawValue: parameter) {
            case .maxConcurrentStreams?:
                maximum = Int(value)
            case .headerTableSize?:
                encoder.peerAllowsTableSize(Int(value))
            case .initialWindowSize?:
                // RFC 9113 §6.9.2: the change applies to every open stream's window, even below zero.
                let delta = windows.initialStreamWindowChanged(to: value)
                try inFlight.updateAll { id, stream in
                    stream.sendWindow += delta
                    guard stream.sendWindow <= HTTP2Wire.maximumWindowSize else {
                        throw HTTP2ConnectionError(code: .flowControlError, message: "window of stream \(id) above 2^31-1")
                    }
                }
            case .maxFrameSize?:
                windows.peerMaximumFrameSize = Int(value)
            default:
                break
            }
        }
        HTTP2Wire.writeSettingsAcknowledgement(into: &outboundBuffer)
        settingsReceived(maximumConcurrentStreams: maximum, now: now)
        sendBlockedData()
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if let increment = windows.takeAcknowledgement() {
            HTTP2Wire.writeConnectionWindowUpdate(increment, into: &outboundBuffer)
        }
        sendQueuedWork()
        flushOutbound(context: context)
        context.fireChannelReadComplete()
    }

    /// RFC 9113 §5.4.1: GOAWAY with the error, then close.
    func connectionError(_ error: HTTP2ConnectionError, context: ChannelHandlerContext) {
        lastError = error.description
        logger.debug("HTTP/2 protocol error from the server", metadata: ["apns.error": "\(error)"])
        HTTP2Wire.writeGoAway(for: error, into: &outboundBuffer)
        flushOutbound(context: context)
        delegate.connectionRetiring(connectionID)
        context.close(promise: nil)
    }

    func readHeaders(_ headers: HPACKHeaders, streamID: HTTP2StreamID) {
        for (name, value, _) in headers {
            switch name {
            case ":status": inFlight.update(streamID) { $0.status = Int(value) }
            case "apns-id": inFlight.update(streamID) { $0.apnsID = value }
            case "apns-unique-id": extras[streamID, default: StreamExtras()].apnsUniqueID = value
            default: continue
            }
        }
    }

    /// The same for a block read by ``HPACKAnswerReader``, with the `apns-id` String reused when the
    /// answer echoes the request's id or repeats the previous answer's.
    func readHeaders(_ fields: HPACKAnswerReader.Fields, streamID: HTTP2StreamID) {
        if let uniqueID = fields.apnsUniqueID { extras[streamID, default: StreamExtras()].apnsUniqueID = uniqueID }
        let lastAnswerAPNsID = self.lastAnswerAPNsID
        var answerAPNsID: String?
        inFlight.update(streamID) { stream in
            if fields.hasStatus { stream.status = fields.status }
            guard let bytes = fields.apnsID else { return }
            if let sent = stream.request.request.apnsID?.value, Self.bytes(bytes, equal: sent) {
                stream.apnsID = sent
            } else if let lastAnswerAPNsID, Self.bytes(bytes, equal: lastAnswerAPNsID) {
                stream.apnsID = lastAnswerAPNsID
            } else {
                let id = String(decoding: bytes.readableBytesView, as: UTF8.self)
                stream.apnsID = id
                answerAPNsID = id
            }
        }
        if let answerAPNsID { self.lastAnswerAPNsID = answerAPNsID }
    }

    static func bytes(_ buffer: ByteBuffer, equal string: String) -> Bool {
        buffer.withUnsafeReadableBytes { bytes in
            var string = string
            return string.withUTF8 { utf8 in utf8.count == bytes.count && utf8.elementsEqual(bytes) }
        }
    }

    func settingsReceived(maximumConcurrentStreams: Int?, now: NIODeadline) {
        switch machine.settingsReceived(maximumConcurrentStreams: maximumConcurrentStreams, now: now) {
        case .becameReady:
            everReady = true
            logger.debug("connection ready", metadata: ["apns.max_streams": "\(machine.effectiveMaximumStreams)"])
            delegate.connectionReady(connectionID, capacity: machine.effectiveMaximumStreams)
        case .capacityChanged:
            logger.debug("stream limit changed", metadata: ["apns.max_streams": "\(machine.effectiveMaximumStreams)"])
            delegate.connectionCapacityChanged(connectionID, capacity: machine.effectiveMaximumStreams)
        case .none:
            break
        }
    }

    func goAwayReceived(lastStreamID: HTTP2StreamID, errorCode: UInt32, debugData: ByteBuffer, now: NIODeadline) {
        if debugData.readableBytes > 0, let reason = APNsErrorBody(parsing: debugData.readableBytesView).reason { goAwayReason = reason }
        logger.debug(
            "GOAWAY received",
            metadata: [
                "apns.last_stream_id": "\(lastStreamID)", "apns.error_code": "\(HTTP2Wire.ErrorCode.describe(errorCode))",
                "apns.reason": "\(goAwayReason?.rawValue ?? "")",
            ])
        switch machine.goAwayReceived(lastStreamID: lastStreamID, now: now) {
        case .retire(let unprocessed, _, let closeNow):
            delegate.connectionRetiring(connectionID)
            var retry: [PooledRequest] = []
            retry.reserveCapacity(unprocessed.count)
            for id in unprocessed {
                if let entry = inFlight.remove(id) { retry.append(entry.request) }
                extras[id] = nil
            }
            if !retry.isEmpty { blockedStreams.removeAll { !inFlight.contains($0) } }
            releasedSinceLastPull += retry.count
            if !retry.isEmpty { delegate.requeue(retry, because: .goAway) }
            if closeNow { context?.close(promise: nil) }
        case .none:
            break
        }
    }

    func resetByServer(_ streamID: HTTP2StreamID, code: UInt32, now: NIODeadline) {
        guard let entry = inFlight.remove(streamID) else { return }
        if !extras.isEmpty, extras.removeValue(forKey: streamID)?.unsentPayload != nil { blockedStreams.removeAll { $0 == streamID } }
        releasedSinceLastPull += 1
        closeStreamInMachine(streamID, now: now)
        if code == HTTP2Wire.ErrorCode.refusedStream.rawValue {
            // RFC 9113: a refused stream was not processed; resending it is safe.
            delegate.requeue([entry.request], because: .streamRefused)
        } else {
            entry.request.complete(.failed(.streamReset(HTTP2Wire.ErrorCode.describe(code))))
        }
    }

    /// The answer is complete: classify it and hand it over (or resend it when the answer says the
    /// connection, not the notification, was at fault).
    func finishStream(_ streamID: HTTP2StreamID, now: NIODeadline) {
        guard let entry = inFlight.remove(streamID) else { return }
        let extra = extras.isEmpty ? nil : extras.removeValue(forKey: streamID)
        if extra?.unsentPayload != nil {
            // Answered before we finished sending (an early error answer): stop sending its DATA.
            blockedStreams.removeAll { $0 == streamID }
            writeReset(streamID, code: .noError)
        }
        releasedSinceLastPull += 1
        closeStreamInMachine(streamID, now: now)
        delegate.streamAnswered(roundTrip: now - entry.writtenAt)

        guard let status = entry.status else {
            entry.request.complete(.failed(.malformedResponse("no :status")))
            return
        }
        var reason: APNsReason? = nil
        var timestamp: Int64? = nil
        if status != 200, let body = extra?.body {
            let parsed = APNsErrorBody(parsing: body.readableBytesView)
            (reason, timestamp) = (parsed.reason, parsed.timestamp)
        }
        let outcome = APNsOutcome.answered(
            status: status, reason: reason, apnsID: entry.apnsID, apnsUniqueID: extra?.apnsUniqueID,
            invalidatedAtMilliseconds: timestamp)

        switch reason {
        case .expiredProviderToken?:
            if let token = entry.providerToken { delegate.providerTokenRejectedAsExpired(token) }
            if !entry.request.retriedAfterExpiredToken {
                var retry = entry.request
                retry.retriedAfterExpiredToken = true
                delegate.requeue([retry], because: .expiredProviderToken)
                return
            }
        case .shutdown?, .idleTimeout?, .tooManyProviderTokenUpdates?:
            // The connection is the problem: stop using it, and resend this request once elsewhere.
            retire(because: reason!)
            if !entry.request.retriedAfterConnectionFatal {
                var retry = entry.request
                retry.retriedAfterConnectionFatal = true
                delegate.requeue([retry], because: .streamRefused)
                return
            }
        default:
            break
        }
        entry.request.complete(outcome)
    }

    func closeStreamInMachine(_ streamID: HTTP2StreamID, now: NIODeadline) {
        if machine.streamClosed(streamID, now: now) == .closeConnection {
            flushAndClose()
        }
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
