package import Foundation
package import PushgateCore

/// The body of `POST /v1/notifications`: the core's notification request (`NotificationRequestSchema`),
/// the same as the UDP notification port reads, with its errors worded for the API (`docs/http.md`) and
/// its app one the API serves. The payload is forwarded as the bytes the client sent.
package enum NotificationBody {
    /// `scope`: the one app the API key may act on (nil: any). A body for another app is refused with
    /// 403 `forbidden_app` at the app check, the first field check, from this one strict parse.
    package static func parse(
        _ bytes: [UInt8],
        apps: AppNames,
        scope: String?,
        id: RequestID,
        receivedAt: Date
    )
        throws(APIError) -> NotificationRequest
    {
        try validated { () throws(ValidationError) in
            try bytes.withRequestBytes { raw throws(ValidationError) in
                try NotificationRequestSchema.read(raw, dialect: .body, id: id, receivedAt: receivedAt) {
                    name throws(ValidationError) in
                    if let scope, let name, name != scope { throw .forbiddenApp(scope: scope) }
                    let app = try apps.resolve(name)
                    if let scope, app != scope { throw .forbiddenApp(scope: scope) }
                    return app
                }
            }
        }
    }
}

/// Runs a core validation, answering its `ValidationError` as an `APIError` (400; 404 for an unknown app,
/// 403 for an app the API key may not act on).
func validated<T>(_ body: () throws(ValidationError) -> T) throws(APIError) -> T {
    do { return try body() } catch { throw APIError(error) }
}
