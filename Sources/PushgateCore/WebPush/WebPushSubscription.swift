public import Crypto
import Foundation

/// A browser's push subscription, as `PushSubscription.toJSON()` gives it:
/// `{"endpoint": "https://…", "expirationTime": null, "keys": {"p256dh": "…", "auth": "…"}}`.
///
/// Validated once, here, so that everything later can rely on it:
/// - `endpoint`: an `https` URL with a host, no user name or password and no fragment, at most
///   ``maximumEndpointBytes`` bytes; its ``origin`` is where messages go and what VAPID signs for;
/// - `keys.p256dh`: base64url of the browser's 65-byte uncompressed P-256 public key (`0x04 ‖ X ‖ Y`),
///   a point on the curve (an ECDH with a point off the curve would leak bits of our ephemeral key, and
///   the browser could never decrypt);
/// - `keys.auth`: base64url of the 16-byte authentication secret.
///
/// Every problem is a `ValidationError` naming the field (`subscription.keys.p256dh`…). Other members
/// are refused, except `expirationTime` (null or a number, ignored: the push service says when a
/// subscription is gone by answering 404 or 410).
public struct WebPushSubscription: Hashable, Sendable {
    /// Browsers' endpoints are about 200 bytes; anything near this bound is not one.
    public static let maximumEndpointBytes = 2048
    public static let publicKeyByteCount = 65
    public static let authSecretByteCount = 16

    /// The push resource: where each message is `POST`ed.
    public let endpoint: String
    public let origin: WebPushOrigin
    /// The request target on the origin: the endpoint's path and query (`/wpush/v2/…`).
    public let path: String
    /// `keys.p256dh` decoded: the browser's ECDH public key, uncompressed (65 bytes).
    public let userAgentPublicKeyBytes: [UInt8]
    /// `keys.auth` decoded (16 bytes).
    public let authSecret: [UInt8]

    /// The browser's ECDH public key (checked to be on the curve at validation; kept parsed, as every
    /// message to the subscription needs it).
    public let userAgentPublicKey: P256.KeyAgreement.PublicKey

