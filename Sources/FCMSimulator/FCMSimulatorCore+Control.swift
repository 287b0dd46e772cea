import Foundation

extension FCMSimulatorCore {
    /// The control API (JSON over HTTP/1.1 on its own port):
    ///
    /// | request | effect |
    /// | --- | --- |
    /// | `GET /messages[?token=T]` | `{"messages":[{name, project, token, topic, condition, message}]}` |
    /// | `GET /stats` | counters (`devices`: distinct tokens accepted; `duplicates`: accepted again) |
    /// | `GET /faults` | `{"latency_ms": N}` |
    /// | `POST /faults` `{"latency_ms": N}` | hold every later answer of the TLS port N ms (`null`: 0) |
    /// | `POST /unregister` `{"token":"T"}` | later sends to T answer 404 UNREGISTERED |
    /// | `POST /errors` `{"errorCode":"QUOTA_EXCEEDED","count":2,"retryAfter":2,"token":"T"}` | answer it next |
    /// | `POST /access-tokens/expire` | every issued access token expires now |
    /// | `POST /access-tokens/revoke` | every access token issued so far is revoked (401); fresh ones work |
    /// | `POST /access-tokens/refuse` `{"refuse":true}` | every send answers 401, even with a fresh token |
    /// | `POST /token-faults` `{"status":503,"seconds":8,"revoke_access_tokens":true,"after_accepted":500}` | token-endpoint faults (``FCMTokenEndpointFaults``): `status`, `error` (OAuth code: 400 `invalid_grant`), `latency_ms`, `drop`, `revoke_access_tokens`, for `seconds` (or until cleared), from now or `after_accepted` more messages |
    /// | `GET /token-faults`, `DELETE /token-faults` | the faults set (and `in_force`); clear them |
    /// | `POST /reset` | forget messages, tokens, states, injected errors, counters (not the latency) |
    func control(_ request: FCMSimulatorRequest) -> FCMSimulatorResponse {
        let body = (try? JSONSerialization.jsonObject(with: Data(request.body))) as? [String: Any] ?? [:]
        switch (request.method, String(request.path)) {
        case ("GET", "/messages"):
            let token = request.query("token")
            let messages = messages(token: token).map { message -> [String: Any] in
                var entry: [String: Any] = ["name": message.name, "project": message.projectID]
                entry["token"] = message.token
                entry["topic"] = message.topic
                entry["condition"] = message.condition
                entry["message"] = try? JSONSerialization.jsonObject(with: Data(message.messageJSON.utf8))
                return entry
            }
            return .json(200, ["messages": messages])
        case ("GET", "/stats"):
            let stats = state.withLock { $0.stats }
            return .json(
                200,
                [
                    "tokenRequests": stats.tokenRequests, "accessTokensIssued": stats.accessTokensIssued,
                    "sends": stats.sends, "accepted": stats.accepted, "rejected": stats.rejected,
                    "devices": stats.devices, "duplicates": stats.duplicates,
                    "tokenFaultAnswers": stats.tokenFaultAnswers,
                ]
            )
        case ("GET", "/faults"):
            return .json(200, ["latency_ms": latencyMilliseconds])
        case ("POST", "/faults"):
            return setFaults(request.body)
        case ("POST", "/unregister"):
            guard let token = body["token"] as? String, !token.isEmpty else {
                return .json(400, ["error": "token is required"])
            }
            state.withLock { _ = $0.unregistered.insert(token) }
            return .json(200, ["ok": true])
        case ("POST", "/errors"):
            guard let code = body["errorCode"] as? String, FCMInjectedError.table[code] != nil else {
                let known = FCMInjectedError.table.keys.sorted().joined(separator: ", ")
                return .json(400, ["error": "errorCode must be one of \(known)"])
            }
            inject(
                FCMInjectedError(
                    errorCode: code,
                    count: (body["count"] as? NSNumber)?.intValue ?? 1,
                    retryAfterSeconds: (body["retryAfter"] as? NSNumber)?.intValue,
                    token: body["token"] as? String
                )
            )
            return .json(200, ["ok": true])
        case ("POST", "/access-tokens/expire"):
            expireAccessTokens()
            return .json(200, ["ok": true])
        case ("POST", "/access-tokens/revoke"):
            revokeAccessTokens()
            return .json(200, ["ok": true])
        case ("POST", "/token-faults"):
            do throws(FCMTokenEndpointFaults.FaultError) {
                let faults = try FCMTokenEndpointFaults(jsonBytes: request.body)
                setTokenFaults(faults)
                return .json(200, faults.json)
            } catch {
                return .json(400, ["error": error.text])
            }
        case ("GET", "/token-faults"):
            guard let (faults, inForce) = tokenFaults() else { return .json(200, ["faults": NSNull()]) }
            return .json(200, ["faults": faults.json, "in_force": inForce])
        case ("DELETE", "/token-faults"):
            clearTokenFaults()
            return .json(200, ["ok": true])
        case ("POST", "/access-tokens/refuse"):
            refuseAccessTokens(body["refuse"] as? Bool ?? true)
            return .json(200, ["ok": true])
        case ("POST", "/reset"):
            reset()
            return .json(200, ["ok": true])
        default:
            return .json(404, ["error": "no route \(request.method) \(request.path)"])
        }
    }

    /// `POST /faults`: only `latency_ms` (an integer ≥ 0, or null for 0); anything else is refused.
    private func setFaults(_ body: [UInt8]) -> FCMSimulatorResponse {
        guard let object = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any] else {
            return .json(400, ["error": "expected a JSON object"])
        }
        if let unknown = object.keys.sorted().first(where: { $0 != "latency_ms" }) {
            return .json(400, ["error": "unknown key \(unknown); the FCM simulator's faults: latency_ms"])
        }
        guard let value = object["latency_ms"] else { return .json(200, ["latency_ms": latencyMilliseconds]) }
        let milliseconds: Int
        if value is NSNull {
            milliseconds = 0
        } else if let decoded = try? JSONDecoder().decode([String: Int].self, from: Data(body))["latency_ms"],
            decoded >= 0
        {
            milliseconds = decoded
        } else {
            return .json(400, ["error": "latency_ms must be an integer ≥ 0"])
        }
        setLatency(milliseconds: milliseconds)
        return .json(200, ["latency_ms": milliseconds])
    }

    func setLatency(milliseconds: Int) {
        state.withLock { $0.latencyMilliseconds = max(0, milliseconds) }
    }

    func messages(token: String?) -> [FCMAcceptedMessage] {
        let all = state.withLock { $0.accepted }
        guard let token else { return all }
        return all.filter { $0.token == token }
    }

    func refuseAccessTokens(_ refuse: Bool) {
        state.withLock { $0.refusingAccessTokens = refuse }
    }

    func inject(_ error: FCMInjectedError) {
        guard error.count > 0 else { return }
        state.withLock { $0.injected.append(error) }
    }
}
