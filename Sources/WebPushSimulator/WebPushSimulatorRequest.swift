import Foundation

/// One HTTP request as the simulator's routes see it, whatever the HTTP version.
struct WebPushSimulatorRequest: Sendable {
    var method: String
    var uri: String
    var headers: [(String, String)]
    var body: [UInt8]
    /// 1 or 2.
    var httpVersion: Int
    /// Which origin's listener received it (-1: the control port).
    var originIndex: Int
    /// Checked on one of the simulator's worker threads, not on its connection's event loop.
    var onWorkerThread = false

    func header(_ name: String) -> String? {
        headers.first { $0.0.utf8.count == name.utf8.count && $0.0.lowercased() == name }?.1
    }

    var path: Substring { uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)[0] }

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

/// An answer: status, extra headers, body.
struct WebPushSimulatorResponse: Sendable {
    var status: Int
    var headers: [(String, String)] = []
    var body: [UInt8] = []
    var contentType = "application/json"
    /// Held this much longer than the simulator's latency before it is written.
    var extraLatencyMilliseconds = 0
    /// Not answered: the connection is closed instead.
    var dropsConnection = false

    static func json(_ status: Int, _ object: Any, headers: [(String, String)] = []) -> Self {
        let data =
            (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]))
            ?? Data("{}".utf8)
        return Self(status: status, headers: headers, body: Array(data))
    }

    /// A refusal with a reason, as a push service's error body (autopush's shape: code, errno, message).
    static func refusal(_ status: Int, _ message: String, headers: [(String, String)] = []) -> Self {
        json(status, ["code": status, "message": message], headers: headers)
    }
}
