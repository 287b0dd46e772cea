import Foundation
public import PushgateCore

/// The VAPID `sub` claim (RFC 8292 §2.1): how a push service's operator can reach the application's
/// operator, a `mailto:` address or an `https:` URL. Push services may refuse tokens without one.
public struct VAPIDSubject: Hashable, Sendable, CustomStringConvertible {
    public let value: String

    public init(_ value: String, field: String = "subject") throws(ValidationError) {
        let lower = value.lowercased()
        let valid: Bool
        if lower.hasPrefix("mailto:") {
            let address = value.dropFirst("mailto:".count)
            valid = address.contains("@") && !address.hasPrefix("@") && !address.hasSuffix("@")
        } else if lower.hasPrefix("https:") {
            valid = URLComponents(string: value)?.host.map { !$0.isEmpty } ?? false
        } else {
            valid = false
        }
        // Also what keeps the claims' JSON simple: no quotes, backslashes or control characters.
        let plain = value.unicodeScalars.allSatisfy { $0.value > 0x20 && $0.value < 0x7f && $0 != "\"" && $0 != "\\" }
        guard valid, plain, value.utf8.count <= 512 else {
            throw ValidationError(
                code: .invalidVAPIDSubject,
                field: field,
                message:
                    "subject must be a mailto: address or an https: URL (for example mailto:ops@example.com),"
                    + " without spaces or quotes"
            )
        }
        self.value = value
    }

    public var description: String { value }
}

extension ValidationError.Code {
    public static let invalidVAPIDSubject = ValidationError.Code("invalid_vapid_subject")
}
