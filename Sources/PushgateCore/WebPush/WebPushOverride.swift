/// The optional `webpush` object of a notification request: a JSON merge patch (RFC 7396) applied to the
/// request's payload for browsers, as `fcm` is for FCM (`{"aps": null, "title": "…"}` drops the APNs
/// part and adds a title the page's service worker reads).
public struct WebPushOverride: Hashable, Sendable {
    public let bytes: [UInt8]

    public init(jsonBytes bytes: [UInt8], field: String = "webpush") throws(ValidationError) {
        guard FCMJSON.object(bytes) != nil else {
            throw ValidationError(code: .invalidWebPushMessage, field: field, message: "webpush must be a JSON object")
        }
        self.bytes = bytes
    }
}

extension ValidationError.Code {
    public static let invalidWebPushMessage = ValidationError.Code("invalid_webpush_message")
}