    /// A subscription from the JSON object a browser gives (`field` names it in errors).
    public init(jsonBytes bytes: [UInt8], field: String = "subscription") throws(ValidationError) {
        guard let object = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any] else {
            throw Self.invalid(field, "must be a JSON object with endpoint and keys (PushSubscription.toJSON())")
        }
        try self.init(jsonObject: object, field: field)
    }

    /// A subscription from an already parsed JSON object (what a registration body holds).
    public init(jsonObject object: [String: Any], field: String = "subscription") throws(ValidationError) {
        if let unknown = object.keys.sorted().first(where: { !["endpoint", "expirationTime", "keys"].contains($0) }) {
            throw Self.invalid(
                "\(field).\(unknown)",
                "unknown member; a subscription has endpoint, expirationTime and keys"
            )
        }
        if let expiration = object["expirationTime"], !(expiration is NSNull), !(expiration is NSNumber) {
            throw Self.invalid("\(field).expirationTime", "must be null or a number")
        }
        guard let endpoint = object["endpoint"] as? String else {
            throw Self.invalid("\(field).endpoint", "is required and must be a string")
        }
        guard let keys = object["keys"] as? [String: Any] else {
            throw Self.invalid("\(field).keys", "is required and must be an object with p256dh and auth")
        }
        if let unknown = keys.keys.sorted().first(where: { !["p256dh", "auth"].contains($0) }) {
            throw Self.invalid("\(field).keys.\(unknown)", "unknown member; keys has p256dh and auth")
        }
        guard let p256dh = keys["p256dh"] as? String else {
            throw Self.invalid("\(field).keys.p256dh", "is required and must be a string")
        }
        guard let auth = keys["auth"] as? String else {
            throw Self.invalid("\(field).keys.auth", "is required and must be a string")
        }
        try self.init(endpoint: endpoint, p256dh: p256dh, auth: auth, field: field)
    }

    /// A subscription from a Web Push device's token value (``DeviceToken/init(webPush:)``'s
    /// `ENDPOINT P256DH AUTH`), validated whole.
    public init(tokenValue value: String, field: String = "subscription") throws(ValidationError) {
        // The two spaces found by bytes: the generic `split` cost a few µs, and each message's send comes here.
        let bytes = value.utf8
        guard let first = bytes.firstIndex(of: 0x20),
            let second = bytes[bytes.index(after: first)...].firstIndex(of: 0x20),
            !bytes[bytes.index(after: second)...].contains(0x20)
        else {
            throw Self.invalid(field, "must be a subscription's endpoint, p256dh and auth separated by spaces")
        }
        try self.init(
            endpoint: String(value[..<first]),
            p256dh: String(value[bytes.index(after: first)..<second]),
            auth: String(value[bytes.index(after: second)...]),
            field: field
        )
    }

    /// The subscription of a Web Push device (``DeviceToken/init(webPush:)``).
    public init(deviceToken token: DeviceToken, field: String = "device") throws(ValidationError) {
        guard token.platform == .webpush else {
            throw Self.invalid(field, "is a \(token.platform) device, not a Web Push subscription")
        }
        try self.init(tokenValue: token.value, field: field)
    }

    /// The subscription as a device of the registry.
    public var deviceToken: DeviceToken { DeviceToken(webPush: self) }

    /// A subscription from its three values; `field` prefixes the names in errors.
    public init(endpoint: String, p256dh: String, auth: String, field: String = "subscription") throws(ValidationError)
    {
        let (origin, path) = try Self.parseEndpoint(endpoint, field: "\(field).endpoint")
        guard let key = Base64URL.decode(p256dh) else {
            throw Self.invalid("\(field).keys.p256dh", "must be base64url")
        }
        guard key.count == Self.publicKeyByteCount, key.first == 0x04 else {
            throw Self.invalid(
                "\(field).keys.p256dh",
                "must be a 65-byte uncompressed P-256 public key (0x04, X, Y); got \(key.count) bytes"
            )
        }
        guard let publicKey = try? P256.KeyAgreement.PublicKey(x963Representation: key) else {
            throw Self.invalid("\(field).keys.p256dh", "is not a point on the P-256 curve")
        }
        guard let secret = Base64URL.decode(auth) else {
            throw Self.invalid("\(field).keys.auth", "must be base64url")
        }
        guard secret.count == Self.authSecretByteCount else {
            throw Self.invalid(
                "\(field).keys.auth",
                "must be \(Self.authSecretByteCount) bytes; got \(secret.count)"
            )
        }
        self.endpoint = endpoint
        self.origin = origin
        self.path = path
        self.userAgentPublicKeyBytes = key
        self.userAgentPublicKey = publicKey
        self.authSecret = secret
    }

    /// `keys.p256dh` as base64url, unpadded.
    public var p256dh: String { Base64URL.encode(userAgentPublicKeyBytes) }
    /// `keys.auth` as base64url, unpadded.
    public var auth: String { Base64URL.encode(authSecret) }

    /// The subscription as JSON (keys sorted, keys unpadded): what a store keeps and a test writes.
    public var jsonString: String {
        let object: [String: Any] = ["endpoint": endpoint, "keys": ["p256dh": p256dh, "auth": auth]]
        let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
        return data.map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }

    /// Checks an endpoint alone (what an HTTP route names a browser by), by the rules of `endpoint`.
    package static func validateEndpoint(_ endpoint: String, field: String) throws(ValidationError) {
        _ = try parseEndpoint(endpoint, field: field)
    }

    private static func parseEndpoint(_ text: String, field: String) throws(ValidationError) -> (WebPushOrigin, String)
    {
        guard !text.isEmpty, text.utf8.count <= maximumEndpointBytes else {
            throw invalid(field, "must be an https URL of 1 to \(maximumEndpointBytes) bytes")
        }
        // A space separates a device token's parts (DeviceToken(webPush:)); no URL holds whitespace anyway.
        guard !text.utf8.contains(where: { $0 <= 0x20 || $0 == 0x7f }) else {
            throw invalid(field, "must not contain spaces or control characters")
        }
        if let parsed = parseCommonEndpoint(text) { return parsed }
        return try parseAnyEndpoint(text, field: field)
    }

    /// An endpoint through `URLComponents`, checked: the general path of `parseEndpoint` (after its byte
    /// checks), `package` for the test that compares it with ``parseCommonEndpoint(_:)``.
    package static func parseAnyEndpoint(
        _ text: String,
        field: String
    ) throws(ValidationError) -> (
        WebPushOrigin, String
    ) {
        guard let components = URLComponents(string: text), let scheme = components.scheme else {
            throw invalid(field, "is not a URL")
        }
        guard scheme.lowercased() == "https" else {
            throw invalid(field, "must be an https URL (got scheme \"\(StrictJSONParser.quoteShort(scheme))\")")
        }
        guard let host = components.percentEncodedHost, !host.isEmpty else {
            throw invalid(field, "must name a host")
        }
        guard components.percentEncodedUser == nil, components.percentEncodedPassword == nil else {
            throw invalid(field, "must not carry a user name or password")
        }
        guard components.percentEncodedFragment == nil else {
            throw invalid(field, "must not have a fragment")
        }
        let port = components.port ?? 443
        guard (1...65535).contains(port) else { throw invalid(field, "has a port outside 1-65535") }
        // Foundation gives an IPv6 host without its brackets on some platforms: put them back, as the
        // origin is written with them.
        let bracketed = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
        var path = components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
        if let query = components.percentEncodedQuery { path += "?" + query }
        return (WebPushOrigin(host: bracketed, port: port), path)
    }

    /// The origin and path of an endpoint of the common form, without `URLComponents` (about 10 µs, paid by
    /// every message, since each send reads its subscription back from the stored token): `https://`, a
    /// host of letters, digits, `.` and `-`, an optional port of 1 to 5 digits in 1-65535, then nothing or
    /// a path or query of unreserved characters and `/?=&:+,;@!$*'()`. Every browser's push service writes
    /// its endpoints so. Nil for anything else (an IP literal, percent-encoding, a fragment, an upper-case
    /// scheme…), which `URLComponents` then parses and checks. On the strings it accepts it gives what
    /// the `URLComponents` path gives (`WebPushSubscriptionTests` compares the two).
    package static func parseCommonEndpoint(_ text: String) -> (WebPushOrigin, String)? {
        var text = text
        return text.withUTF8 { bytes -> (WebPushOrigin, String)? in
            let scheme = "https://".utf8
            guard bytes.count > scheme.count, bytes.starts(with: scheme) else { return nil }
            var index = scheme.count
            let hostStart = index
            while index < bytes.count, isHostByte(bytes[index]) { index += 1 }
            let hostEnd = index
            guard hostEnd > hostStart else { return nil }
            var port = 443
            if index < bytes.count, bytes[index] == UInt8(ascii: ":") {
                index += 1
                let portStart = index
                var value = 0
                while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) {
                    value = value * 10 + Int(bytes[index] - UInt8(ascii: "0"))
                    index += 1
                    guard index - portStart <= 5 else { return nil }
                }
                guard index > portStart, (1...65535).contains(value) else { return nil }
                port = value
            }
            let restStart = index
            if index < bytes.count {
                guard bytes[index] == UInt8(ascii: "/") || bytes[index] == UInt8(ascii: "?") else { return nil }
                while index < bytes.count {
                    guard isPathByte(bytes[index]) else { return nil }
                    index += 1
                }
            }
            let host = String(decoding: UnsafeBufferPointer(rebasing: bytes[hostStart..<hostEnd]), as: UTF8.self)
            let rest = String(decoding: UnsafeBufferPointer(rebasing: bytes[restStart...]), as: UTF8.self)
            let path = rest.hasPrefix("/") ? rest : "/" + rest
            return (WebPushOrigin(host: host, port: port), path)
        }
    }

    private static func isHostByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "-"):
            true
        default: false
        }
    }

    private static func isPathByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "-"),
            UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: "/"), UInt8(ascii: "?"), UInt8(ascii: "="),
            UInt8(ascii: "&"), UInt8(ascii: ":"), UInt8(ascii: "+"), UInt8(ascii: ","), UInt8(ascii: ";"),
            UInt8(ascii: "@"), UInt8(ascii: "!"), UInt8(ascii: "$"), UInt8(ascii: "*"), UInt8(ascii: "'"),
            UInt8(ascii: "("), UInt8(ascii: ")"):
            true
        default: false
        }
    }

    private static func invalid(_ field: String, _ problem: String) -> ValidationError {
        let name = field.split(separator: ".").last.map(String.init) ?? field
        return ValidationError(code: .invalidSubscription, field: field, message: "\(name) \(problem)")
    }
}

extension WebPushSubscription {
    /// Equal when the endpoint and both keys are (the parsed key is derived from its bytes).
    public static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.endpoint == rhs.endpoint && lhs.userAgentPublicKeyBytes == rhs.userAgentPublicKeyBytes
            && lhs.authSecret == rhs.authSecret
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(endpoint)
        hasher.combine(userAgentPublicKeyBytes)
        hasher.combine(authSecret)
    }
}

extension WebPushSubscription: CustomStringConvertible {
    /// The origin and the end of the endpoint only: a full endpoint is a bearer capability (anyone
    /// holding it and the keys can push to that browser), so it is never logged whole.
    public var description: String {
        "WebPushSubscription(\(origin), …\(endpoint.suffix(8)))"
    }
}

extension ValidationError.Code {
    public static let invalidSubscription = ValidationError.Code("invalid_subscription")
}
