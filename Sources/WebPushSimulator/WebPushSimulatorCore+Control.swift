import Foundation

extension WebPushSimulatorCore {
    /// The control API (JSON over HTTP/1.1 on its own port):
    ///
    /// | request | effect |
    /// | --- | --- |
    /// | `GET /origins` | `{"origins":["https://127.0.0.1:P", ...]}` |
    /// | `POST /subscriptions` `{"origin":0,"applicationServerKey":"B..."}` | a new subscription: `{"id", "origin", "subscription": PushSubscription JSON, "privateKey"}` |
    /// | `POST /subscriptions/batch` `{"origin":0,"applicationServerKey":"B...","count":N}` | N new subscriptions, as text: a line `ENDPOINT P256DH AUTH` each |
    /// | `GET /messages[?subscription=ID]` | `{"messages":[{subscription, origin, payload, ttl, urgency, topic, vapid: {sub, aud, exp, k}, http}]}` |
    /// | `GET /stats` | counters |
    /// | `POST /expire` `{"subscription":ID,"status":410}` | later messages to it answer 404 or 410 |
    /// | `POST /answers` `{"status":429,"retryAfter":"2","count":1,"subscription":ID,"origin":0,"latency_ms":0,"drop":false}` | answer that to the next matching messages that pass the checks |
    /// | `GET /faults`, `POST /faults` `{"latency_ms": N}` | hold every push answer N ms |
    /// | `POST /reset` | forget messages, scripted answers, expiries and counters (not subscriptions) |
    func control(_ request: WebPushSimulatorRequest) -> WebPushSimulatorResponse {
        let body = (try? JSONSerialization.jsonObject(with: Data(request.body))) as? [String: Any] ?? [:]
        do throws(WebPushSimulatorError) {
            switch (request.method, String(request.path)) {
            case ("GET", "/origins"):
                return .json(200, ["origins": state.withLock { $0.origins }])
            case ("POST", "/subscriptions"):
                let subscription = try createSubscription(
                    originIndex: (body["origin"] as? NSNumber)?.intValue ?? 0,
                    applicationServerKey: body["applicationServerKey"] as? String
                )
                let json = (try? JSONSerialization.jsonObject(with: Data(subscription.json.utf8))) ?? [:]
                return .json(
                    200,
                    [
                        "id": subscription.id, "origin": subscription.originIndex, "subscription": json,
                        "privateKey": subscription.privateKey,
                    ]
                )
            case ("POST", "/subscriptions/batch"):
                let lines = try createSubscriptions(
                    count: (body["count"] as? NSNumber)?.intValue ?? 0,
                    originIndex: (body["origin"] as? NSNumber)?.intValue ?? 0,
                    applicationServerKey: body["applicationServerKey"] as? String
                )
                return WebPushSimulatorResponse(status: 200, body: Array(lines.utf8), contentType: "text/plain")
            case ("GET", "/messages"):
                let messages = received(subscriptionID: request.query("subscription")).map(Self.json)
                return .json(200, ["messages": messages])
            case ("GET", "/stats"):
                let stats = state.withLock { $0.stats }
                var byStatus: [String: Int] = [:]
                for (status, count) in stats.answeredByStatus { byStatus[String(status)] = count }
                return .json(
                    200,
                    [
                        "requests": stats.requests, "delivered": stats.delivered, "answeredByStatus": byStatus,
                        "http2Requests": stats.http2Requests, "http1Requests": stats.http1Requests,
                        "subscriptionsDelivered": stats.subscriptionsDelivered, "duplicates": stats.duplicates,
                        "checkedOnWorkers": stats.checkedOnWorkers, "decrypted": stats.decrypted,
                        "tokensVerified": stats.tokensVerified,
                    ]
                )
            case ("POST", "/expire"):
                guard let id = body["subscription"] as? String else {
                    throw .invalidRequest("subscription is required")
                }
                try expire(id, status: (body["status"] as? NSNumber)?.intValue ?? 410)
                return .json(200, ["ok": true])
            case ("POST", "/answers"):
                try script(
                    WebPushScriptedAnswer(
                        status: (body["status"] as? NSNumber)?.intValue ?? 503,
                        retryAfter: (body["retryAfter"] as? String) ?? (body["retryAfter"] as? NSNumber)?.stringValue,
                        count: (body["count"] as? NSNumber)?.intValue ?? 1,
                        subscriptionID: body["subscription"] as? String,
                        originIndex: (body["origin"] as? NSNumber)?.intValue,
                        latencyMilliseconds: (body["latency_ms"] as? NSNumber)?.intValue ?? 0,
                        dropsConnection: body["drop"] as? Bool ?? false
                    )
                )
                return .json(200, ["ok": true])
            case ("GET", "/faults"):
                return .json(200, ["latency_ms": latencyMilliseconds])
            case ("POST", "/faults"):
                let latency: Int? =
                    (body["latency_ms"] as? NSNumber)?.intValue ?? (body["latency_ms"] is NSNull ? 0 : nil)
                guard let latency, latency >= 0 else {
                    throw .invalidRequest("latency_ms must be a number of milliseconds, at least 0")
                }
                setLatency(milliseconds: latency)
                return .json(200, ["latency_ms": latency])
            case ("POST", "/reset"):
                reset()
                return .json(200, ["ok": true])
            default:
                return .json(404, ["error": "no route \(request.method) \(request.path)"])
            }
        } catch {
            return .json(400, ["error": error.description])
        }
    }

    static func json(_ message: WebPushReceivedMessage) -> [String: Any] {
        var entry: [String: Any] = [
            "subscription": message.subscriptionID, "origin": message.originIndex, "ttl": message.ttl,
            "http": message.httpVersion, "bytes": message.bodyBytes,
        ]
        entry["payload"] = message.text
        entry["urgency"] = message.urgency
        entry["topic"] = message.topic
        var vapid: [String: Any] = ["aud": message.vapidAudience, "exp": message.vapidExpiresAt]
        vapid["sub"] = message.vapidSubject
        vapid["k"] = message.vapidPublicKey
        entry["vapid"] = vapid
        return entry
    }
}
