import Foundation

/// The simulator's control API, independent of HTTP plumbing: a request (method, URI, body) in,
/// a status and a JSON body out. `ControlAPIHandler` serves it over HTTP/1.1.
///
/// Routes:
/// - `GET /notifications[?device=TOKEN]`: JSON array of accepted notifications (oldest first):
///   `device`, `apns_id`, `headers`, `payload` (the JSON value, or a string when it is not JSON),
///   `received_at_ms`, `connection_id`, `stream_id`.
/// - `GET /stats`: the counters (`received`, `accepted`, `rejected`, `rejected_by_reason`, ...).
/// - `GET /devices/{token}`: `{"device", "accepted", "duplicates", "state"}`.
/// - `POST /devices/{token}/unregister` (optional body `{"timestamp": <ms since epoch>}`; default
///   now): later pushes get 410 `Unregistered` with that timestamp.
/// - `POST /devices/{token}/bad`: later pushes get 400 `BadDeviceToken`.
/// - `DELETE /devices/{token}`: back to normal.
/// - `GET /faults`, `POST /faults` (keys documented on `SimulatorFaults`): answers the faults now
///   in force.
/// - `POST /reset`: forget notifications, counters and device states; restore configured faults.
/// - `GET /legacy/stats`, `POST /legacy/shutdown`, `POST /legacy/drop`, `POST /legacy/faults`: the
///   legacy binary gateway (see `ControlAPI+Legacy.swift`).
///
/// Bad requests get 400 (unknown route 404, wrong method 405) with `{"error": "..."}`.
struct ControlAPI: Sendable {
    struct Response: Equatable, Sendable {
        var status: Int
        var body: Data
    }

    let core: SimulatorCore

    func handle(method: String, uri: String, body: Data) -> Response {
        let (path, query) = Self.split(uri)
        let segments = path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        do {
            switch (method, segments.count, segments.first) {
            case ("GET", 1, "notifications"):
                let records = self.core.recorder.notifications(device: query["device"])
                return try .json(200, records.map(Self.json(notification:)))
            case ("GET", 1, "stats"):
                return try .json(200, Self.json(stats: self.core.stats()))
            case ("GET", 1, "faults"):
                return try .json(200, Self.json(faults: self.core.faults))
            case ("POST", 1, "faults"):
                let update = try FaultsUpdate.decode(body)
                var faults = self.core.faults
                update.apply(to: &faults)
                try self.core.setFaults(faults, seed: update.seed)
                if update.dropNow { self.core.dropAllConnections() }
                return try .json(200, Self.json(faults: self.core.faults))
            case ("POST", 1, "reset"):
                try self.core.reset()
                return try .json(200, ["reset": true])
            case ("GET", 2, "devices"):
                return try .json(200, self.deviceJSON(segments[1]))
            case ("DELETE", 2, "devices"):
                self.core.devices.set(nil, for: segments[1])
                return try .json(200, self.deviceJSON(segments[1]))
            case ("POST", 3, "devices") where segments[2] == "unregister":
                let timestamp = try Self.decodeTimestamp(body) ?? self.core.clock.now().millisecondsSince1970
                self.core.devices.set(.unregistered(timestampMilliseconds: timestamp), for: segments[1])
                return try .json(200, self.deviceJSON(segments[1]))
            case ("POST", 3, "devices") where segments[2] == "bad":
                self.core.devices.set(.bad, for: segments[1])
                return try .json(200, self.deviceJSON(segments[1]))
            case (_, 2, "legacy"):
                return try self.handleLegacy(method: method, action: segments[1], body: body)
            case (_, 1, "notifications"), (_, 1, "stats"), (_, 1, "faults"), (_, 1, "reset"), (_, 2, "devices"),
                (_, 3, "devices"):
                return Self.error(405, "method \(method) not allowed on \(path)")
            default:
                return Self.error(404, "no route \(method) \(path)")
            }
        } catch let error as SimulatorError {
            return Self.error(400, error.description)
        } catch {
            return Self.error(400, "\(error)")
        }
    }

    private func deviceJSON(_ token: String) -> [String: Any] {
        let deliveries = self.core.recorder.deliveries(device: token)
        var result: [String: Any] = [
            "device": token, "accepted": deliveries.accepted, "duplicates": deliveries.duplicates,
        ]
        switch self.core.devices.state(of: token) {
        case .none: result["state"] = "active"
        case .bad: result["state"] = "bad"
        case .unregistered(let timestamp):
            result["state"] = "unregistered"
            result["timestamp"] = timestamp
        }
        return result
    }

