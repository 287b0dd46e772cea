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
    private struct InFlight {
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
    private struct StreamExtras {
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
    private let delegate: any APNsConnectionDelegate
    private let configuration: Configuration
    private var machine: APNsConnectionStateMachine
    private var inFlight = InFlightStreams<InFlight>()
    private var extras: [HTTP2StreamID: StreamExtras] = [:]
    /// The last answer's `apns-id`, reused while answers repeat it (a stand-in that always answers the same id).
    private var lastAnswerAPNsID: String?
    private var releasedSinceLastPull = 0
    private var context: ChannelHandlerContext?
    private var tickTask: RepeatedTask?
    private var everReady = false
    private var prefaceSent = false
    private var lastError: String?
    /// GOAWAY's debug data, when it carried an APNs reason (e.g. `BadCertificateEnvironment`).
    private var goAwayReason: APNsReason?
    private var logger: Logger

    // HTTP/2 state
    private var parser = HTTP2FrameParser()
    private var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
    private var encoder = HPACKRequestEncoder()
    /// Frames written since the last flush.
    private var outbound: ByteBuffer?
    /// Connection-level inbound flow control: consumed since our last WINDOW_UPDATE.
    private var unacknowledgedInboundBytes = 0
    private var connectionSendWindow = HTTP2Wire.defaultInitialWindowSize
    private var initialStreamSendWindow = HTTP2Wire.defaultInitialWindowSize
    private var peerMaximumFrameSize = HTTP2Wire.defaultMaximumFrameSize
    /// Streams whose DATA waits for window, oldest first. New streams wait until it is empty.
    private var blockedStreams: Deque<HTTP2StreamID> = []
    /// The last notification's shared header block and the table generation it was encoded at.
    private var sharedBlock: (notification: PreparedNotification, generation: UInt64, bytes: ByteBuffer)?
    /// The `authorization` literal of the current provider token (it changes hourly).
    private var authorizationBlock: (token: ProviderToken, bytes: ByteBuffer)?

    /// Token bucket for `requestsPerSecond`: whole requests we may still start, refilled over time.
    private var rateTokens: Double = 0
    private var rateRefilledAt: NIODeadline?
    private var rateWakeScheduled = false

    init(connectionID: Int, delegate: any APNsConnectionDelegate, configuration: Configuration, now: NIODeadline) {
        self.connectionID = connectionID
        self.delegate = delegate
        self.configuration = configuration
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
    private func sendPreface(context: ChannelHandlerContext) {
        guard !prefaceSent else { return }
        prefaceSent = true
        var buffer = context.channel.allocator.buffer(capacity: 64)
        buffer.writeStaticString(HTTP2Wire.clientPreface)
        HTTP2Wire.writeFrameHeader(length: 6 * Self.localSettings.count, type: .settings, flags: 0, streamID: 0, into: &buffer)
        for (setting, value) in Self.localSettings {
            buffer.writeInteger(setting.rawValue)
            buffer.writeInteger(value)
        }
        HTTP2Wire.writeFrameHeader(length: 4, type: .windowUpdate, flags: 0, streamID: 0, into: &buffer)
        buffer.writeInteger(UInt32(Self.initialConnectionWindowIncrement))
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

    private func handle(_ frame: HTTP2InboundFrame, now: NIODeadline, context: ChannelHandlerContext) throws {
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
            unacknowledgedInboundBytes += flowControlledLength
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
                HTTP2Wire.writeFrameHeader(length: 8, type: .ping, flags: HTTP2Wire.Flag.ack, streamID: 0, into: &outboundBuffer)
                outboundBuffer.writeInteger(opaque)
            }
        case .goAway(let lastStreamID, let errorCode, let debugData):
            goAwayReceived(lastStreamID: HTTP2StreamID(Int32(lastStreamID)), errorCode: errorCode, debugData: debugData, now: now)
        case .windowUpdate(let streamID, let increment):
            machine.frameRead(now: now)
            if streamID == 0 {
                connectionSendWindow += Int(increment)
                guard connectionSendWindow <= HTTP2Wire.maximumWindowSize else {
                    throw HTTP2ConnectionError(code: .flowControlError, message: "connection window above 2^31-1")
                }
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
    private func apply(_ settings: [(parameter: UInt16, value: UInt32)], now: NIODeadline) throws {
        var maximum: Int? = nil
        for (parameter, value) in settings {
            switch HTTP2Wire.Setting(rawValue: parameter) {
            case .maxConcurrentStreams?:
                maximum = Int(value)
            case .headerTableSize?:
                encoder.peerAllowsTableSize(Int(value))
            case .initialWindowSize?:
                // RFC 9113 §6.9.2: the change applies to every open stream's window, even below zero.
                let delta = Int(value) - initialStreamSendWindow
                initialStreamSendWindow = Int(value)
                try inFlight.updateAll { id, stream in
                    stream.sendWindow += delta
                    guard stream.sendWindow <= HTTP2Wire.maximumWindowSize else {
                        throw HTTP2ConnectionError(code: .flowControlError, message: "window of stream \(id) above 2^31-1")
                    }
                }
            case .maxFrameSize?:
                peerMaximumFrameSize = Int(value)
            default:
                break
            }
        }
        HTTP2Wire.writeFrameHeader(length: 0, type: .settings, flags: HTTP2Wire.Flag.ack, streamID: 0, into: &outboundBuffer)
        settingsReceived(maximumConcurrentStreams: maximum, now: now)
        sendBlockedData()
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if unacknowledgedInboundBytes >= 32_768 {
            HTTP2Wire.writeFrameHeader(length: 4, type: .windowUpdate, flags: 0, streamID: 0, into: &outboundBuffer)
            outboundBuffer.writeInteger(UInt32(unacknowledgedInboundBytes))
            unacknowledgedInboundBytes = 0
        }
        sendQueuedWork()
        flushOutbound(context: context)
        context.fireChannelReadComplete()
    }

    /// RFC 9113 §5.4.1: GOAWAY with the error, then close.
    private func connectionError(_ error: HTTP2ConnectionError, context: ChannelHandlerContext) {
        lastError = error.description
        logger.debug("HTTP/2 protocol error from the server", metadata: ["apns.error": "\(error)"])
        let message = Array(error.message.utf8.prefix(256))
        HTTP2Wire.writeFrameHeader(length: 8 + message.count, type: .goAway, flags: 0, streamID: 0, into: &outboundBuffer)
        outboundBuffer.writeInteger(UInt32(0))
        outboundBuffer.writeInteger(error.code.rawValue)
        outboundBuffer.writeBytes(message)
        flushOutbound(context: context)
        delegate.connectionRetiring(connectionID)
        context.close(promise: nil)
    }

    private func readHeaders(_ headers: HPACKHeaders, streamID: HTTP2StreamID) {
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
    private func readHeaders(_ fields: HPACKAnswerReader.Fields, streamID: HTTP2StreamID) {
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

    private static func bytes(_ buffer: ByteBuffer, equal string: String) -> Bool {
        buffer.withUnsafeReadableBytes { bytes in
            var string = string
            return string.withUTF8 { utf8 in utf8.count == bytes.count && utf8.elementsEqual(bytes) }
        }
    }

    private func settingsReceived(maximumConcurrentStreams: Int?, now: NIODeadline) {
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

    private func goAwayReceived(lastStreamID: HTTP2StreamID, errorCode: UInt32, debugData: ByteBuffer, now: NIODeadline) {
        if debugData.readableBytes > 0, let reason = Self.reason(fromJSON: debugData) { goAwayReason = reason }
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

    private func resetByServer(_ streamID: HTTP2StreamID, code: UInt32, now: NIODeadline) {
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
    private func finishStream(_ streamID: HTTP2StreamID, now: NIODeadline) {
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
            (reason, timestamp) = Self.parseErrorBody(body)
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
                delegate.requeue([retry], because: .streamRefused)
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

    private func closeStreamInMachine(_ streamID: HTTP2StreamID, now: NIODeadline) {
        if machine.streamClosed(streamID, now: now) == .closeConnection {
            flushAndClose()
        }
    }

    private func retire(because reason: APNsReason) {
        logger.debug("retiring connection", metadata: ["apns.reason": "\(reason)"])
        delegate.connectionRetiring(connectionID)
        if machine.closeRequested() { flushAndClose() }
    }

    private func flushAndClose() {
        guard let context else { return }
        flushOutbound(context: context)
        context.close(promise: nil)
    }

    // MARK: Outbound

    private var outboundBuffer: ByteBuffer {
        get { outbound ?? ByteBuffer() }
        _modify {
            if outbound == nil { outbound = context?.channel.allocator.buffer(capacity: 16 * 1024) ?? ByteBuffer() }
            yield &outbound!
        }
    }

    private func flushOutbound(context: ChannelHandlerContext) {
        if let buffer = outbound, buffer.readableBytes > 0 {
            outbound = nil
            context.write(wrapOutboundOut(buffer), promise: nil)
        }
        context.flush()
    }

    /// Called on the event loop when the pool has work for this connection.
    func wake() {
        guard let context else { return }
        sendQueuedWork()
        flushOutbound(context: context)
    }

    /// Returns released requests to the pool and writes as many new ones as there are free streams.
    /// Does not flush: the caller flushes once for the whole batch.
    private func sendQueuedWork() {
        guard let context else { return }
        // While some DATA waits for window, new streams would only wait behind it.
        var available = blockedStreams.isEmpty ? machine.availableStreams : 0
        if let rate = configuration.requestsPerSecond, available > 0 {
            available = min(available, rateAllowance(rate: rate, now: context.eventLoop.now, context: context))
        }
        guard available > 0 || releasedSinceLastPull > 0 else { return }
        let released = releasedSinceLastPull
        releasedSinceLastPull = 0
        var batch = delegate.pull(connection: connectionID, released: released, maximum: available)
        guard !batch.isEmpty else { return }

        let token: ProviderToken?
        do {
            token = try delegate.providerToken()
        } catch {
            // Signing failed (a broken key): no request can succeed; answer them all.
            let outcome = APNsOutcome(
                outcomeClass: .rejected, reason: .invalidProviderToken,
                transportFailure: .malformedResponse("provider token could not be signed"))
            for request in batch { request.complete(outcome) }
            releasedSinceLastPull += batch.count
            return
        }
        if let token, authorizationBlock?.token != token {
            // One literal per token (hourly), not one per request.
            var bytes = ByteBuffer()
            HPACKRequestEncoder.writeNotIndexed(
                staticNameIndex: HPACKRequestEncoder.StaticName.authorization, value: token.authorizationHeaderValue, into: &bytes)
            authorizationBlock = (token, bytes)
        }
        let now = context.eventLoop.now
        if configuration.requestsPerSecond != nil { rateTokens -= Double(batch.count) }
        // Moved out of the array one by one (in order), not copied: a copy retains every reference a
        // request holds, and releases them again when the array goes.
        batch.reverse()
        while let request = batch.popLast() {
            write(request, token: token, now: now)
            if outbound.map({ $0.readableBytes >= Self.outboundWriteThreshold }) ?? false {
                context.write(wrapOutboundOut(outbound!), promise: nil)
                outbound = nil
            }
        }
        if machine.streamIDsExhausted {
            logger.debug("stream ids exhausted; retiring the connection")
            delegate.connectionRetiring(connectionID)
            if machine.closeRequested() { flushAndClose() }
        }
    }

    /// Refills the bucket (capacity: one second's worth) and returns how many requests may start now.
    /// With none allowed, schedules a wake-up for when the next one is.
    private func rateAllowance(rate: Int, now: NIODeadline, context: ChannelHandlerContext) -> Int {
        let capacity = Double(rate)
        if let last = rateRefilledAt {
            rateTokens = min(capacity, rateTokens + Double((now - last).nanoseconds) / 1e9 * capacity)
        } else {
            rateTokens = 1
        }
        rateRefilledAt = now
        let allowed = Int(rateTokens.rounded(.down))
        if allowed == 0, !rateWakeScheduled {
            rateWakeScheduled = true
            let wait = TimeAmount.nanoseconds(Int64((1 - rateTokens) / capacity * 1e9) + 1)
            let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
            context.eventLoop.scheduleTask(in: wait) {
                loopBound.value.rateWakeScheduled = false
                loopBound.value.wake()
            }
        }
        return allowed
    }

    /// One request: HEADERS, then as much of its DATA as flow control allows now.
    private func write(_ pooled: consuming PooledRequest, token: ProviderToken?, now: NIODeadline) {
        // Written into a local buffer, handed back at the end: each access to the stored property
        // would cost a dynamic exclusivity check.
        var buffer = outbound.take() ?? context?.channel.allocator.buffer(capacity: 16 * 1024) ?? ByteBuffer()
        let streamID = machine.openStream(now: now)
        let notification = pooled.request.notification
        let headerIndex = buffer.writerIndex
        HTTP2Wire.writeFrameHeaderBatched(length: 0, type: .headers, flags: HTTP2Wire.Flag.endHeaders, streamID: UInt32(Int32(streamID)), into: &buffer)
        let blockStart = buffer.writerIndex
        encoder.writePendingSizeUpdate(into: &buffer)
        // Apple: `:path` and `authorization` as literals without indexing; they change per request / per hour.
        HPACKRequestEncoder.writeMethodSchemeAndPath(device: pooled.request.deviceToken, into: &buffer)
        writeSharedHeaders(of: notification, into: &buffer)
        if token != nil, authorizationBlock != nil {
            buffer.writeImmutableBuffer(authorizationBlock!.bytes)
        }
        if let apnsID = pooled.request.apnsID {
            HPACKRequestEncoder.writeNotIndexed(name: "apns-id", value: apnsID.value, into: &buffer)
        }
        let blockLength = buffer.writerIndex - blockStart
        let maximumFrameSize = peerMaximumFrameSize
        if blockLength <= maximumFrameSize {
            HTTP2Wire.setFrameLength(blockLength, atHeaderIndex: headerIndex, in: &buffer)
        } else {
            Self.splitHeaderBlock(headerIndex: headerIndex, streamID: UInt32(Int32(streamID)), maximumFrameSize: maximumFrameSize, in: &buffer)
        }

        let payload = notification.payload
        let length = payload.readableBytes
        let streamWindow = initialStreamSendWindow
        if length <= connectionSendWindow, length <= streamWindow, length <= maximumFrameSize {
            HTTP2Wire.writeFrameHeaderBatched(length: length, type: .data, flags: HTTP2Wire.Flag.endStream, streamID: UInt32(Int32(streamID)), into: &buffer)
            buffer.writeImmutableBuffer(payload)
            outbound = buffer
            connectionSendWindow -= length
            inFlight.insert(InFlight(request: pooled, providerToken: token, writtenAt: now, sendWindow: streamWindow - length), for: streamID)
        } else {
            outbound = buffer
            inFlight.insert(InFlight(request: pooled, providerToken: token, writtenAt: now, sendWindow: streamWindow), for: streamID)
            extras[streamID, default: StreamExtras()].unsentPayload = payload
            blockedStreams.append(streamID)
            sendBlockedData()
        }
    }

    /// The notification's shared fields (`:authority` first, a pseudo-header) as one cached block:
    /// encoded once per notification, and again only when the HPACK table changed in between.
    private func writeSharedHeaders(of notification: PreparedNotification, into buffer: inout ByteBuffer) {
        // Compared field by field: binding the cached tuple would retain and release its references per request.
        if sharedBlock?.notification === notification, sharedBlock?.generation == encoder.generation {
            buffer.writeImmutableBuffer(sharedBlock!.bytes)
            return
        }
        let generation = encoder.generation
        var block = ByteBuffer()
        encoder.writeIndexable(name: ":authority", value: configuration.authority, into: &block)
        for (name, value) in notification.headerFields {
            encoder.writeIndexable(name: name, value: value, into: &block)
        }
        buffer.writeImmutableBuffer(block)
        // Reusable only if encoding it changed nothing: the next device's block will be all indices.
        sharedBlock = encoder.generation == generation ? (notification, generation, block) : nil
    }

    /// A header block larger than the server's frame size: HEADERS and CONTINUATION frames (rare:
    /// only a server announcing a tiny SETTINGS_MAX_FRAME_SIZE, or very long header values).
    private static func splitHeaderBlock(headerIndex: Int, streamID: UInt32, maximumFrameSize: Int, in buffer: inout ByteBuffer) {
        var block = buffer.getSlice(at: headerIndex + HTTP2Wire.frameHeaderLength, length: buffer.writerIndex - headerIndex - HTTP2Wire.frameHeaderLength)!
        buffer.moveWriterIndex(to: headerIndex)
        var first = true
        while block.readableBytes > 0 || first {
            let length = min(block.readableBytes, maximumFrameSize)
            var piece = block.readSlice(length: length)!
            let last = block.readableBytes == 0
            HTTP2Wire.writeFrameHeader(
                length: length, type: first ? .headers : .continuation, flags: last ? HTTP2Wire.Flag.endHeaders : 0, streamID: streamID,
                into: &buffer)
            buffer.writeBuffer(&piece)
            first = false
        }
    }

    /// Sends waiting DATA, oldest stream first, as far as the windows allow.
    private func sendBlockedData() {
        while let streamID = blockedStreams.first {
            guard let sendWindow = inFlight.read(streamID, { $0.sendWindow }), var payload = extras[streamID]?.unsentPayload else {
                blockedStreams.removeFirst()
                continue
            }
            let length = min(payload.readableBytes, connectionSendWindow, sendWindow, peerMaximumFrameSize)
            if length <= 0, payload.readableBytes > 0 { return }
            var piece = payload.readSlice(length: length)!
            let done = payload.readableBytes == 0
            HTTP2Wire.writeFrameHeader(
                length: length, type: .data, flags: done ? HTTP2Wire.Flag.endStream : 0, streamID: UInt32(Int32(streamID)), into: &outboundBuffer)
            outboundBuffer.writeBuffer(&piece)
            connectionSendWindow -= length
            inFlight.update(streamID) { $0.sendWindow -= length }
            extras[streamID]!.unsentPayload = done ? nil : payload
            if done { blockedStreams.removeFirst() }
        }
    }

    private func writeReset(_ streamID: HTTP2StreamID, code: HTTP2Wire.ErrorCode) {
        HTTP2Wire.writeFrameHeader(length: 4, type: .rstStream, flags: 0, streamID: UInt32(Int32(streamID)), into: &outboundBuffer)
        outboundBuffer.writeInteger(code.rawValue)
    }

    /// Abandons a request the caller cancelled: resets its stream and frees it.
    func cancel(poolRequestID: UInt64) -> Bool {
        guard let context, let streamID = inFlight.ids(where: { $0.request.poolRequestID == poolRequestID }).first,
            let entry = abandon(streamID)
        else {
            return false
        }
        // Free the stream in the pool's books before the caller hears about it.
        sendQueuedWork()
        flushOutbound(context: context)
        entry.request.complete(.failed(.cancelled))
        return true
    }

    /// Resets the stream and frees it; the caller completes the request (returned) afterwards.
    @discardableResult
    private func abandon(_ streamID: HTTP2StreamID) -> InFlight? {
        guard let context, let entry = inFlight.remove(streamID) else { return nil }
        if !extras.isEmpty, extras.removeValue(forKey: streamID)?.unsentPayload != nil { blockedStreams.removeAll { $0 == streamID } }
        releasedSinceLastPull += 1
        writeReset(streamID, code: .cancel)
        closeStreamInMachine(streamID, now: context.eventLoop.now)
        return entry
    }

    /// Retire the connection for shutdown: finish open streams, then close.
    func closeGracefully() {
        guard context != nil else { return }
        if machine.closeRequested() { flushAndClose() }
    }

    // MARK: Timer

    private func tick() {
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
            HTTP2Wire.writeFrameHeader(length: 8, type: .ping, flags: 0, streamID: 0, into: &outboundBuffer)
            outboundBuffer.writeInteger(UInt64(now.uptimeNanoseconds))
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

    // MARK: Parsing

    /// `{"reason":"...","timestamp":1234}` → the reason and the 410 timestamp in ms.
    static func parseErrorBody(_ body: ByteBuffer) -> (APNsReason?, Int64?) {
        guard let object = try? JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any] else {
            return (nil, nil)
        }
        let reason = (object["reason"] as? String).map(APNsReason.init(rawValue:))
        var timestamp: Int64? = nil
        if let number = object["timestamp"] as? NSNumber { timestamp = number.int64Value }
        return (reason, timestamp)
    }

    static func reason(fromJSON buffer: ByteBuffer) -> APNsReason? {
        parseErrorBody(buffer).0
    }
}
