public import NIOCore
public import PushgateCore

/// A notification as `APNsConnectionHandler` holds it: `PreparedNotification`'s `headerFields` and
/// `payload`, which are internal to `APNsClient`, built from the same public inputs.
public final class MirroredNotification: Sendable {
    let headerFields: [(name: String, value: String)]
    let payload: ByteBuffer

    public init(_ content: NotificationContent) {
        headerFields = content.headerFields
        payload = ByteBuffer(bytes: content.payload.bytes)
    }
}

/// The request-writing half of `APNsConnectionHandler` (`sendQueuedWork`'s token step, `write(_:token:now:)`
/// and `writeSharedHeaders(of:)`), reachable from the benchmarks.
///
/// `HTTP2Wire.swift` and `HPACKRequestEncoder.swift` in this folder are symbolic links to the client's
/// files, so the encoding measured is the client's own. The handler itself needs the whole `APNsClient`
/// module (pool, state machine, channel), so the few lines that assemble a request from those pieces are
/// repeated here, in the same order: if `write(...)` changes, this must follow. Left out on purpose:
/// the stream bookkeeping (`machine.openStream`, the `inFlight` entry), flow control's blocked path
/// and CONTINUATION splitting (neither happens with APNs' 16 KiB frames and a 133-byte payload).
public struct APNsRequestWriter {
    private var encoder = HPACKRequestEncoder()
    private let authority: String
    private var sharedBlock: (notification: MirroredNotification, generation: UInt64, bytes: ByteBuffer)?
    private var authorizationBlock: (token: ProviderToken, bytes: ByteBuffer)?
    private var nextStreamID: UInt32 = 1
    private var token: ProviderToken?

    public init(authority: String) {
        self.authority = authority
    }

    /// `sendQueuedWork`: the `authorization` literal is encoded once per provider token, not per request.
    public mutating func use(_ token: ProviderToken) {
        if authorizationBlock?.token != token {
            var bytes = ByteBuffer()
            HPACKRequestEncoder.writeNotIndexed(
                staticNameIndex: HPACKRequestEncoder.StaticName.authorization, value: token.authorizationHeaderValue, into: &bytes)
            authorizationBlock = (token, bytes)
        }
        self.token = token
    }

    /// One request's header block (no frame header), as `write(...)` writes it after the HEADERS frame header.
    public mutating func writeHeaderBlock(to deviceToken: DeviceToken, of notification: MirroredNotification, into buffer: inout ByteBuffer) {
        encoder.writePendingSizeUpdate(into: &buffer)
        buffer.writeInteger(0x83 as UInt8)  // :method POST (static 3)
        buffer.writeInteger(0x87 as UInt8)  // :scheme https (static 7)
        HPACKRequestEncoder.writePath(deviceHex: deviceToken.hex, into: &buffer)
        writeSharedHeaders(of: notification, into: &buffer)
        if token != nil, let authorization = authorizationBlock?.bytes {
            buffer.writeImmutableBuffer(authorization)
        }
    }

    /// One request's frames: HEADERS (END_HEADERS) then DATA (END_STREAM) with the payload, on the next
    /// client stream id. Returns that stream id.
    @discardableResult
    public mutating func writeRequest(to deviceToken: DeviceToken, of notification: MirroredNotification, into buffer: inout ByteBuffer) -> UInt32 {
        let streamID = nextStreamID
        nextStreamID &+= 2
        let headerIndex = buffer.writerIndex
        HTTP2Wire.writeFrameHeader(length: 0, type: .headers, flags: HTTP2Wire.Flag.endHeaders, streamID: streamID, into: &buffer)
        let blockStart = buffer.writerIndex
        writeHeaderBlock(to: deviceToken, of: notification, into: &buffer)
        let blockLength = buffer.writerIndex - blockStart
        precondition(blockLength <= HTTP2Wire.defaultMaximumFrameSize, "CONTINUATION is not mirrored")
        HTTP2Wire.setFrameLength(blockLength, atHeaderIndex: headerIndex, in: &buffer)

        let payload = notification.payload
        let length = payload.readableBytes
        precondition(length <= HTTP2Wire.defaultMaximumFrameSize, "flow-control blocking is not mirrored")
        HTTP2Wire.writeFrameHeader(length: length, type: .data, flags: HTTP2Wire.Flag.endStream, streamID: streamID, into: &buffer)
        buffer.writeImmutableBuffer(payload)
        return streamID
    }

    private mutating func writeSharedHeaders(of notification: MirroredNotification, into buffer: inout ByteBuffer) {
        if let cached = sharedBlock, cached.notification === notification, cached.generation == encoder.generation {
            buffer.writeImmutableBuffer(cached.bytes)
            return
        }
        let generation = encoder.generation
        var block = ByteBuffer()
        encoder.writeIndexable(name: ":authority", value: authority, into: &block)
        for (name, value) in notification.headerFields {
            encoder.writeIndexable(name: name, value: value, into: &block)
        }
        buffer.writeImmutableBuffer(block)
        sharedBlock = encoder.generation == generation ? (notification, generation, block) : nil
    }
}
