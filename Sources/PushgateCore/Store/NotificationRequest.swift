public import Foundation

/// The id of a notification request: what the HTTP API answers with and what a delivery report is
/// looked up by.
///
/// 1 to 64 characters of `A-Z a-z 0-9 . _ -`, so it fits in a URL path and a log line unescaped.
/// ``generate(at:using:)`` makes ids that sort by creation time (12 hex digits of milliseconds since
/// 1970, then 16 random hex digits), so listing ids in order lists requests in arrival order.
public struct RequestID: Hashable, Sendable, Comparable, CustomStringConvertible {
    public static let maximumLength = 64
    public let value: String

    public init(_ value: String, field: String = "id") throws(ValidationError) {
        guard !value.isEmpty, value.utf8.count <= Self.maximumLength else {
            throw ValidationError(
                code: .invalidRequestID,
                field: field,
                message: "request id must be 1 to \(Self.maximumLength) characters"
            )
        }
        guard
            value.utf8.allSatisfy({ byte in
                switch byte {
                case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                    UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"):
                    true
                default: false
                }
            })
        else {
            throw ValidationError(
                code: .invalidRequestID,
                field: field,
                message: "request id may only contain letters, digits, '.', '_' and '-'"
            )
        }
        self.value = value
    }

    /// A time-ordered unique id: 12 hex digits of milliseconds since 1970, then 64 random bits.
    public static func generate(at date: Date, using generator: inout some RandomNumberGenerator) -> RequestID {
        let milliseconds = UInt64(max(0, (date.timeIntervalSince1970 * 1000).rounded(.down)))
        let random = generator.next() as UInt64
        return RequestID(unchecked: hex(milliseconds & 0xffff_ffff_ffff, random))
    }

    /// A time-ordered unique id from the system's random number generator.
    public static func generate(at date: Date) -> RequestID {
        var generator = PooledSystemRandomNumberGenerator()
        return generate(at: date, using: &generator)
    }

    init(unchecked value: String) { self.value = value }

    /// The 12 low hex digits of `time`, then the 16 of `random`, written straight into the string (every
    /// request makes one).
    private static func hex(_ time: UInt64, _ random: UInt64) -> String {
        String(unsafeUninitializedCapacity: 28) { buffer in
            func digit(_ nibble: UInt64) -> UInt8 {
                nibble < 10 ? UInt8(ascii: "0") + UInt8(nibble) : UInt8(ascii: "a") + UInt8(nibble - 10)
            }
            for index in 0..<12 { buffer[index] = digit((time >> UInt64(4 * (11 - index))) & 0xf) }
            for index in 0..<16 { buffer[12 + index] = digit((random >> UInt64(4 * (15 - index))) & 0xf) }
            return 28
        }
    }

    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.value < rhs.value }
    public var description: String { value }
}

extension ValidationError.Code {
    public static let invalidRequestID = ValidationError.Code("invalid_request_id")
}

/// A notification request as the ledger stores it: one payload, for the distinct devices of some groups
/// of one app and/or some tokens given directly.
///
/// The topic is not stored: it is the app's (configuration), as is the APNs environment.
public struct NotificationRequest: Hashable, Sendable {
    public var id: RequestID
    public var app: String
    /// Target groups of `app`. A group that never had a registration targets nothing and is listed in
    /// the report (``DeliveryReport/unknownGroups``); only a request whose groups are all unknown and
    /// that names no device is rejected (``StoreError/Code/unknownGroup``). Duplicates are ignored.
    /// Read back (``DeliveryLedger/request(_:)``), it lists the groups that existed, by name.
    public var groups: [String]
    /// Target tokens, sent to directly, registered or not. A token that is also a member of a target group
    /// gets the notification once; a token the registry knows as invalid for `app` is skipped.
    /// Duplicates are ignored.
    public var devices: [DeviceToken]
    public var pushType: PushType
    public var priority: Priority
    public var expiration: Expiration
    public var collapseID: CollapseID?
    public var payload: Payload
    /// The request's `fcm` object: overrides what is derived for FCM devices (docs/fcm.md). Stored with
    /// the request so that a resend after a restart builds the same message.
    public var fcm: FCMOverride?
    /// The request's `webpush` object: a merge patch over the payload for browsers (docs/webpush.md),
    /// stored with the request as `fcm` is.
    public var webPush: WebPushOverride?
    /// When the request was accepted.
    public var createdAt: Date
    /// The client's idempotency key and the fingerprint of what it sent (nil: none; the UDP ingress never
    /// has one). A store that finds the key stored for the same app within ``IdempotencyKey/window``
    /// stores nothing and answers the earlier request (``EnqueueResult/isReplay``) when the fingerprints
    /// match, and refuses the request (``StoreError/Code/idempotencyKeyReused``) when they differ.
    public var idempotency: Idempotency?

    public init(
        id: RequestID,
        app: String = Registration.defaultApp,
        groups: [String] = [],
        devices: [DeviceToken] = [],
        pushType: PushType = .alert,
        priority: Priority = .immediate,
        expiration: Expiration = .immediately,
        collapseID: CollapseID? = nil,
        payload: Payload,
        fcm: FCMOverride? = nil,
        webPush: WebPushOverride? = nil,
        createdAt: Date,
        idempotency: Idempotency? = nil
    ) {
        self.id = id
        self.app = app
        self.groups = groups
        self.devices = devices
        self.pushType = pushType
        self.priority = priority
        self.expiration = expiration
        self.collapseID = collapseID
        self.payload = payload
        self.fcm = fcm
        self.webPush = webPush
        self.createdAt = createdAt
        self.idempotency = idempotency
    }

    /// The moment after which nothing more is sent and pending retries count as failed ("expired"):
    /// nil for `.immediately` and `.storagePolicy`, whose retries the dispatcher's retry policy bounds.
    public var expiresAt: Date? {
        if case .at(let seconds) = expiration { return Date(timeIntervalSince1970: TimeInterval(seconds)) }
        return nil
    }
}

/// What ``DeliveryLedger/enqueue(_:)`` stored.
public struct EnqueueResult: Hashable, Sendable {
    public var id: RequestID
    /// Distinct valid devices of the target groups plus the direct tokens that are neither members of
    /// a target group nor known as invalid, counted when the request was stored. Fan-out reads the
    /// registry as it goes, so a device invalidated (or removed from a group) in between is skipped.
    public var targetCount: Int
    /// The groups named that the app does not have (they target nothing), in the request's order.
    public var unknownGroups: [String]
    /// True when nothing was stored because the request is a retry of one stored earlier (same app,
    /// idempotency key and fingerprint, within ``IdempotencyKey/window``): `id`, `targetCount` and
    /// `unknownGroups` are that request's, as its enqueue answered them.
    public var isReplay: Bool

    public init(id: RequestID, targetCount: Int, unknownGroups: [String] = [], isReplay: Bool = false) {
        self.id = id
        self.targetCount = targetCount
        self.unknownGroups = unknownGroups
        self.isReplay = isReplay
    }
}