    // MARK: JSON shapes

    static func json(notification: RecordedNotification) -> [String: Any] {
        let payload: Any =
            (try? JSONSerialization.jsonObject(with: Data(notification.payload), options: [.fragmentsAllowed]))
            ?? notification.payloadString
        return [
            "device": notification.deviceToken,
            "apns_id": notification.apnsID,
            "headers": notification.headers,
            "payload": payload,
            "received_at_ms": notification.arrivalTime.millisecondsSince1970,
            "connection_id": notification.connectionID,
            "stream_id": notification.streamID,
        ]
    }

    static func json(stats: SimulatorStats) -> [String: Any] {
        [
            "received": stats.received,
            "accepted": stats.accepted,
            "rejected": stats.rejected,
            "rejected_by_reason": stats.rejectedByReason,
            "blackholed": stats.blackholed,
            "recorded": stats.recorded,
            "connections_opened": stats.connectionsOpened,
            "connections_active": stats.connectionsActive,
            "current_streams": stats.currentStreams,
            "peak_streams": stats.peakStreams,
            "peak_streams_by_connection": Dictionary(
                uniqueKeysWithValues: stats.peakStreamsByConnection.map { (String($0.key), $0.value) }
            ),
            "goaways_sent": stats.goAwaysSent,
            "devices": stats.devices,
            "duplicates": stats.duplicates,
        ]
    }

    static func json(faults: SimulatorFaults) -> [String: Any] {
        [
            "latency_ms": faults.latencyMilliseconds,
            "rate_429": faults.rate429,
            "rate_500": faults.rate500,
            "rate_503": faults.rate503,
            "goaway_after_streams": faults.goAwayAfterStreams.map { $0 as Any } ?? NSNull(),
            "drop_after_streams": faults.dropAfterStreams.map { $0 as Any } ?? NSNull(),
            "max_concurrent_streams": faults.maxConcurrentStreams.map { $0 as Any } ?? NSNull(),
            "blackhole": faults.blackhole,
            "every_token_bad": faults.everyTokenBad,
            "hold_answers": faults.holdAnswers,
        ]
    }

    static func error(_ status: Int, _ message: String) -> Response {
        (try? .json(status, ["error": message])) ?? Response(status: status, body: Data())
    }

    // MARK: Parsing

    private static func split(_ uri: String) -> (path: String, query: [String: String]) {
        guard let mark = uri.firstIndex(of: "?") else { return (uri, [:]) }
        var query: [String: String] = [:]
        for pair in uri[uri.index(after: mark)...].split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1)
            let key = String(parts[0]).removingPercentEncoding ?? String(parts[0])
            let value = parts.count > 1 ? (String(parts[1]).removingPercentEncoding ?? String(parts[1])) : ""
            query[key] = value
        }
        return (String(uri[..<mark]), query)
    }

    private static func decodeTimestamp(_ body: Data) throws -> Int64? {
        guard !body.allSatisfy({ $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }) else { return nil }
        struct Body: Decodable {
            var timestamp: Int64?
        }
        do {
            return try JSONDecoder().decode(Body.self, from: body).timestamp
        } catch {
            throw SimulatorError.invalidControlRequest(#"body must be {"timestamp": <integer ms since epoch>}"#)
        }
    }
}

extension ControlAPI.Response {
    static func json(_ status: Int, _ object: Any) throws -> Self {
        let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
        return .init(status: status, body: data)
    }
}

/// A `POST /faults` body: present keys change, `null` resets a key to its default, absent keys
/// stay as they are; unknown keys are an error (a typo must not pass silently).
struct FaultsUpdate: Decodable {
    enum Change<Value> {
        case keep
        case reset
        case set(Value)
    }

    var latencyMilliseconds: Change<Int> = .keep
    var rate429: Change<Double> = .keep
    var rate500: Change<Double> = .keep
    var rate503: Change<Double> = .keep
    var goAwayAfterStreams: Change<Int> = .keep
    var dropAfterStreams: Change<Int> = .keep
    var maxConcurrentStreams: Change<Int> = .keep
    var blackhole: Change<Bool> = .keep
    var everyTokenBad: Change<Bool> = .keep
    var holdAnswers: Change<Bool> = .keep
    var dropNow = false
    var seed: UInt64?

