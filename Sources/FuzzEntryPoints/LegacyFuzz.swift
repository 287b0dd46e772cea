import APNsLegacy
import NIOCore
import NIOEmbedded

/// The legacy binary decoders (`LegacyNotificationDecoder`, `LegacyErrorResponseDecoder`,
/// `LegacyFeedbackDecoder`) in a real `ByteToMessageHandler`:
/// - the same messages and the same error whatever way the stream is split;
/// - every decoded message, written back, decodes to the same message, without an error.
///
/// The first byte chooses the decoder, the second where the stream is cut; the rest is the stream.
enum LegacyFuzz {
    private static let target = FuzzTarget.legacy

    static func run(_ input: UnsafeRawBufferPointer) throws(FuzzViolation) {
        guard input.count >= 2 else { return }
        let stream = [UInt8](input.dropFirst(2))
        let cut = stream.isEmpty ? 0 : Int(input[1]) % (stream.count + 1)
        switch input[0] % 3 {
        case 0:
            try check(stream, cut: cut, { LegacyNotificationDecoder() }) { Self.write($0, into: &$1) }
        case 1:
            try check(stream, cut: cut, { LegacyErrorResponseDecoder() }) { _ = $0.write(into: &$1) }
        default:
            try check(stream, cut: cut, { LegacyFeedbackDecoder() }) { _ = $0.write(into: &$1) }
        }
    }

    private struct Outcome<Message: Equatable>: Equatable {
        var messages: [Message] = []
        var error: String?
    }

    private static func check<Decoder: LegacyMessageDecoder>(
        _ stream: [UInt8],
        cut: Int,
        _ makeDecoder: () -> Decoder,
        write: (Decoder.InboundOut, inout ByteBuffer) -> Void
    ) throws(FuzzViolation) where Decoder.InboundOut: Equatable {
        let whole = decode([stream[...]], makeDecoder())
        let split = decode([stream[..<cut], stream[cut...]], makeDecoder())
        try expect(whole == split, target, "cut at \(cut): \(split) instead of \(whole)")

        var written = ByteBuffer()
        for message in whole.messages { write(message, &written) }
        let again = decode([Array(written.readableBytesView)[...]], makeDecoder())
        try expect(again == Outcome(messages: whole.messages), target, "written back: \(again) instead of \(whole)")
    }

    private static func decode<Decoder: LegacyMessageDecoder>(
        _ pieces: [ArraySlice<UInt8>],
        _ decoder: Decoder
    ) -> Outcome<Decoder.InboundOut> where Decoder.InboundOut: Equatable {
        let channel = EmbeddedChannel(handler: ByteToMessageHandler(decoder))
        defer { _ = try? channel.finish() }
        var outcome = Outcome<Decoder.InboundOut>()
        func drain() {
            do {
                while let message = try channel.readInbound(as: Decoder.InboundOut.self) {
                    outcome.messages.append(message)
                }
            } catch {
                if outcome.error == nil { outcome.error = "\(error)" }
                drain()
            }
        }
        for piece in pieces where outcome.error == nil {
            do {
                try channel.writeInbound(ByteBuffer(bytes: piece))
            } catch {
                outcome.error = "\(error)"
            }
            drain()
        }
        if outcome.error == nil {
            channel.pipeline.fireChannelInactive()
            drain()
        }
        return outcome
    }

    /// A notification in its own format; a frame with its items in id order.
    private static func write(_ notification: LegacyNotification, into buffer: inout ByteBuffer) {
        func lengthPrefixed(_ bytes: [UInt8]) {
            buffer.writeInteger(UInt16(truncatingIfNeeded: bytes.count))
            buffer.writeBytes(bytes)
        }
        buffer.writeInteger(notification.format.rawValue)
        switch notification.format {
        case .simple, .enhanced:
            if notification.format == .enhanced {
                buffer.writeInteger(notification.identifier ?? 0)
                buffer.writeInteger(notification.expiry ?? 0)
            }
            lengthPrefixed(notification.token)
            lengthPrefixed(notification.payload)
        case .frame:
            var items = ByteBuffer()
            items.writeInteger(LegacyFrameItem.deviceToken.rawValue)
            items.writeInteger(UInt16(truncatingIfNeeded: notification.token.count))
            items.writeBytes(notification.token)
            items.writeInteger(LegacyFrameItem.payload.rawValue)
            items.writeInteger(UInt16(truncatingIfNeeded: notification.payload.count))
            items.writeBytes(notification.payload)
            if let identifier = notification.identifier {
                items.writeInteger(LegacyFrameItem.notificationIdentifier.rawValue)
                items.writeInteger(UInt16(4))
                items.writeInteger(identifier)
            }
            if let expiry = notification.expiry {
                items.writeInteger(LegacyFrameItem.expirationDate.rawValue)
                items.writeInteger(UInt16(4))
                items.writeInteger(expiry)
            }
            if let priority = notification.priority {
                items.writeInteger(LegacyFrameItem.priority.rawValue)
                items.writeInteger(UInt16(1))
                items.writeInteger(priority)
            }
            buffer.writeInteger(UInt32(items.readableBytes))
            buffer.writeBuffer(&items)
        }
    }
}
