/// The `apns-push-type` header values Apple documents, with the topic suffix each one requires and the
/// payload limit that applies to it.
public enum PushType: String, CaseIterable, Hashable, Sendable, CustomStringConvertible {
    case alert
    case background
    case location
    case voip
    case complication
    case fileprovider
    case mdm
    case liveactivity
    case pushtotalk
    case widgets
    case controls

    public init(validating raw: String, field: String = "push_type") throws(ValidationError) {
        guard let value = PushType(rawValue: raw) else {
            throw ValidationError(
                code: .invalidPushType,
                field: field,
                message:
                    "unknown push type \"\(raw.prefix(32))\"; expected one of \(Self.allCases.map(\.rawValue).joined(separator: ", "))"
            )
        }
        self = value
    }

    /// What Apple requires after the bundle id in `apns-topic` for this push type.
    /// `mdm` uses the topic from the MDM certificate as it is, so it has no suffix either.
    public var topicSuffix: String {
        switch self {
        case .alert, .background, .mdm: ""
        case .location: ".location-query"
        case .voip: ".voip"
        case .complication: ".complication"
        case .fileprovider: ".pushkit.fileprovider"
        case .liveactivity: ".push-type.liveactivity"
        case .pushtotalk: ".voip-ptt"
        case .widgets: ".push-type.widgets"
        case .controls: ".push-type.controls"
        }
    }

    /// Apple: 4096 bytes, 5120 for VoIP notifications.
    public var maximumPayloadBytes: Int { self == .voip ? 5120 : 4096 }

    /// The priorities Apple allows for this push type. Background pushes must use 5 ("Using priority 10
    /// is an error").
    public func allows(_ priority: Priority) -> Bool {
        switch self {
        case .background: priority == .conservePower
        default: true
        }
    }

    public var description: String { rawValue }
}

/// `apns-priority`.
public enum Priority: Int, CaseIterable, Hashable, Sendable, CustomStringConvertible {
    /// 10: deliver immediately.
    case immediate = 10
    /// 5: deliver based on the device's power considerations.
    case conservePower = 5
    /// 1: prioritise power over everything, never wake the device.
    case powerSaving = 1

    public init(validating raw: Int, field: String = "priority") throws(ValidationError) {
        guard let value = Priority(rawValue: raw) else {
            throw ValidationError(
                code: .invalidPriority,
                field: field,
                message: "priority must be 1, 5 or 10 (got \(raw))"
            )
        }
        self = value
    }

    public var description: String { String(rawValue) }
}

/// `apns-expiration`.
public enum Expiration: Hashable, Sendable, CustomStringConvertible {
    /// Header omitted: APNs stores the notification according to its own policy.
    case storagePolicy
    /// `0`: APNs attempts delivery once and does not store it (the C pushd's default).
    case immediately
    /// Store and retry until this UNIX time (seconds).
    case at(epochSeconds: Int64)

    /// Interprets the integer form the UDP and HTTP requests carry: 0 means "once", anything else a UNIX time.
    public init(validating seconds: Int64, field: String = "expiration") throws(ValidationError) {
        guard seconds >= 0 else {
            throw ValidationError(
                code: .invalidExpiration,
                field: field,
                message: "expiration must be 0 or a UNIX time in seconds (got \(seconds))"
            )
        }
        guard seconds <= 253_402_300_799 else {  // 9999-12-31; anything later is a unit mistake (ms, µs)
            throw ValidationError(
                code: .invalidExpiration,
                field: field,
                message: "expiration \(seconds) is too far in the future; it must be a UNIX time in seconds"
            )
        }
        self = seconds == 0 ? .immediately : .at(epochSeconds: seconds)
    }

    /// The header value, or nil when the header is omitted.
    public var headerValue: String? {
        switch self {
        case .storagePolicy: nil
        case .immediately: "0"
        case .at(let seconds): String(seconds)
        }
    }

    public var description: String { headerValue ?? "storage-policy" }
}

/// `apns-collapse-id`: at most 64 bytes.
public struct CollapseID: Hashable, Sendable, CustomStringConvertible {
    public static let maximumByteCount = 64
    public let value: String

    public init(_ value: String, field: String = "key") throws(ValidationError) {
        guard !value.isEmpty else {
            throw ValidationError(code: .invalidCollapseID, field: field, message: "collapse id must not be empty")
        }
        guard value.utf8.count <= Self.maximumByteCount else {
            throw ValidationError(
                code: .invalidCollapseID,
                field: field,
                message: "collapse id must be at most \(Self.maximumByteCount) bytes (got \(value.utf8.count))"
            )
        }
        guard value.unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0.value != 0x7f }) else {
            throw ValidationError(
                code: .invalidCollapseID,
                field: field,
                message: "collapse id must not contain control characters"
            )
        }
        self.value = value
    }

    public var description: String { value }
}

/// A bundle id (`com.example.app`), the base of `apns-topic`.
public struct Topic: Hashable, Sendable, CustomStringConvertible {
    public let bundleID: String

    public init(_ bundleID: String, field: String = "topic") throws(ValidationError) {
        guard !bundleID.isEmpty, bundleID.utf8.count <= 255 else {
            throw ValidationError(code: .invalidTopic, field: field, message: "topic must be 1 to 255 bytes")
        }
        // Bundle ids are reverse-DNS: letters, digits, '-', '.' (Apple also permits '_' in some tools).
        guard
            bundleID.unicodeScalars.allSatisfy({ scalar in
                switch scalar {
                case "a"..."z", "A"..."Z", "0"..."9", "-", ".", "_": true
                default: false
                }
            })
        else {
            throw ValidationError(
                code: .invalidTopic,
                field: field,
                message: "topic must be a bundle id (letters, digits, '-', '.', '_')"
            )
        }
        self.bundleID = bundleID
    }

    /// The `apns-topic` value for a push type: the bundle id plus the suffix Apple requires for it.
    /// A topic that already carries the suffix is left alone.
    public func headerValue(for pushType: PushType) -> String {
        let suffix = pushType.topicSuffix
        if suffix.isEmpty || bundleID.hasSuffix(suffix) { return bundleID }
        return bundleID + suffix
    }

    public var description: String { bundleID }
}

/// Production or sandbox (development) APNs.
public enum APNsEnvironment: String, Hashable, Sendable, CaseIterable, CustomStringConvertible {
    case production
    case sandbox

    public var host: String {
        switch self {
        case .production: "api.push.apple.com"
        case .sandbox: "api.sandbox.push.apple.com"
        }
    }

    public var description: String { rawValue }
}
