/// The push service a device is reached through. A registration names it (`"platform": "fcm"`);
/// without one a device is an APNs device, as with pushd.
public enum PushPlatform: String, Hashable, Sendable, CaseIterable, Comparable, CustomStringConvertible {
    case apns
    case fcm
    /// A browser's push subscription (RFC 8030): its token is ``DeviceToken/init(webPush:)``'s form.
    case webpush

    public var description: String { rawValue }

    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// A device's address on its push service: the platform and the token that service knows it by.
///
/// - APNs: kept as lower-case hexadecimal (the form APNs' `:path` carries and the registry stores).
///   Apple says not to assume a token size. Today's tokens are 32 bytes; the legacy frame format allowed
///   up to 100. We accept 8 to 100 bytes of even-length hex, case-insensitively, and normalise to lower
///   case so that `ABCD…` and `abcd…` are one device.
/// - FCM: a registration token, opaque and case-sensitive, kept exactly as given (see ``init(fcm:field:)``).
///
/// Two tokens are one device only on the same platform.
public struct DeviceToken: Hashable, Sendable, Comparable, CustomStringConvertible {
    public static let minimumByteCount = 8
    public static let maximumByteCount = 100
    /// FCM registration tokens are about 150-200 characters today; Google promises no length.
    public static let fcmLengthRange = 32...1024

    public let platform: PushPlatform
    /// The token as its service takes it: lower-case hex for APNs, the registration token for FCM.
    public let value: String

    /// The APNs token's hex form. Only meaningful for ``PushPlatform/apns`` tokens.
    public var hex: String { value }

    /// Builds a token for `platform` from its text form (hex for APNs, the registration token for FCM).
    public init(platform: PushPlatform, value: String, field: String = "device") throws(ValidationError) {
        switch platform {
        case .apns: try self.init(hex: value, field: field)
        case .fcm: try self.init(fcm: value, field: field)
        case .webpush: try self.init(webPushValue: value, field: field)
        }
    }

    /// An FCM registration token: URL-safe characters (`A-Z a-z 0-9 - _`) plus `:` and `.`, which
    /// Google's tokens contain, 32 to 1024 characters.
    public init(fcm input: String, field: String = "device") throws(ValidationError) {
        let utf8 = input.utf8
        guard Self.fcmLengthRange.contains(utf8.count) else {
            throw ValidationError(
                code: .invalidToken,
                field: field,
                message:
                    "FCM registration token must be \(Self.fcmLengthRange.lowerBound) to \(Self.fcmLengthRange.upperBound) characters, got \(utf8.count)"
            )
        }
        for byte in utf8 {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: ":"),
                UInt8(ascii: "."):
                continue
            default:
                throw ValidationError(
                    code: .invalidToken,
                    field: field,
                    message: "FCM registration token may hold only A-Z, a-z, 0-9, '-', '_', ':' and '.'"
                )
            }
        }
        self.platform = .fcm
        self.value = input
    }

    /// An APNs device token from its hex form.
    public init(hex input: String, field: String = "device") throws(ValidationError) {
        let utf8 = input.utf8
        guard !utf8.isEmpty else {
            throw ValidationError(code: .invalidToken, field: field, message: "device token is empty")
        }
        guard utf8.count % 2 == 0 else {
            throw ValidationError(
                code: .invalidToken,
                field: field,
                message: "device token must have an even number of hex digits (got \(utf8.count))"
            )
        }
        let bytes = utf8.count / 2
        guard bytes >= Self.minimumByteCount, bytes <= Self.maximumByteCount else {
            throw ValidationError(
                code: .invalidToken,
                field: field,
                message:
                    "device token must be \(Self.minimumByteCount) to \(Self.maximumByteCount) bytes (\(Self.minimumByteCount * 2) to \(Self.maximumByteCount * 2) hex digits), got \(utf8.count) digits"
            )
        }
        var needsLowering = false
        for byte in utf8 {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"): continue
            case UInt8(ascii: "A")...UInt8(ascii: "F"): needsLowering = true
            default:
                throw ValidationError(
                    code: .invalidToken,
                    field: field,
                    message: "device token must be hexadecimal (0-9, a-f)"
                )
            }
        }
        self.platform = .apns
        self.value = needsLowering ? input.lowercased() : input
    }

    /// The raw bytes of an APNs token, as the legacy binary protocol carries them.
    public var bytes: [UInt8] {
        var result = [UInt8]()
        result.reserveCapacity(hex.utf8.count / 2)
        var high: UInt8 = 0
        for (index, byte) in hex.utf8.enumerated() {
            let nibble = byte <= UInt8(ascii: "9") ? byte &- UInt8(ascii: "0") : byte &- UInt8(ascii: "a") &+ 10
            if index % 2 == 0 { high = nibble } else { result.append(high << 4 | nibble) }
        }
        return result
    }

    /// Builds a token from raw bytes (legacy feedback service tuples).
    public init(bytes: some Collection<UInt8>, field: String = "device") throws(ValidationError) {
        let digits: [UInt8] = Array("0123456789abcdef".utf8)
        var hex = ""
        hex.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            hex.unicodeScalars.append(Unicode.Scalar(digits[Int(byte >> 4)]))
            hex.unicodeScalars.append(Unicode.Scalar(digits[Int(byte & 0x0f)]))
        }
        try self.init(hex: hex, field: field)
    }

    /// The first eight characters and an ellipsis (FCM tokens prefixed `fcm:`): what logs show.
    public var shortened: String {
        switch platform {
        case .apns: String(value.prefix(8)) + "…"
        case .fcm: "fcm:" + String(value.prefix(8)) + "…"
        // An endpoint with its keys lets anyone push to the browser: its end only, as WebPushSubscription shows it.
        case .webpush: "webpush:…" + String(webPushEndpoint.suffix(8))
        }
    }

    public var description: String { shortened }

    /// By platform, then token. Not the order the stores page failures in: that is the byte order of
    /// ``storageKey``, which interleaves the platforms (see ``PushStore/failures(of:after:limit:)``).
    public static func < (lhs: Self, rhs: Self) -> Bool {
        lhs.platform != rhs.platform ? lhs.platform < rhs.platform : lhs.value < rhs.value
    }
}

