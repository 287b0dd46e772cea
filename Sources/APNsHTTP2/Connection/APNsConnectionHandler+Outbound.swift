import DequeModule
import Logging
import NIOCore
import NIOHPACK
import NIOHTTP2
import PushTransport
import PushgateCore

/// The outbound half of the connection handler: pulling work, HEADERS and DATA frames, flow control
/// of what is sent, the optional rate limit, resets and the graceful close.
extension APNsConnectionHandler {
    var outboundBuffer: ByteBuffer {
        get { outbound ?? ByteBuffer() }
        _modify {
            if outbound == nil { outbound = context?.channel.allocator.buffer(capacity: 16 * 1024) ?? ByteBuffer() }
            yield &outbound!
        }
    }

    func flushOutbound(context: ChannelHandlerContext) {
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
    func sendQueuedWork() {
        guard let context else { return }
        // While some DATA waits for window, new streams would only wait behind it.
        var available = blockedStreams.isEmpty ? machine.availableStreams : 0
        if rateLimiter != nil, available > 0 {
            available = min(available, rateAllowance(now: context.eventLoop.now, context: context))
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
                outcomeClass: .rejected,
                reason: .invalidProviderToken,
                transportFailure: .malformedResponse("provider token could not be signed")
            )
            for request in batch { request.complete(outcome) }
            releasedSinceLastPull += batch.count
            return
        }
        if let token, authorizationBlock?.token != token {
            // One literal per token (hourly), not one per request.
            var bytes = ByteBuffer()
            HPACKRequestEncoder.writeNotIndexed(
                staticNameIndex: HPACKRequestEncoder.StaticName.authorization,
                value: token.authorizationHeaderValue,
                into: &bytes
            )
            authorizationBlock = (token, bytes)
        }
        let now = context.eventLoop.now
        rateLimiter?.spend(batch.count)
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
    /// What the rate limiter allows now; when nothing, a wake-up once it allows one.
    func rateAllowance(now: NIODeadline, context: ChannelHandlerContext) -> Int {
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

    /// One request: HEADERS, then as much of its DATA as flow control allows now.
    func write(_ pooled: consuming PooledRequest, token: ProviderToken?, now: NIODeadline) {
        // Written into a local buffer, handed back at the end: each access to the stored property
        // would cost a dynamic exclusivity check.
        var buffer = outbound.take() ?? context?.channel.allocator.buffer(capacity: 16 * 1024) ?? ByteBuffer()
        let streamID = machine.openStream(now: now)
        let notification = pooled.request.notification
        let headerIndex = buffer.writerIndex
        HTTP2Wire.writeFrameHeaderBatched(
            length: 0,
            type: .headers,
            flags: HTTP2Wire.Flag.endHeaders,
            streamID: UInt32(Int32(streamID)),
            into: &buffer
        )
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

        let payload = notification.payload
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
                InFlight(request: pooled, providerToken: token, writtenAt: now, sendWindow: streamWindow - length),
                for: streamID
            )
        } else {
            outbound = buffer
            inFlight.insert(
                InFlight(request: pooled, providerToken: token, writtenAt: now, sendWindow: streamWindow),
                for: streamID
            )
            extras[streamID, default: StreamExtras()].unsentPayload = payload
            blockedStreams.append(streamID)
            sendBlockedData()
        }
    }

    /// The notification's shared fields (`:authority` first, a pseudo-header) as one cached block:
    /// encoded once per notification, and again only when the HPACK table changed in between.
    func writeSharedHeaders(of notification: PreparedNotification, into buffer: inout ByteBuffer) {
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
    static func splitHeaderBlock(headerIndex: Int, streamID: UInt32, maximumFrameSize: Int, in buffer: inout ByteBuffer)
    {
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
    func sendBlockedData() {
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

    func writeReset(_ streamID: HTTP2StreamID, code: HTTP2Wire.ErrorCode) {
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
    func abandon(_ streamID: HTTP2StreamID) -> InFlight? {
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
    func closeGracefully() {
        guard context != nil else { return }
        if machine.closeRequested() { flushAndClose() }
    }
}