    private enum Key: String, CodingKey, CaseIterable {
        case latencyMS = "latency_ms"
        case rate429 = "rate_429"
        case rate500 = "rate_500"
        case rate503 = "rate_503"
        case goAwayAfterStreams = "goaway_after_streams"
        case dropAfterStreams = "drop_after_streams"
        case dropNow = "drop_now"
        case maxConcurrentStreams = "max_concurrent_streams"
        case blackhole
        case everyTokenBad = "every_token_bad"
        case holdAnswers = "hold_answers"
        case seed
    }

    private struct AnyKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init?(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    static func decode(_ body: Data) throws -> FaultsUpdate {
        do {
            return try JSONDecoder().decode(FaultsUpdate.self, from: body)
        } catch let error as SimulatorError {
            throw error
        } catch DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context),
            DecodingError.dataCorrupted(let context)
        {
            let key = context.codingPath.last?.stringValue ?? "body"
            throw SimulatorError.invalidFaults(key: key, problem: "wrong type (\(context.debugDescription))")
        } catch {
            throw SimulatorError.invalidControlRequest("body must be a JSON object of fault keys")
        }
    }

    init(from decoder: any Decoder) throws {
        let all = try decoder.container(keyedBy: AnyKey.self)
        for key in all.allKeys where Key(rawValue: key.stringValue) == nil {
            throw SimulatorError.invalidFaults(
                key: key.stringValue,
                problem: "unknown key; known keys: \(Key.allCases.map(\.rawValue).joined(separator: ", "))"
            )
        }
        let container = try decoder.container(keyedBy: Key.self)
        func change<Value: Decodable>(_ key: Key, _ type: Value.Type) throws -> Change<Value> {
            guard container.contains(key) else { return .keep }
            if try container.decodeNil(forKey: key) { return .reset }
            return .set(try container.decode(Value.self, forKey: key))
        }
        self.latencyMilliseconds = try change(.latencyMS, Int.self)
        self.rate429 = try change(.rate429, Double.self)
        self.rate500 = try change(.rate500, Double.self)
        self.rate503 = try change(.rate503, Double.self)
        self.goAwayAfterStreams = try change(.goAwayAfterStreams, Int.self)
        self.dropAfterStreams = try change(.dropAfterStreams, Int.self)
        self.maxConcurrentStreams = try change(.maxConcurrentStreams, Int.self)
        self.blackhole = try change(.blackhole, Bool.self)
        self.everyTokenBad = try change(.everyTokenBad, Bool.self)
        self.holdAnswers = try change(.holdAnswers, Bool.self)
        self.dropNow = try container.decodeIfPresent(Bool.self, forKey: .dropNow) ?? false
        self.seed = try container.decodeIfPresent(UInt64.self, forKey: .seed)
    }

    func apply(to faults: inout SimulatorFaults) {
        let defaults = SimulatorFaults()
        func apply<Value>(_ change: Change<Value>, _ keyPath: WritableKeyPath<SimulatorFaults, Value>) {
            switch change {
            case .keep: break
            case .reset: faults[keyPath: keyPath] = defaults[keyPath: keyPath]
            case .set(let value): faults[keyPath: keyPath] = value
            }
        }
        func apply<Value>(_ change: Change<Value>, _ keyPath: WritableKeyPath<SimulatorFaults, Value?>) {
            switch change {
            case .keep: break
            case .reset: faults[keyPath: keyPath] = nil
            case .set(let value): faults[keyPath: keyPath] = value
            }
        }
        apply(self.latencyMilliseconds, \.latencyMilliseconds)
        apply(self.rate429, \.rate429)
        apply(self.rate500, \.rate500)
        apply(self.rate503, \.rate503)
        apply(self.goAwayAfterStreams, \.goAwayAfterStreams)
        apply(self.dropAfterStreams, \.dropAfterStreams)
        apply(self.maxConcurrentStreams, \.maxConcurrentStreams)
        apply(self.blackhole, \.blackhole)
        apply(self.everyTokenBad, \.everyTokenBad)
        apply(self.holdAnswers, \.holdAnswers)
    }
}
