import Foundation

extension WebPushSimulatorCore {
    /// RFC 8030 §5: a message is at most 4,096 bytes.
    static let maximumMessageBytes = 4096
    static let urgencies: Set<String> = ["very-low", "low", "normal", "high"]

    /// `POST /push/{id}`, checked in this order: the subscription (404, or its 404/410 once expired),
    /// VAPID (401; 403 when the key is not the one the subscription was made for), `TTL` (400), `Urgency`
    /// and `Topic` (400), `Content-Encoding` (415), size (413), decryption (400); then a scripted answer
    /// if one applies; otherwise 201 with a `Location`, and the message is recorded.
    func push(_ request: WebPushSimulatorRequest, id: String) -> WebPushSimulatorResponse {
        let authorization = request.header("authorization")
        let found = state.withLock { state -> (Subscription, String, Bool, SimulatorVAPIDVerifier.Verified?)? in
            guard let subscription = state.subscriptions[id], subscription.info.originIndex == request.originIndex
            else { return nil }
            let decrypts = state.checking.messageArrived()
            let known = state.checking.verifiedToken(
                header: authorization,
                originIndex: request.originIndex,
                now: now()
            )
            return (subscription, state.origins[request.originIndex], decrypts, known)
        }
        guard let (subscription, origin, sampled, knownToken) = found else {
            return .refusal(404, "no such subscription")
        }
        if let gone = subscription.goneStatus { return .refusal(gone, "subscription expired or unsubscribed") }

        let vapid: SimulatorVAPIDVerifier.Verified
        if let knownToken {
            vapid = knownToken
        } else {
            do {
                vapid = try SimulatorVAPIDVerifier.verify(authorization, origin: origin, now: now())
            } catch {
                return .refusal(401, error.description, headers: [("www-authenticate", "vapid")])
            }
            state.withLock { state in
                state.stats.tokensVerified += 1
                if let authorization {
                    state.checking.tokenVerified(vapid, header: authorization, originIndex: request.originIndex)
                }
            }
        }
        // Compared as bytes decoded once each (decoding both per message was 40 % of a throughput run).
        if let expected = subscription.applicationServerKeyBytes, expected != vapid.publicKeyBytes {
            return .refusal(403, "the VAPID key is not the applicationServerKey this subscription was made with")
        }
        guard let ttlText = request.header("ttl"), let ttl = Int(ttlText.trimmingCharacters(in: .whitespaces)),
            ttl >= 0
        else { return .refusal(400, "TTL header missing or not a non-negative integer") }
        let urgency = request.header("urgency")
        if let urgency, !Self.urgencies.contains(urgency) {
            return .refusal(400, "Urgency must be very-low, low, normal or high")
        }
        let topic = request.header("topic")
        if let topic {
            let isBase64URL = topic.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }
            guard !topic.isEmpty, topic.count <= 32, isBase64URL else {
                return .refusal(400, "Topic must be 1 to 32 base64url characters")
            }
        }
        guard request.header("content-encoding")?.lowercased() == "aes128gcm" else {
            return .refusal(415, "Content-Encoding must be aes128gcm")
        }
        guard request.body.count <= Self.maximumMessageBytes else {
            return .refusal(413, "message of \(request.body.count) bytes; at most 4096")
        }
        var plaintext: [UInt8]?
        if decryptsMessages && sampled {
            do {
                plaintext = try SimulatorMessageDecryption.decrypt(
                    request.body,
                    userAgentKey: subscription.key,
                    authSecret: subscription.authSecret
                )
            } catch {
                return .refusal(400, "cannot decrypt: \(error.description)")
            }
            state.withLock { $0.stats.decrypted += 1 }
        } else {
            do {
                _ = try SimulatorRecordHeader(parsing: request.body)
            } catch {
                return .refusal(400, "not an aes128gcm Web Push message: \(error.description)")
            }
        }
        let scripted = takeScripted(subscriptionID: id, originIndex: request.originIndex)
        if let scripted {
            if scripted.dropsConnection {
                var dropped = WebPushSimulatorResponse(status: 0, dropsConnection: true)
                dropped.extraLatencyMilliseconds = scripted.latencyMilliseconds
                return dropped
            }
            if scripted.status != 201 {
                var response = WebPushSimulatorResponse.refusal(
                    scripted.status,
                    "scripted answer",
                    headers: scripted.retryAfter.map { [("retry-after", $0)] } ?? []
                )
                response.extraLatencyMilliseconds = scripted.latencyMilliseconds
                return response
            }
        }
        let messageID = state.withLock { state in
            defer { state.nextMessage += 1 }
            if let earlier = state.subscriptions[id]?.delivered {
                state.subscriptions[id]?.delivered = earlier + 1
                if earlier == 0 { state.stats.subscriptionsDelivered += 1 } else { state.stats.duplicates += 1 }
            }
            state.received.append(
                WebPushReceivedMessage(
                    subscriptionID: id,
                    originIndex: request.originIndex,
                    plaintext: plaintext,
                    ttl: ttl,
                    urgency: urgency,
                    topic: topic,
                    vapidSubject: vapid.subject,
                    vapidAudience: vapid.audience,
                    vapidExpiresAt: vapid.expiresAt,
                    vapidPublicKey: vapid.publicKey,
                    httpVersion: request.httpVersion,
                    bodyBytes: request.body.count,
                    receivedAt: now()
                )
            )
            while state.received.count > recordLimit { state.received.removeFirst() }
            return state.nextMessage
        }
        var created = WebPushSimulatorResponse(status: 201, headers: [("location", "\(origin)/message/m\(messageID)")])
        created.extraLatencyMilliseconds = scripted?.latencyMilliseconds ?? 0
        return created
    }

    private func takeScripted(subscriptionID: String, originIndex: Int) -> WebPushScriptedAnswer? {
        state.withLock { state in
            guard
                let index = state.scripted.firstIndex(where: {
                    $0.applies(to: subscriptionID, originIndex: originIndex)
                })
            else { return nil }
            let answer = state.scripted[index]
            state.scripted[index].count -= 1
            if state.scripted[index].count == 0 { state.scripted.remove(at: index) }
            return answer
        }
    }
}
