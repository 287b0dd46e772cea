import Foundation
import NIOCore
import NIOHPACK

/// How a connection authenticated, decided once per connection from its TLS handshake.
enum ConnectionAuthentication: Sendable {
    /// The simulator has neither a client CA nor token keys: every request is authorized.
    case open
    /// The client presented a certificate signed by the configured client CA. `bundleID` is the
    /// subject's UID attribute (nil when the certificate has none).
    case certificate(bundleID: String?)
    /// Token keys are configured and the client presented no certificate: every request needs a
    /// valid `authorization: bearer <JWT>`.
    case providerToken(ProviderTokenTracker)
}

/// A request that passed validation.
struct ValidatedNotification: Equatable, Sendable {
    var deviceToken: String
    var topic: String
    var pushType: SimulatedPushType
}

/// Validates a notification request as Apple documents it, in this order (Apple does not
/// document its order; this one reports the most fundamental problem first):
///
/// 1. `:method` is POST (405 `MethodNotAllowed`); `:path` is `/3/device/<token>` (404 `BadPath`),
///    with a token (400 `MissingDeviceToken`) of an even number of hex digits (400 `BadDeviceToken`).
/// 2. No header appears twice (400 `DuplicateHeaders`).
/// 3. Credentials: provider token (403 `MissingProviderToken`, `InvalidProviderToken`,
///    `ExpiredProviderToken`, 429 `TooManyProviderTokenUpdates`) or client certificate
///    (403 `BadCertificate` when it names no topic in its subject UID).
/// 4. `apns-topic` present (400 `MissingTopic`; on a certificate connection an absent topic
///    defaults to the certificate's UID, as Apple documents).
/// 5. `apns-push-type` known (400 `InvalidPushType`; absent means `alert`), and the topic carries
///    exactly that type's suffix (400 `BadTopic`: "The apns-topic value is invalid").
/// 6. Certificate connections: the topic's bundle ID is the certificate's UID (400
///    `TopicDisallowed`); `location` pushes need token authentication (400 `TopicDisallowed`).
/// 7. `apns-priority` is 1, 5 or 10, and not 10 for `background` (400 `BadPriority`).
/// 8. `apns-expiration` is a non-negative integer (400 `BadExpirationDate`).
/// 9. `apns-collapse-id` is at most 64 bytes (400 `BadCollapseId`).
/// 10. `apns-id` is a canonical UUID, 8-4-4-4-12 hex digits of either case (400 `BadMessageId`).
/// 11. Payload not empty (400 `PayloadEmpty`), at most 4096 bytes, 5120 for `voip` (413
///     `PayloadTooLarge`), and a JSON object. Apple lists no reason for a payload that is not a
///     JSON object; the simulator answers 400 `PayloadEmpty`, the closest documented reason (such a
///     payload carries no notification content; the legacy binary interface reported an unusable
///     payload as "Missing payload" too).
struct APNsRequestValidator: Sendable {
    static let devicePathPrefix = "/3/device/"
    static let maximumCollapseIDBytes = 64

    let tokenVerifier: ProviderTokenVerifier

    /// Step 1: method and path. Returns the device token (as sent).
    static func route(method: String?, path: String?) -> Result<String, SimulatedRejection> {
        guard method == "POST" else { return .failure(.init(.methodNotAllowed)) }
        guard let path, path.utf8.starts(with: Self.devicePathPrefix.utf8) else { return .failure(.init(.badPath)) }
        // One pass over the bytes (Foundation's `contains(_: StringProtocol)` would cost a
        // CFString search per call on this hot path).
        let token = path.utf8.dropFirst(Self.devicePathPrefix.utf8.count)
        var isHex = true
        for byte in token {
            switch byte {
            case UInt8(ascii: "/"), UInt8(ascii: "?"):
                return .failure(.init(.badPath))
            case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"),
                UInt8(ascii: "A")...UInt8(ascii: "F"):
                continue
            default:
                isHex = false
            }
        }
        guard !token.isEmpty else { return .failure(.init(.missingDeviceToken)) }
        guard isHex, token.count % 2 == 0 else { return .failure(.init(.badDeviceToken)) }
        return .success(String(Substring(token)))
    }

