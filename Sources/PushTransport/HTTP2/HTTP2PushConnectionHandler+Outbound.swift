public import DequeModule
public import Logging
public import NIOCore
public import NIOHTTP2
public import PushgateCore

/// The outbound half of the connection handler: pulling work, HEADERS and DATA frames, flow control
/// of what is sent, the optional rate limit, resets and the graceful close.
extension HTTP2PushConnectionHandler {
    @inlinable
    public var outboundBuffer: ByteBuffer {
        get { outbound ?? ByteBuffer() }
        _modify {
            if outbound == nil { outbound = context?.channel.allocator.buffer(capacity: 16 * 1024) ?? ByteBuffer() }
            yield &outbound!
        }
    }

    @inlinable
    public func flushOutbound(context: ChannelHandlerContext) {
        if let buffer = outbound, buffer.readableBytes > 0 {
            outbound = nil
            context.write(NIOAny(buffer), promise: nil)
        }
        context.flush()
    }

    /// Called on the event loop when the pool has work for this connection.
    @inlinable
    public func wake() {
        guard let context else { return }
        sendQueuedWork()
        flushOutbound(context: context)
    }

    /// Returns released requests to the pool and writes as many new ones as there are free streams.
    /// Does not flush: the caller flushes once for the whole batch.
    @inlinable
    public func sendQueuedWork() {
        // A batch the exchange completed itself (no credential) was never written: its streams go back
        // to the pool at once and the next batch is pulled. Left on the pool's books, they would keep
        // this connection counted busy and unparked, and work queued after them would wait for an
        // answer that never comes (FCM: devices held while the token endpoint refuses the account).
        while sendQueuedBatch() {}
    }

    /// One pull and its writes; true when the exchange completed the batch without writing it.
    @inlinable
    public func sendQueuedBatch() -> Bool {
        guard let context else { return false }
        // While some DATA waits for window, new streams would only wait behind it.
        var available = blockedStreams.isEmpty ? machine.availableStreams : 0
        if available > 0, !exchange.mayWrite() { available = 0 }
        if rateLimiter != nil, available > 0 {
            available = min(available, rateAllowance(now: context.eventLoop.now, context: context))
        }
        guard available > 0 || releasedSinceLastPull > 0 else { return false }
        let released = releasedSinceLastPull
        releasedSinceLastPull = 0
        var batch = delegate.pull(connection: connectionID, released: released, maximum: available)
        guard !batch.isEmpty else { return false }

        let credential: Exchange.Credential
        switch exchange.credential(for: batch) {
        case .write(let value):
            credential = value
        case .failed:
            releasedSinceLastPull += batch.count
            return true
        }
        let now = context.eventLoop.now
        rateLimiter?.spend(batch.count)
        // Moved out of the array one by one (in order), not copied: a copy retains every reference a
        // request holds, and releases them again when the array goes.
        batch.reverse()
        while let request = batch.popLast() {
            write(request, credential: credential, now: now)
            if outbound.map({ $0.readableBytes >= Self.outboundWriteThreshold }) ?? false {
                context.write(NIOAny(outbound!), promise: nil)
                outbound = nil
            }
        }
        if machine.streamIDsExhausted {
            logger.debug("stream ids exhausted; retiring the connection")
            delegate.connectionRetiring(connectionID)
            if machine.closeRequested() { flushAndClose() }
        }
        return false
    }

    /// What the rate limiter allows now; when nothing, a wake-up once it allows one.
    @inlinable
    public func rateAllowance(now: NIODeadline, context: ChannelHandlerContext) -> Int {
        guard var limiter = rateLimiter else { return Int.max }
        let allowed = limiter.allowance(now: now)
        rateLimiter = limiter
        if allowed == 0, !rateWakeScheduled {
            rateWakeScheduled = true
            let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
            context.eventLoop.scheduleTask(in: limiter.waitForNext) {
                loopBound.value.rateWakeScheduled = false
                loopBound.value.wake()
            }
        }
        return allowed
    }

    /// One request: HEADERS (the exchange's block), then as much of its DATA as flow control allows now.
    @inlinable
    public func write(_ pooled: consuming Request, credential: Exchange.Credential, now: NIODeadline) {
        // Written into a local buffer, handed back at the end: each access to the stored property
        // would cost a dynamic exclusivity check.
        var buffer = outbound.take() ?? context?.channel.allocator.buffer(capacity: 16 * 1024) ?? ByteBuffer()
        let streamID = machine.openStream(now: now)
        let headerIndex = buffer.writerIndex
        HTTP2Wire.writeFrameHeaderBatched(
            length: 0,
            type: .headers,
            flags: HTTP2Wire.Flag.endHeaders,
            streamID: UInt32(Int32(streamID)),
            into: &buffer
        )
        let blockStart = buffer.writerIndex
        let (payload, answer) = exchange.writeHeaderBlock(
            of: pooled,
            credential: credential,
            encoder: &encoder,
            into: &buffer
        )
        let blockLength = buffer.writerIndex - blockStart
        let maximumFrameSize = windows.peerMaximumFrameSize
        if blockLength <= maximumFrameSize {
            HTTP2Wire.setFrameLength(blockLength, atHeaderIndex: headerIndex, in: &buffer)
        } else {
            Self.splitHeaderBlock(
                headerIndex: headerIndex,
                streamID: UInt32(Int32(streamID)),
                maximumFrameSize: maximumFrameSize,
                in: &buffer
            )
        }

        // The caller's own deadline stands; the pool's default one (from submission) is extended so that
        // the answer gets `answerTimeout` from now, whatever time the request spent queued.
        var answerDeadline = pooled.deadline
        if pooled.request.deadline == nil, let answerTimeout = configuration.answerTimeout {
            answerDeadline = max(answerDeadline, now + answerTimeout)
        }
        let length = payload.readableBytes
        let streamWindow = windows.initialStreamSend
        if windows.sendable(length, streamWindow: streamWindow) == length {
            HTTP2Wire.writeFrameHeaderBatched(
                length: length,
                type: .data,
                flags: HTTP2Wire.Flag.endStream,
                streamID: UInt32(Int32(streamID)),
                into: &buffer
            )
            buffer.writeImmutableBuffer(payload)
            outbound = buffer
            windows.sent(length)
            inFlight.insert(
                InFlight(
                    request: pooled,
                    answer: answer,
                    writtenAt: now,
                    answerDeadline: answerDeadline,
                    sendWindow: streamWindow - length
                ),
                for: streamID
            )
        } else {
            outbound = buffer
            inFlight.insert(
                InFlight(
                    request: pooled,
                    answer: answer,
                    writtenAt: now,
                    answerDeadline: answerDeadline,
                    sendWindow: streamWindow
                ),
                for: streamID
            )
            extras[streamID, default: StreamExtras()].unsentPayload = payload
            blockedStreams.append(streamID)
            sendBlockedData()
        }
    }

