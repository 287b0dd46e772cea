import Foundation

extension ControlAPI {
    /// The legacy gateway's control routes:
    /// - `GET /legacy/stats`: its counters (`received`, `accepted`, `error_responses_by_status`, ...).
    /// - `POST /legacy/shutdown`: every live legacy connection answers Shutdown (10) and closes.
    /// - `POST /legacy/drop`: every live legacy connection closes without an error response.
    /// - `POST /legacy/faults` with `{"shutdown_after": N, "drop_after": N}` (either, `null` clears):
    ///   one-shot faults for the next connection that accepts N notifications.
    func handleLegacy(method: String, action: String, body: Data) throws -> Response {
        let legacy = self.core.legacy
        switch (method, action) {
        case ("GET", "stats"):
            return try .json(200, Self.json(legacyStats: legacy.stats()))
        case ("POST", "shutdown"):
            legacy.sendShutdown()
            return try .json(200, ["shutdown": true])
        case ("POST", "drop"):
            legacy.dropConnections()
            return try .json(200, ["dropped": true])
        case ("POST", "faults"):
            guard
                let object = try? JSONSerialization.jsonObject(with: body.isEmpty ? Data("{}".utf8) : body)
                    as? [String: Any]
            else {
                return Self.error(400, "body must be a JSON object")
            }
            var faults = legacy.faults
            for (key, value) in object {
                let count: Int?
                if value is NSNull {
                    count = nil
                } else if let number = value as? Int, number >= 1 {
                    count = number
                } else {
                    return Self.error(400, "\(key) must be a positive integer or null")
                }
                switch key {
                case "shutdown_after": faults.shutdownAfter = count
                case "drop_after": faults.dropAfter = count
                default: return Self.error(400, "unknown key \(key)")
                }
            }
            legacy.faults = faults
            return try .json(
                200,
                [
                    "shutdown_after": faults.shutdownAfter.map { $0 as Any } ?? NSNull(),
                    "drop_after": faults.dropAfter.map { $0 as Any } ?? NSNull(),
                ]
            )
        case (_, "stats"), (_, "shutdown"), (_, "drop"), (_, "faults"):
            return Self.error(405, "method \(method) not allowed on /legacy/\(action)")
        default:
            return Self.error(404, "no route \(method) /legacy/\(action)")
        }
    }

    static func json(legacyStats stats: LegacyGatewayStats) -> [String: Any] {
        [
            "received": stats.received,
            "accepted": stats.accepted,
            "error_responses_by_status": Dictionary(
                uniqueKeysWithValues: stats.errorResponsesByStatus.map { (String($0.key), $0.value) }
            ),
            "duplicates": stats.duplicates,
            "discarded_unregistered": stats.discardedUnregistered,
            "connections_opened": stats.connectionsOpened,
            "connections_active": stats.connectionsActive,
            "connections_refused": stats.connectionsRefused,
            "feedback_connections": stats.feedbackConnections,
            "feedback_tuples_served": stats.feedbackTuplesServed,
        ]
    }
}