    /// Steps 2 to 11 for a request whose route is valid.
    func validate(
        deviceToken: String,
        headers: HPACKHeaders,
        payload: ByteBufferView,
        payloadLength: Int,
        authentication: inout ConnectionAuthentication,
        now: Date
    ) -> Result<ValidatedNotification, SimulatedRejection> {
        if Self.hasDuplicateHeaders(headers) { return .failure(.init(.duplicateHeaders)) }

        // 3. Credentials.
        var certificateBundleID: String?
        var isCertificateConnection = false
        switch authentication {
        case .open:
            break
        case .certificate(let bundleID):
            guard let bundleID else { return .failure(.init(.badCertificate)) }
            certificateBundleID = bundleID
            isCertificateConnection = true
        case .providerToken(var tracker):
            let decision = tracker.requestReceived(
                authorization: headers.first(name: "authorization"),
                now: now,
                verifier: self.tokenVerifier
            )
            authentication = .providerToken(tracker)
            if case .rejected(let reason) = decision { return .failure(.init(reason)) }
        }

        // 4, 5. Topic and push type.
        let pushType: SimulatedPushType
        if let pushTypeValue = headers.first(name: "apns-push-type") {
            guard let known = SimulatedPushType(rawValue: pushTypeValue) else {
                return .failure(.init(.invalidPushType))
            }
            pushType = known
        } else {
            pushType = .alert
        }
        let topic: String
        if let topicValue = headers.first(name: "apns-topic"), !topicValue.isEmpty {
            topic = topicValue
        } else if let certificateBundleID {
            topic = certificateBundleID + pushType.topicSuffix
        } else {
            return .failure(.init(.missingTopic))
        }
        guard let bundleID = Self.bundleID(of: topic, for: pushType) else {
            return .failure(.init(.badTopic))
        }

        // 6. Certificate topic binding.
        if isCertificateConnection {
            guard bundleID == certificateBundleID, !pushType.requiresTokenAuthentication else {
                return .failure(.init(.topicDisallowed))
            }
        }

        // 7. Priority.
        if let priority = headers.first(name: "apns-priority") {
            guard priority == "10" || priority == "5" || priority == "1" else {
                return .failure(.init(.badPriority))
            }
            if pushType == .background && priority == "10" { return .failure(.init(.badPriority)) }
        }

        // 8. Expiration.
        if let expiration = headers.first(name: "apns-expiration") {
            guard !expiration.isEmpty, expiration.utf8.count <= 18,
                expiration.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 })
            else {
                return .failure(.init(.badExpirationDate))
            }
        }

        // 9. Collapse ID.
        if let collapseID = headers.first(name: "apns-collapse-id"),
            collapseID.utf8.count > Self.maximumCollapseIDBytes
        {
            return .failure(.init(.badCollapseId))
        }

        // 10. apns-id.
        if let apnsID = headers.first(name: "apns-id"), !Self.isCanonicalUUID(apnsID) {
            return .failure(.init(.badMessageId))
        }

        // 11. Payload.
        guard payloadLength > 0 else { return .failure(.init(.payloadEmpty)) }
        guard payloadLength <= pushType.maximumPayloadBytes else { return .failure(.init(.payloadTooLarge)) }
        guard Self.isJSONObject(payload) else { return .failure(.init(.payloadEmpty)) }

        return .success(ValidatedNotification(deviceToken: deviceToken, topic: topic, pushType: pushType))
    }

    /// The bundle ID of `topic` when it carries exactly the suffix `pushType` requires, else nil.
    static func bundleID(of topic: String, for pushType: SimulatedPushType) -> String? {
        let suffix = pushType.topicSuffix
        if suffix.isEmpty {
            // A bundle ID topic must not carry another push type's suffix.
            if SimulatedPushType.knownSuffixes.contains(where: { topic.hasSuffix($0) }) { return nil }
            return topic
        }
        guard topic.hasSuffix(suffix), topic.count > suffix.count else { return nil }
        let bundleID = String(topic.dropLast(suffix.count))
        return bundleID
    }

    static func hasDuplicateHeaders(_ headers: HPACKHeaders) -> Bool {
        var seen: [String] = []
        seen.reserveCapacity(headers.count)
        for (name, _, _) in headers {
            if seen.contains(name) { return true }
            seen.append(name)
        }
        return false
    }

    /// 8-4-4-4-12 hexadecimal digits separated by hyphens.
    static func isCanonicalUUID(_ value: String) -> Bool {
        let bytes = Array(value.utf8)
        guard bytes.count == 36 else { return false }
        for (index, byte) in bytes.enumerated() {
            switch index {
            case 8, 13, 18, 23:
                guard byte == UInt8(ascii: "-") else { return false }
            default:
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"),
                    UInt8(ascii: "A")...UInt8(ascii: "F"):
                    continue
                default:
                    return false
                }
            }
        }
        return true
    }

    static func isJSONObject(_ payload: ByteBufferView) -> Bool {
        guard let object = try? JSONSerialization.jsonObject(with: Data(payload)) else { return false }
        return object is [String: Any]
    }
}
