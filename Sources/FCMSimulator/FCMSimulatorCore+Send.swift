import Foundation

extension FCMSimulatorCore {
    /// Fields of `message` (firebase.google.com/docs/reference/fcm/rest/v1/projects.messages).
    static let messageFields: Set<String> = [
        "name", "data", "notification", "android", "webpush", "apns", "fcm_options", "token", "topic", "condition",
    ]
    static let maximumPayloadBytes = 4096
    static let maximumTopicPayloadBytes = 2048
    static let maximumTTLSeconds = 2_419_200.0

    /// `POST /v1/projects/{project}/messages:send`: bearer token, then faults on demand, then the
    /// message's rules, then the device's state.
    func send(_ request: FCMSimulatorRequest, projectID: String) -> FCMSimulatorResponse {
        state.withLock { $0.stats.sends += 1 }
        let response = checkedSend(request, projectID: projectID)
        if response.status != 200 { state.withLock { $0.stats.rejected += 1 } }
        return response
    }

    private func checkedSend(_ request: FCMSimulatorRequest, projectID: String) -> FCMSimulatorResponse {
        let now = self.now()
        let authorization = request.header("authorization") ?? ""
        let bearer = authorization.lowercased().hasPrefix("bearer ") ? String(authorization.dropFirst(7)) : nil
        let issued = bearer.flatMap { token in
            state.withLock { $0.refusingAccessTokens ? nil : $0.accessTokens[token] }
        }
        guard let issued, issued.expiresAt > now else {
            return .fcmError(
                401,
                canonical: "UNAUTHENTICATED",
                message: "Request had invalid authentication credentials. Expected OAuth 2 access token.",
                headers: [("www-authenticate", "Bearer realm=\"https://accounts.google.com/\"")]
            )
        }
        guard issued.projectID == projectID else {
            return .fcmError(403, canonical: "PERMISSION_DENIED", message: "Permission denied on project \(projectID).")
        }
        guard let body = try? JSONSerialization.jsonObject(with: Data(request.body)) as? [String: Any],
            let message = body["message"] as? [String: Any]
        else {
            return Self.invalid("Invalid JSON payload received: expected an object with a message.")
        }
        let token = message["token"] as? String
        if let injected = takeInjected(token: token) { return injected }
        if let problem = Self.validate(message) { return Self.invalid(problem) }
        if let token, state.withLock({ $0.unregistered.contains(token) }) {
            return Self.answer(for: "UNREGISTERED")
        }
        if body["validate_only"] as? Bool == true {
            return .json(200, ["name": "projects/\(projectID)/messages/fake_message_id"])
        }
        let id = state.withLock { state in
            defer { state.nextMessageID += 1 }
            return state.nextMessageID
        }
        let name = "projects/\(projectID)/messages/0:\(id)"
        let json = (try? JSONSerialization.data(withJSONObject: message, options: [.sortedKeys])) ?? Data()
        record(
            FCMAcceptedMessage(
                name: name,
                projectID: projectID,
                token: token,
                topic: message["topic"] as? String,
                condition: message["condition"] as? String,
                messageJSON: String(decoding: json, as: UTF8.self),
                receivedAt: now,
                clientEmail: issued.clientEmail
            )
        )
        return .json(200, ["name": name])
    }

    /// The first injected error that applies to `token`, counted down.
    private func takeInjected(token: String?) -> FCMSimulatorResponse? {
        let injected = state.withLock { state -> FCMInjectedError? in
            guard let index = state.injected.firstIndex(where: { $0.token == nil || $0.token == token }) else {
                return nil
            }
            let error = state.injected[index]
            state.injected[index].count -= 1
            if state.injected[index].count <= 0 { state.injected.remove(at: index) }
            return error
        }
        guard let injected else { return nil }
        return Self.answer(for: injected.errorCode, retryAfter: injected.retryAfterSeconds)
    }

    static func answer(for errorCode: String, retryAfter: Int? = nil) -> FCMSimulatorResponse {
        let entry = FCMInjectedError.table[errorCode] ?? (500, "UNKNOWN", "Unknown error.")
        return .fcmError(
            entry.status,
            canonical: entry.canonical,
            message: entry.message,
            errorCode: errorCode,
            headers: retryAfter.map { [("retry-after", String($0))] } ?? []
        )
    }

    static func invalid(_ problem: String) -> FCMSimulatorResponse {
        .fcmError(400, canonical: "INVALID_ARGUMENT", message: problem, errorCode: "INVALID_ARGUMENT")
    }

    /// Google's rules for a message, or nil when it follows them.
    static func validate(_ message: [String: Any]) -> String? {
        if let unknown = message.keys.sorted().first(where: { !messageFields.contains($0) }) {
            return "Invalid JSON payload received. Unknown name \"\(unknown)\" at 'message'."
        }
        let targets = ["token", "topic", "condition"].filter { message[$0] != nil }
        guard targets.count == 1 else { return "Exactly one of token, topic or condition must be set." }
        guard let target = message[targets[0]] as? String, !target.isEmpty else {
            return "\(targets[0]) must be a non-empty string."
        }
        if let data = message["data"] {
            guard let data = data as? [String: Any] else { return "data must be a map." }
            if let key = data.keys.sorted().first(where: { !(data[$0] is String) }) {
                return "Invalid value at 'message.data[\(key)].value' (TYPE_STRING)"
            }
        }
        if let notification = message["notification"] {
            guard let notification = notification as? [String: Any] else { return "notification must be an object." }
            for (key, value) in notification {
                guard ["title", "body", "image"].contains(key) else {
                    return "Invalid JSON payload received. Unknown name \"\(key)\" at 'message.notification'."
                }
                guard value is String else { return "notification.\(key) must be a string." }
            }
        }
        if let problem = validateAndroid(message["android"]) { return problem }
        var payload: [String: Any] = [:]
        payload["data"] = message["data"]
        payload["notification"] = message["notification"]
        let size = (try? JSONSerialization.data(withJSONObject: payload))?.count ?? 0
        let limit = targets[0] == "token" ? maximumPayloadBytes : maximumTopicPayloadBytes
        guard size <= limit else { return "Message is too big: \(size) bytes of payload; the limit is \(limit)." }
        return nil
    }

    private static func validateAndroid(_ value: Any?) -> String? {
        guard let value else { return nil }
        guard let android = value as? [String: Any] else { return "android must be an object." }
        if let priority = android["priority"] {
            guard let priority = priority as? String, ["NORMAL", "HIGH"].contains(priority) else {
                return "Invalid value at 'message.android.priority': expected NORMAL or HIGH."
            }
        }
        if let ttl = android["ttl"] {
            guard let text = ttl as? String, text.hasSuffix("s"), let seconds = Double(text.dropLast()), seconds >= 0
            else { return "Invalid value at 'message.android.ttl': expected a duration like \"3.5s\"." }
            guard seconds <= maximumTTLSeconds else { return "message.android.ttl must be at most 2419200s (28 days)." }
        }
        if let key = android["collapse_key"], !(key is String) {
            return "message.android.collapse_key must be a string."
        }
        return nil
    }
}
