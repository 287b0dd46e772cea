public import DequeModule
public import Logging
public import NIOCore
import NIOHPACK
public import NIOHTTP2
public import PushgateCore

/// The inbound half of the connection handler: reading frames, answers (HEADERS, DATA, RST_STREAM),
/// SETTINGS, GOAWAY and PING, and finishing streams.
extension HTTP2PushConnectionHandler {
    @inlinable
    public func channelRead(context: ChannelHandlerContext, bytes: ByteBuffer) {
        var bytes = bytes
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

    @inlinable
    public func handle(_ frame: HTTP2InboundFrame, now: NIODeadline, context: ChannelHandlerContext) throws {
        switch frame {
        case .headers(let streamID, var block, let endStream):
            machine.frameRead(now: now)
            let id = HTTP2StreamID(Int32(streamID))
            // Decoded even for a stream we no longer track: the HPACK table must stay in step.
            guard let fields = try exchange.decodeHeaders(&block, decoder: &decoder, tracked: inFlight.contains(id))
            else { return }
            let extra = inFlight.update(id) { stream in
                exchange.read(fields, into: &stream.answer, of: stream.request)
            }
            if let extra, let extra { extras[id, default: StreamExtras()].extra = extra }
            if endStream { finishStream(id, now: now) }
        case .data(let streamID, var data, let endStream, let flowControlledLength):
            machine.frameRead(now: now)
            windows.received(flowControlledLength)
            let id = HTTP2StreamID(Int32(streamID))
            guard inFlight.contains(id) else { return }
            if data.readableBytes > 0 { appendBody(&data, to: id) }
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
            goAwayReceived(
                lastStreamID: HTTP2StreamID(Int32(lastStreamID)),
                errorCode: errorCode,
                debugData: debugData,
                now: now
            )
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
                    throw HTTP2ConnectionError(
                        code: .flowControlError,
                        message: "window of stream \(streamID) above 2^31-1"
                    )
                }
            }
            sendBlockedData()
        case .ignored:
            machine.frameRead(now: now)
        }
    }

    /// A DATA frame's payload, kept up to the exchange's limit.
    @inlinable
    public func appendBody(_ data: inout ByteBuffer, to id: HTTP2StreamID) {
        let limit = Exchange.maximumAnswerBodyBytes
        if limit == Int.max {
            extras[id, default: StreamExtras()].body.setOrWriteBuffer(&data)
            return
        }
        let room = limit - (extras[id]?.body?.readableBytes ?? 0)
        guard room > 0 else { return }
        if data.readableBytes > room { data = data.getSlice(at: data.readerIndex, length: room)! }
        extras[id, default: StreamExtras()].body.setOrWriteBuffer(&data)
    }

    /// A server SETTINGS frame: apply it, acknowledge it, and tell the state machine.
    @inlinable
    public func apply(_ settings: [(parameter: UInt16, value: UInt32)], now: NIODeadline) throws {
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
                        throw HTTP2ConnectionError(
                            code: .flowControlError,
                            message: "window of stream \(id) above 2^31-1"
                        )
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

    @inlinable
    public func channelReadComplete(context: ChannelHandlerContext) {
        if let increment = windows.takeAcknowledgement() {
            HTTP2Wire.writeConnectionWindowUpdate(increment, into: &outboundBuffer)
        }
        sendQueuedWork()
        flushOutbound(context: context)
        context.fireChannelReadComplete()
    }

    /// RFC 9113 §5.4.1: GOAWAY with the error, then close.
    @inlinable
    public func connectionError(_ error: HTTP2ConnectionError, context: ChannelHandlerContext) {
        lastError = error.description
        logger.debug("HTTP/2 protocol error from the server", metadata: [Self.key("error"): "\(error)"])
        HTTP2Wire.writeGoAway(for: error, into: &outboundBuffer)
        flushOutbound(context: context)
        delegate.connectionRetiring(connectionID)
        context.close(promise: nil)
    }

    @inlinable
    public func settingsReceived(maximumConcurrentStreams: Int?, now: NIODeadline) {
        switch machine.settingsReceived(maximumConcurrentStreams: maximumConcurrentStreams, now: now) {
        case .becameReady:
            everReady = true
            logger.debug("connection ready", metadata: [Self.key("max_streams"): "\(machine.effectiveMaximumStreams)"])
            delegate.connectionReady(connectionID, capacity: machine.effectiveMaximumStreams)
        case .capacityChanged:
            logger.debug(
                "stream limit changed",
                metadata: [Self.key("max_streams"): "\(machine.effectiveMaximumStreams)"]
            )
            delegate.connectionCapacityChanged(connectionID, capacity: machine.effectiveMaximumStreams)
        case .none:
            break
        }
    }

    @inlinable
    public func goAwayReceived(lastStreamID: HTTP2StreamID, errorCode: UInt32, debugData: ByteBuffer, now: NIODeadline)
    {
        let reason = debugData.readableBytes > 0 ? exchange.goAwayReceived(debugData: debugData) : nil
        logger.debug(
            "GOAWAY received",
            metadata: [
                Self.key("last_stream_id"): "\(lastStreamID)",
                Self.key("error_code"): "\(HTTP2Wire.ErrorCode.describe(errorCode))",
                Self.key("reason"): "\(reason ?? "")",
            ]
        )
        switch machine.goAwayReceived(lastStreamID: lastStreamID, now: now) {
        case .retire(let unprocessed, _, let closeNow):
            delegate.connectionRetiring(connectionID)
            var retry: [Request] = []
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

    @inlinable
    public func resetByServer(_ streamID: HTTP2StreamID, code: UInt32, now: NIODeadline) {
        guard let entry = inFlight.remove(streamID) else { return }
        if !extras.isEmpty, extras.removeValue(forKey: streamID)?.unsentPayload != nil {
            blockedStreams.removeAll { $0 == streamID }
        }
        releasedSinceLastPull += 1
        closeStreamInMachine(streamID, now: now)
        if code == HTTP2Wire.ErrorCode.refusedStream.rawValue {
            // RFC 9113: a refused stream was not processed; resending it is safe.
            delegate.requeue([entry.request], because: .streamRefused)
        } else {
            entry.request.fail(.streamReset(HTTP2Wire.ErrorCode.describe(code)))
        }
    }

    /// The answer is complete: the exchange says what it means (or that it must be resent because the
    /// connection, not the request, was at fault), and it is carried out.
    @inlinable
    public func finishStream(_ streamID: HTTP2StreamID, now: NIODeadline) {
        guard let entry = inFlight.remove(streamID) else { return }
        let extra = extras.isEmpty ? nil : extras.removeValue(forKey: streamID)
        if extra?.unsentPayload != nil {
            // Answered before we finished sending (an early error answer): stop sending its DATA.
            blockedStreams.removeAll { $0 == streamID }
            writeReset(streamID, code: .noError)
        }
        releasedSinceLastPull += 1
        closeStreamInMachine(streamID, now: now)
        let (disposition, retireReason) = exchange.finish(
            entry.request,
            answer: entry.answer,
            body: extra?.body,
            extra: extra?.extra,
            roundTrip: now - entry.writtenAt
        )
        if let retireReason { retire(because: retireReason) }
        switch disposition {
        case .complete(let outcome):
            exchange.complete(entry.request, with: outcome)
        case .requeue(let request, let failure):
            delegate.requeue([request], because: failure)
        }
    }

    @inlinable
    public func closeStreamInMachine(_ streamID: HTTP2StreamID, now: NIODeadline) {
        if machine.streamClosed(streamID, now: now) == .closeConnection {
            flushAndClose()
        }
    }
}
