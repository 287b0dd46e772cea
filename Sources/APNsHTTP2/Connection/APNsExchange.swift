import APNsTransport
package import NIOCore
package import NIOHPACK
package import PushTransport
package import PushgateCore

/// APNs's side of an HTTP/2 push connection: a request is `:path /3/device/<token>`, the notification's
/// shared header block (encoded once per notification), the provider token's `authorization` (one
/// literal per token) and `apns-id`; an answer is `:status`, `apns-id`, `apns-unique-id` and a JSON
/// error body, classified as an `APNsOutcome`.
package struct APNsExchange: HTTP2PushExchange {
    package typealias Request = PooledRequest
    package typealias Credential = ProviderToken?
    package typealias Extra = String
    package typealias Outcome = APNsOutcome

    /// What a stream keeps: the provider token it was sent with and its answer's headers.
    package struct Answer {
        var providerToken: ProviderToken?
        var status: Int?
        var apnsID: String?
    }

    /// An answer's header block: read by ``HPACKAnswerReader`` (the common case) or decoded in full.
    package enum HeaderFields {
        case read(HPACKAnswerReader.Fields)
        case decoded(HPACKHeaders)
    }

    package static var metadataPrefix: String { "apns" }

    /// `:authority`
    let authority: String
    let delegate: any APNsExchangeDelegate
    /// GOAWAY's debug data, when it carried an APNs reason (e.g. `BadCertificateEnvironment`).
    var goAwayReason: APNsReason?
    /// The last notification's shared header block and the table generation it was encoded at.
    var sharedBlock: (notification: PreparedNotification, generation: UInt64, bytes: ByteBuffer)?
    /// The `authorization` literal of the current provider token (it changes hourly).
    var authorizationBlock: (token: ProviderToken, bytes: ByteBuffer)?

    package init(authority: String, delegate: any APNsExchangeDelegate) {
        self.authority = authority
        self.delegate = delegate
    }

    // MARK: Requests

    package mutating func credential(for batch: [PooledRequest]) -> HTTP2PushBatchCredential<ProviderToken?> {
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
            return .failed
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
        return .write(token)
    }

    package mutating func writeHeaderBlock(
        of pooled: borrowing PooledRequest,
        credential token: ProviderToken?,
        encoder: inout HPACKRequestEncoder,
        into buffer: inout ByteBuffer
    ) -> (body: ByteBuffer, answer: Answer) {
        let notification = pooled.request.notification
        encoder.writePendingSizeUpdate(into: &buffer)
        // Apple: `:path` and `authorization` as literals without indexing; they change per request / per hour.
        HPACKRequestEncoder.writeMethodSchemeAndPath(device: pooled.request.deviceToken, into: &buffer)
        writeSharedHeaders(of: notification, encoder: &encoder, into: &buffer)
        if token != nil, authorizationBlock != nil {
            buffer.writeImmutableBuffer(authorizationBlock!.bytes)
        }
        if let apnsID = pooled.request.apnsID {
            HPACKRequestEncoder.writeNotIndexed(name: "apns-id", value: apnsID.value, into: &buffer)
        }
        return (notification.payload, Answer(providerToken: token))
    }

    /// The notification's shared fields (`:authority` first, a pseudo-header) as one cached block:
    /// encoded once per notification, and again only when the HPACK table changed in between.
    mutating func writeSharedHeaders(
        of notification: PreparedNotification,
        encoder: inout HPACKRequestEncoder,
        into buffer: inout ByteBuffer
    ) {
        // Compared field by field: binding the cached tuple would retain and release its references per request.
        if sharedBlock?.notification === notification, sharedBlock?.generation == encoder.generation {
            buffer.writeImmutableBuffer(sharedBlock!.bytes)
            return
        }
        let generation = encoder.generation
        var block = ByteBuffer()
        encoder.writeIndexable(name: ":authority", value: authority, into: &block)
        for (name, value) in notification.headerFields {
            encoder.writeIndexable(name: name, value: value, into: &block)
        }
        buffer.writeImmutableBuffer(block)
        // Reusable only if encoding it changed nothing: the next device's block will be all indices.
        sharedBlock = encoder.generation == generation ? (notification, generation, block) : nil
    }

    // MARK: Answers

    package mutating func decodeHeaders(
        _ block: inout ByteBuffer,
        decoder: inout HPACKDecoder,
        tracked: Bool
    ) throws -> HeaderFields? {
        if let fields = HPACKAnswerReader.read(block, maximumHeaderListSize: decoder.maxHeaderListSize) {
            // The decoder sees only what changes its table (even for a stream we no longer track).
            if var insertions = fields.tableInsertions { _ = try decoder.decodeHeaders(from: &insertions) }
            return tracked ? .read(fields) : nil
        }
        let headers = try decoder.decodeHeaders(from: &block)
        return tracked ? .decoded(headers) : nil
    }

    package mutating func read(
        _ fields: HeaderFields,
        into answer: inout Answer,
        of pooled: borrowing PooledRequest
    ) -> String? {
        switch fields {
        case .decoded(let headers):
            var uniqueID: String?
            for (name, value, _) in headers {
                switch name {
                case ":status": answer.status = Int(value)
                case "apns-id": answer.apnsID = value
                case "apns-unique-id": uniqueID = value
                default: continue
                }
            }
            return uniqueID
        case .read(let fields):
            if fields.hasStatus { answer.status = fields.status }
            if let bytes = fields.apnsID {
                // The `apns-id` String reused when the answer echoes the id the request was sent with, as
                // APNs does. (APNs makes up a fresh one for every other answer: nothing else repeats.)
                if let sent = pooled.request.apnsID?.value, Self.bytes(bytes, equal: sent) {
                    answer.apnsID = sent
                } else {
                    answer.apnsID = String(decoding: bytes.readableBytesView, as: UTF8.self)
                }
            }
            return fields.apnsUniqueID
        }
    }

    static func bytes(_ buffer: ByteBuffer, equal string: String) -> Bool {
        buffer.withUnsafeReadableBytes { bytes in
            var string = string
            return string.withUTF8 { utf8 in utf8.count == bytes.count && utf8.elementsEqual(bytes) }
        }
    }

    /// Classifies the answer, or resends it when the answer says the connection, not the
    /// notification, was at fault.
    package mutating func finish(
        _ pooled: borrowing PooledRequest,
        answer: Answer,
        body: ByteBuffer?,
        extra apnsUniqueID: String?,
        roundTrip: TimeAmount
    ) -> (HTTP2PushStreamDisposition<PooledRequest, APNsOutcome>, retireConnection: String?) {
        delegate.streamAnswered(roundTrip: roundTrip)
        guard let status = answer.status else {
            return (.complete(.failed(.malformedResponse("no :status"))), nil)
        }
        var reason: APNsReason? = nil
        var timestamp: Int64? = nil
        if status != 200, let body {
            let parsed = APNsErrorBody(parsing: body.readableBytesView)
            (reason, timestamp) = (parsed.reason, parsed.timestamp)
        }
        let outcome = APNsOutcome.answered(
            status: status,
            reason: reason,
            apnsID: answer.apnsID,
            apnsUniqueID: apnsUniqueID,
            invalidatedAtMilliseconds: timestamp
        )
        switch reason {
        case .expiredProviderToken?:
            if let token = answer.providerToken { delegate.providerTokenRejectedAsExpired(token) }
            if !pooled.retriedAfterExpiredToken {
                var retry = copy pooled
                retry.retriedAfterExpiredToken = true
                return (.requeue(retry, because: .credentialRefused), nil)
            }
        case .shutdown?, .idleTimeout?, .tooManyProviderTokenUpdates?:
            // The connection is the problem: stop using it, and resend this request once elsewhere.
            if !pooled.retriedAfterConnectionFatal {
                var retry = copy pooled
                retry.retriedAfterConnectionFatal = true
                return (.requeue(retry, because: .streamRefused), "\(reason!)")
            }
            return (.complete(outcome), "\(reason!)")
        default:
            break
        }
        return (.complete(outcome), nil)
    }

    package mutating func complete(_ pooled: borrowing PooledRequest, with outcome: APNsOutcome) {
        pooled.complete(outcome)
    }

    package mutating func goAwayReceived(debugData: ByteBuffer) -> String? {
        guard let reason = APNsErrorBody(parsing: debugData.readableBytesView).reason else { return nil }
        goAwayReason = reason
        return reason.rawValue
    }

    package mutating func connectionLost(_ pooled: borrowing PooledRequest) {
        var outcome = APNsOutcome.failed(.connectionLost)
        if let goAwayReason {
            outcome.reason = goAwayReason
            outcome.outcomeClass = goAwayReason.outcomeClass == .rejected ? .rejected : .retryable
        }
        pooled.complete(outcome)
    }
}