extension DeviceToken {
    /// What marks an FCM token's ``storageKey``. `:` is never hex, so no APNs key starts with it.
    package static let fcmStoragePrefix = "fcm:"

    /// The platform-qualified text the stores keep in their token columns: the hex for APNs (as every
    /// release before FCM stored it, so existing rows read back as APNs devices), `"fcm:" + value` for FCM.
    /// One text column then keeps keys, indexes and orderings as they were, and the same text registered
    /// on both platforms is two devices.
    package var storageKey: String {
        switch platform {
        case .apns: value
        case .fcm: Self.fcmStoragePrefix + value
        case .webpush: Self.webPushStoragePrefix + value
        }
    }

    /// What marks a Web Push subscription's ``storageKey``.
    package static let webPushStoragePrefix = "webpush:"

    /// Reads a ``storageKey`` back: `fcm:` then an FCM registration token, `webpush:` then a subscription
    /// (trusted as stored: it was validated when registered), else APNs hex.
    package init(storageKey: String, field: String = "device") throws(ValidationError) {
        if storageKey.hasPrefix(Self.webPushStoragePrefix) {
            self.init(storedWebPush: String(storageKey.dropFirst(Self.webPushStoragePrefix.count)))
        } else if storageKey.hasPrefix(Self.fcmStoragePrefix) {
            try self.init(fcm: String(storageKey.dropFirst(Self.fcmStoragePrefix.count)), field: field)
        } else {
            try self.init(hex: storageKey, field: field)
        }
    }
}

extension DeviceToken {
    /// A browser's subscription as a device: `ENDPOINT P256DH AUTH` (the keys base64url, unpadded; a space
    /// never occurs in an endpoint, which ``WebPushSubscription`` refuses with whitespace). One value then
    /// carries all a message needs, so the stores keep it in the token column like any other device.
    public init(webPush subscription: WebPushSubscription) {
        self.platform = .webpush
        self.value = subscription.endpoint + " " + subscription.p256dh + " " + subscription.auth
    }

    /// A subscription's value (``init(webPush:)``'s form), validated whole: endpoint, key on the curve, secret.
    public init(webPushValue value: String, field: String = "device") throws(ValidationError) {
        let subscription = try WebPushSubscription(tokenValue: value, field: field)
        self.init(webPush: subscription)
    }

    /// A value read back from a store, not validated again.
    init(storedWebPush value: String) {
        self.platform = .webpush
        self.value = value
    }

    /// The endpoint of a Web Push subscription's value (the whole value for other platforms).
    public var webPushEndpoint: Substring {
        value.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: false).first ?? value[...]
    }
}
