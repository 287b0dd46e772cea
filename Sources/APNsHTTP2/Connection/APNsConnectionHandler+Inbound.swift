import DequeModule
import Foundation
import Logging
import NIOCore
import NIOHPACK
import NIOHTTP2
import PushTransport
import PushgateCore

/// The inbound half of the connection handler: reading frames, answers (HEADERS, DATA, RST_STREAM),
/// SETTINGS, GOAWAY and PING, and finishing streams.
extension APNsConnectionHandler {
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
        if debugData.readableBytes > 0, let reason = APNsErrorBody(parsing: debugData.readableBytesView).reason {
            goAwayReason = reason
        }
        logger.debug(
            "GOAWAY received",
            metadata: [
                "apns.last_stream_id": "\(lastStreamID)",
                "apns.error_code": "\(HTTP2Wire.ErrorCode.describe(errorCode))",
                "apns.reason": "\(goAwayReason?.rawValue ?? "")",
            ]
        )
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
        if !extras.isEmpty, extras.removeValue(forKey: streamID)?.unsentPayload != nil {
            blockedStreams.removeAll { $0 == streamID }
        }
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
            status: status,
            reason: reason,
            apnsID: entry.apnsID,
            apnsUniqueID: extra?.apnsUniqueID,
            invalidatedAtMilliseconds: timestamp
        )

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
}
