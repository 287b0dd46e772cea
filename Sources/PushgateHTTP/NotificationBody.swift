import Foundation
import PushgateCore

/// The body of `POST /v1/notifications`: the core's notification request (`NotificationRequestSchema`),
/// the same as the UDP notification port reads, with its errors worded for the API (`docs/http.md`) and
/// its app one the API serves. The payload is forwarded as the bytes the client sent.
enum NotificationBody {
    static func parse(_ bytes: [UInt8], apps: AppNames, id: RequestID, receivedAt: Date) throws(APIError)
        -> NotificationRequest
    {
        try validated { () throws(ValidationError) in
            try bytes.withRequestBytes { raw throws(ValidationError) in
                try NotificationRequestSchema.read(raw, dialect: .body, id: id, receivedAt: receivedAt, app: apps.resolve)
            }
        }
    }

    /// The app the body acts on, read by the same reader as ``parse(_:apps:id:receivedAt:)`` (which checks
    /// the app first): the app it names, served or not (an access check refuses another app before the
    /// route says it is unknown), or the only app when it names none. Throws the error `parse` would give
    /// when the app cannot be told.
    static func app(_ bytes: [UInt8], apps: AppNames) throws(APIError) -> String {
        try validated { () throws(ValidationError) in
            try bytes.withRequestBytes { raw throws(ValidationError) in
                try NotificationRequestSchema.app(raw, dialect: .body) { name throws(ValidationError) in
                    if let name { return name }
                    return try apps.resolve(nil)
                }
            }
        }
    }
}

/// Runs a core validation, answering its `ValidationError` as an `APIError` (400; 404 for an unknown app).
func validated<T>(_ body: () throws(ValidationError) -> T) throws(APIError) -> T {
    do { return try body() } catch { throw APIError(error) }
}
