import Foundation

/// The JSON body of an APNs error answer (and of a GOAWAY's debug data):
/// `{"reason":"BadDeviceToken"}`, or for 410 `{"reason":"Unregistered","timestamp":1234}`.
/// Anything that is not such an object reads as no reason and no timestamp.
public struct APNsErrorBody: Hashable, Sendable {
    public var reason: APNsReason?
    /// For 410: when APNs last knew the token was not valid, in milliseconds since 1970.
    public var timestamp: Int64?

    public init(reason: APNsReason? = nil, timestamp: Int64? = nil) {
        self.reason = reason
        self.timestamp = timestamp
    }

    public init(parsing bytes: some Sequence<UInt8>) {
        guard let object = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any] else {
            self.init()
            return
        }
        self.init(
            reason: (object["reason"] as? String).map(APNsReason.init(rawValue:)),
            timestamp: (object["timestamp"] as? NSNumber)?.int64Value
        )
    }
}
