import Foundation

/// One HTTP request as the simulator's routes see it, whatever the HTTP version.
struct FCMSimulatorRequest: Sendable {
    var method: String
    var uri: String
    var headers: [(String, String)]
    var body: [UInt8]

    func header(_ name: String) -> String? {
        headers.first { $0.0.lowercased() == name }?.1
    }

    var path: Substring { uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)[0] }

    /// The value of a query parameter, percent-decoded.
    func query(_ name: String) -> String? {
        let parts = uri.split(separator: "?", maxSplits: 1)
        guard parts.count == 2 else { return nil }
        for pair in parts[1].split(separator: "&") {
            let kv = pair.split(separator: "=", maxSplits: 1)
            if kv.count == 2, kv[0] == name { return String(kv[1]).removingPercentEncoding }
        }
        return nil
    }
}

/// An answer: status, extra headers, JSON body.
struct FCMSimulatorResponse: Sendable {
    var status: Int
    var headers: [(String, String)] = []
    var body: [UInt8]
    /// Held this much longer than the simulator's latency before it is written.
    var extraLatencyMilliseconds = 0
    /// Not answered: the connection is closed instead (a token-endpoint fault).
    var dropsConnection = false

    /// No answer: the connection that carried the request is closed.
    static let dropped = Self(status: 0, body: [], dropsConnection: true)

    static func json(_ status: Int, _ object: Any, headers: [(String, String)] = []) -> Self {
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data("{}".utf8)
        return Self(status: status, headers: headers, body: Array(data))
    }

    /// Google's error shape for `messages:send`: `{"error":{"code","message","status","details"}}`,
    /// with an `FcmError` detail when there is an FCM error code.
    static func fcmError(
        _ status: Int,
        canonical: String,
        message: String,
        errorCode: String? = nil,
        headers: [(String, String)] = []
    ) -> Self {
        var error: [String: Any] = ["code": status, "message": message, "status": canonical]
        if let errorCode {
            error["details"] = [
                ["@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": errorCode]
            ]
        }
        return json(status, ["error": error], headers: headers)
    }

    /// OAuth's error shape for the token endpoint (RFC 6749 §5.2).
    static func oauthError(_ error: String, _ description: String, status: Int = 400) -> Self {
        json(status, ["error": error, "error_description": description])
    }
}
