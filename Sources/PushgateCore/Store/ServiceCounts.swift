/// A count split by push service: what of a request's targets, accepted, failed or skipped devices are
/// APNs devices, FCM devices and browsers (``PushPlatform``).
///
/// The stores keep the totals as before and, beside them, the FCM and Web Push parts; the APNs part is
/// the rest (the total less the others), so a caller that records only totals (an older instance, a
/// test) counts everything as APNs.
public struct ServiceCounts: Hashable, Sendable, CustomStringConvertible {
    public var apns: Int
    public var fcm: Int
    public var webpush: Int

    public static let zero = ServiceCounts()

    public init(apns: Int = 0, fcm: Int = 0, webpush: Int = 0) {
        self.apns = apns
        self.fcm = fcm
        self.webpush = webpush
    }

    /// The split of `total` whose FCM and Web Push parts are given: APNs is the rest.
    public init(total: Int, fcm: Int, webpush: Int) {
        self.init(apns: total - fcm - webpush, fcm: fcm, webpush: webpush)
    }

    /// Each device of `platforms` counted under its service.
    public init(_ platforms: some Sequence<PushPlatform>) {
        self.init()
        for platform in platforms { self[platform] += 1 }
    }

    public subscript(platform: PushPlatform) -> Int {
        get {
            switch platform {
            case .apns: apns
            case .fcm: fcm
            case .webpush: webpush
            }
        }
        set {
            switch platform {
            case .apns: apns = newValue
            case .fcm: fcm = newValue
            case .webpush: webpush = newValue
            }
        }
    }

    public var total: Int { apns + fcm + webpush }

    public static func + (lhs: Self, rhs: Self) -> Self {
        ServiceCounts(apns: lhs.apns + rhs.apns, fcm: lhs.fcm + rhs.fcm, webpush: lhs.webpush + rhs.webpush)
    }

    public static func += (lhs: inout Self, rhs: Self) { lhs = lhs + rhs }

    public var description: String { "apns=\(apns),fcm=\(fcm),webpush=\(webpush)" }
}

extension PushPlatform {
    /// The platform of a `DeviceToken.storageKey` (a token column's text), by its prefix.
    package init(storageKey: String) {
        if storageKey.hasPrefix(DeviceToken.fcmStoragePrefix) {
            self = .fcm
        } else if storageKey.hasPrefix(DeviceToken.webPushStoragePrefix) {
            self = .webpush
        } else {
            self = .apns
        }
    }

    /// SQL that is this platform's name (`'apns'`, `'fcm'`, `'webpush'`) for the storage key in `column`
    /// (both stores' dialects): what the `request_removed` triggers record.
    package static func sqlName(ofStorageKey column: String) -> String {
        """
        CASE WHEN \(column) LIKE '\(DeviceToken.fcmStoragePrefix)%' THEN 'fcm' \
        WHEN \(column) LIKE '\(DeviceToken.webPushStoragePrefix)%' THEN 'webpush' ELSE 'apns' END
        """
    }
}

extension DeviceToken {
    /// The first text after every storage key that starts with `prefix` (its last character's successor):
    /// the keys of a platform are the range `[prefix, storagePrefixEnd(prefix))` in byte order.
    package static func storagePrefixEnd(_ prefix: String) -> String {
        var scalars = Array(prefix.unicodeScalars)
        scalars[scalars.count - 1] = Unicode.Scalar(scalars[scalars.count - 1].value + 1)!
        return String(String.UnicodeScalarView(scalars))
    }
}
