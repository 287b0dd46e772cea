extension ValidationError.Code {
    /// A `platform` (registration member, HTTP query parameter) that is not `apns`, `fcm` or `webpush`.
    public static let invalidPlatform = ValidationError.Code("invalid_platform")
}

extension PushPlatform {
    /// The platform a request names (a registration's `platform` member, the HTTP device routes'
    /// `platform` query parameter): `apns`, `fcm` or `webpush`, in lower case; absent means APNs, as with pushd.
    package init(requestValue raw: String?, field: String = "platform") throws(ValidationError) {
        guard let raw else {
            self = .apns
            return
        }
        guard let platform = PushPlatform(rawValue: raw) else {
            throw ValidationError(
                code: .invalidPlatform,
                field: field,
                message: "unknown platform \"\(StrictJSONParser.quoteShort(raw))\"; expected "
                    + PushPlatform.allCases.map(\.rawValue).joined(separator: " or ")
            )
        }
        self = platform
    }
}