    /// A header block larger than the server's frame size: HEADERS and CONTINUATION frames (rare:
    /// only a server announcing a tiny SETTINGS_MAX_FRAME_SIZE, or very long header values).
    @inlinable
    public static func splitHeaderBlock(
        headerIndex: Int,
        streamID: UInt32,
        maximumFrameSize: Int,
        in buffer: inout ByteBuffer
    ) {
        var block = buffer.getSlice(
            at: headerIndex + HTTP2Wire.frameHeaderLength,
            length: buffer.writerIndex - headerIndex - HTTP2Wire.frameHeaderLength
        )!
        buffer.moveWriterIndex(to: headerIndex)
        var first = true
        while block.readableBytes > 0 || first {
            let length = min(block.readableBytes, maximumFrameSize)
            var piece = block.readSlice(length: length)!
            let last = block.readableBytes == 0
            HTTP2Wire.writeFrameHeader(
                length: length,
                type: first ? .headers : .continuation,
                flags: last ? HTTP2Wire.Flag.endHeaders : 0,
                streamID: streamID,
                into: &buffer
            )
            buffer.writeBuffer(&piece)
            first = false
        }
    }

    /// Sends waiting DATA, oldest stream first, as far as the windows allow.
    @inlinable
    public func sendBlockedData() {
        while let streamID = blockedStreams.first {
            guard let sendWindow = inFlight.read(streamID, { $0.sendWindow }),
                var payload = extras[streamID]?.unsentPayload
            else {
                blockedStreams.removeFirst()
                continue
            }
            let length = windows.sendable(payload.readableBytes, streamWindow: sendWindow)
            if length <= 0, payload.readableBytes > 0 { return }
            var piece = payload.readSlice(length: length)!
            let done = payload.readableBytes == 0
            HTTP2Wire.writeFrameHeader(
                length: length,
                type: .data,
                flags: done ? HTTP2Wire.Flag.endStream : 0,
                streamID: UInt32(Int32(streamID)),
                into: &outboundBuffer
            )
            outboundBuffer.writeBuffer(&piece)
            windows.sent(length)
            inFlight.update(streamID) { $0.sendWindow -= length }
            extras[streamID]!.unsentPayload = done ? nil : payload
            if done { blockedStreams.removeFirst() }
        }
    }

    @inlinable
    public func writeReset(_ streamID: HTTP2StreamID, code: HTTP2Wire.ErrorCode) {
        HTTP2Wire.writeFrameHeader(
            length: 4,
            type: .rstStream,
            flags: 0,
            streamID: UInt32(Int32(streamID)),
            into: &outboundBuffer
        )
        outboundBuffer.writeInteger(code.rawValue)
    }

    /// Abandons a request the caller cancelled: resets its stream and frees it.
    @inlinable
    public func cancel(poolRequestID: UInt64) -> Bool {
        guard let context, let streamID = inFlight.ids(where: { $0.request.poolRequestID == poolRequestID }).first,
            let entry = abandon(streamID)
        else {
            return false
        }
        // Free the stream in the pool's books before the caller hears about it.
        sendQueuedWork()
        flushOutbound(context: context)
        entry.request.fail(.cancelled)
        return true
    }

    /// Resets the stream and frees it; the caller completes the request (returned) afterwards.
    @inlinable
    @discardableResult
    public func abandon(_ streamID: HTTP2StreamID) -> InFlight? {
        guard let context, let entry = inFlight.remove(streamID) else { return nil }
        if !extras.isEmpty, extras.removeValue(forKey: streamID)?.unsentPayload != nil {
            blockedStreams.removeAll { $0 == streamID }
        }
        releasedSinceLastPull += 1
        writeReset(streamID, code: .cancel)
        closeStreamInMachine(streamID, now: context.eventLoop.now)
        return entry
    }

    /// Retire the connection for shutdown: finish open streams, then close.
    @inlinable
    public func closeGracefully() {
        guard context != nil else { return }
        if machine.closeRequested() { flushAndClose() }
    }
}
