import Foundation
import PushTransport
import PushgateCore
import Testing
import WebPush
import WebPushSimulator
import WebPushTransport

@Suite("Web Push: WebPushPushService and WebPushClient against the simulator, over loopback TLS")
struct WebPushClientTests {
    @Test("subscriptions on an HTTP/2 and an HTTP/1.1-only origin get each message, decrypted and VAPID-verified")
    func deliveredOnBothOrigins() async throws {
        try await withWebPush { fixture in
            let subscriptions = try (0..<6).map { try fixture.subscribe(origin: $0 % 2) }
            let expiration = Int64(Date().timeIntervalSince1970) + 600
            let outcomes = try await fixture.send(
                #"{"team":"Lyon","title":"Goal!"}"#,
                to: subscriptions,
                expiration: .at(epochSeconds: expiration),
                key: "score"
            )
            #expect(outcomes.allSatisfy { $0.verdict == .delivered })
            for subscription in subscriptions {
                let received = fixture.simulator.received(subscriptionID: subscription.id)
                try #require(received.count == 1)
                #expect(received[0].text == #"{"team":"Lyon","title":"Goal!"}"#)
                #expect(received[0].httpVersion == (subscription.originIndex == 0 ? 2 : 1))
                #expect(received[0].vapidAudience == fixture.simulator.origins[subscription.originIndex])
                #expect(received[0].vapidPublicKey == fixture.key.publicKeyBase64URL)
                #expect(received[0].vapidSubject == "mailto:ops@example.com")
                #expect((590...600).contains(received[0].ttl) && received[0].topic == "score")
                #expect(received[0].urgency == "high")
            }
            // One token per origin, reused by every message.
            #expect(fixture.client.vapidSignatures == 2)
            #expect(fixture.simulator.stats().http2Requests == 3 && fixture.simulator.stats().http1Requests == 3)
        }
    }

    @Test("404 and 410 invalidate the subscription (as unregistered); the others are delivered")
    func goneSubscriptions() async throws {
        try await withWebPush { fixture in
            let subscriptions = try (0..<4).map { try fixture.subscribe(origin: $0 / 2) }
            try fixture.simulator.expire(subscriptionID: subscriptions[0].id, status: 410)
            try fixture.simulator.expire(subscriptionID: subscriptions[3].id, status: 404)
            let outcomes = try await fixture.send(to: subscriptions)
            #expect(outcomes[0].verdict == .invalidate(reason: .unregistered, at: nil) && outcomes[0].status == 410)
            #expect(outcomes[3].verdict == .invalidate(reason: .unregistered, at: nil) && outcomes[3].status == 404)
            #expect(outcomes[1].verdict == .delivered && outcomes[2].verdict == .delivered)
        }
    }

    @Test("413 and 400 fail the message, not the subscription")
    func refusedMessages() async throws {
        try await withWebPush { fixture in
            let subscriptions = try (0..<3).map { _ in try fixture.subscribe(origin: 1) }
            try fixture.simulator.script(.init(status: 413, subscriptionID: subscriptions[0].id))
            try fixture.simulator.script(.init(status: 400, subscriptionID: subscriptions[1].id))
            let outcomes = try await fixture.send(to: subscriptions)
            #expect(outcomes[0].verdict == .failed && outcomes[0].status == 413)
            #expect(outcomes[1].verdict == .failed && outcomes[1].status == 400)
            #expect(outcomes[2].verdict == .delivered)
            #expect(!outcomes[0].isConfigurationAlarm && !outcomes[1].isConfigurationAlarm)
        }
    }

    @Test("429 with Retry-After and 503 are retried, no earlier than Retry-After")
    func throttled() async throws {
        try await withWebPush { fixture in
            let subscriptions = try [fixture.subscribe(origin: 0), fixture.subscribe(origin: 1)]
            try fixture.simulator.script(.init(status: 429, retryAfter: "7", subscriptionID: subscriptions[0].id))
            try fixture.simulator.script(.init(status: 503, subscriptionID: subscriptions[1].id))
            let outcomes = try await fixture.send(to: subscriptions)
            #expect(outcomes[0].verdict == .retry && outcomes[0].notBefore == .seconds(7) && outcomes[0].status == 429)
            #expect(outcomes[1].verdict == .retry && outcomes[1].notBefore == nil && outcomes[1].status == 503)
            #expect(fixture.simulator.received().isEmpty)
        }
    }

    @Test("a 401 or 403 drops the origin's VAPID token: the message is resent once with a new one")
    func refusedTokenResigned() async throws {
        try await withWebPush { fixture in
            let subscriptions = try [fixture.subscribe(origin: 0), fixture.subscribe(origin: 1)]
            try fixture.simulator.script(.init(status: 401, subscriptionID: subscriptions[0].id))
            try fixture.simulator.script(.init(status: 403, subscriptionID: subscriptions[1].id))
            let outcomes = try await fixture.send(to: subscriptions)
            #expect(outcomes.allSatisfy { $0.verdict == .delivered })
            // Two origins, each signed once, then again after its refusal.
            #expect(fixture.client.vapidSignatures == 4)
            let tokens = Set(fixture.simulator.received().map(\.vapidExpiresAt))
            #expect(!tokens.isEmpty)
            #expect(fixture.simulator.stats().answeredByStatus == [401: 1, 403: 1])
        }
    }

    @Test("refused again with a fresh token: a configuration alarm, never an invalidation")
    func refusedTwiceIsAnAlarm() async throws {
        try await withWebPush { fixture in
            let subscriptions = try [fixture.subscribe(origin: 0), fixture.subscribe(origin: 1)]
            try fixture.simulator.script(.init(status: 403, count: 2, subscriptionID: subscriptions[0].id))
            try fixture.simulator.script(.init(status: 401, count: 2, subscriptionID: subscriptions[1].id))
            let outcomes = try await fixture.send(to: subscriptions)
            for outcome in outcomes {
                #expect(outcome.verdict == .configurationAlarm(held: false))
                #expect(outcome.isConfigurationAlarm)
            }
            // Each origin signed, refused, signed again, refused again: dropped, so the next message
            // signs a third token.
            #expect(fixture.client.vapidSignatures == 4)
            #expect(fixture.service.alarmMessage(reason: outcomes[0].reason).contains("VAPID"))
            let again = try await fixture.send(to: subscriptions)
            #expect(again.allSatisfy { $0.verdict == .delivered })
            #expect(fixture.client.vapidSignatures == 6)
        }
    }

    @Test("a subscription signed up for another VAPID key is refused 403: an alarm, the device kept")
    func otherKey() async throws {
        try await withWebPush { fixture in
            let other = VAPIDKey.generate()
            let subscription = try fixture.simulator.createSubscription(
                originIndex: 0,
                applicationServerKey: other.publicKeyBase64URL
            )
            let outcomes = try await fixture.send(to: [subscription])
            #expect(outcomes[0].verdict == .configurationAlarm(held: false) && outcomes[0].status == 403)
        }
    }

    @Test("a stored subscription that no longer parses fails with a bounded reason, never sent")
    func unparseableSubscription() async throws {
        try await withWebPush { fixture in
            let good = try fixture.subscribe(origin: 0)
            let goodToken = try WebPushSubscription(jsonBytes: Array(good.json.utf8)).deviceToken
            let broken = try DeviceToken(storageKey: "webpush:https://127.0.0.1:1/push/x BAAA AAAA")
            let outcomes = try await fixture.send(#"{"a":1}"#, toTokens: [broken, goodToken])
            #expect(outcomes[0].reason == WebPushPushService.invalidSubscription)
            #expect(outcomes[1].verdict == .delivered)
            #expect(fixture.simulator.stats().requests == 1)
        }
    }

    @Test(
        "a connection dropped mid-flight: its unanswered message is resent on a fresh connection, answered ones are not"
    )
    func droppedConnection() async throws {
        try await withWebPush { fixture in
            for origin in [0, 1] {
                let subscriptions = try (0..<8).map { _ in try fixture.subscribe(origin: origin) }
                let dropped = subscriptions[5]
                // Held long enough for the others to be answered first, then the connection is closed.
                try fixture.simulator.script(
                    .init(subscriptionID: dropped.id, latencyMilliseconds: 1500, dropsConnection: true)
                )
                let before = fixture.simulator.connections(originIndex: origin).opened
                let outcomes = try await fixture.send(to: subscriptions)
                #expect(outcomes.allSatisfy { $0.verdict == .delivered }, "origin \(origin): \(outcomes)")
                for subscription in subscriptions {
                    #expect(fixture.simulator.received(subscriptionID: subscription.id).count == 1, "origin \(origin)")
                }
                #expect(fixture.simulator.connections(originIndex: origin).opened > before)
            }
            #expect(fixture.simulator.stats().answeredByStatus[0] == 2)
        }
    }

    @Test("idle connections are closed after the idle timeout, on both origins")
    func idleClosed() async throws {
        try await withWebPush(client: { $0.idleTimeout = .milliseconds(300) }) { fixture in
            let subscriptions = try [fixture.subscribe(origin: 0), fixture.subscribe(origin: 1)]
            let outcomes = try await fixture.send(to: subscriptions)
            #expect(outcomes.allSatisfy { $0.verdict == .delivered })
            #expect(fixture.simulator.connections(originIndex: nil).opened == 2)
            try await eventually("every idle connection closed") {
                fixture.simulator.connections(originIndex: nil).open == 0
            }
            #expect(fixture.client.statistics.connections == 0)
            // The next message opens a connection again.
            #expect(try await fixture.send(to: [subscriptions[1]])[0].verdict == .delivered)
            #expect(fixture.simulator.connections(originIndex: 1).opened == 2)
        }
    }

    @Test("HTTP/1.1 takes several connections, at most the cap per origin")
    func capPerOrigin() async throws {
        try await withWebPush(
            simulator: { $0.latencyMilliseconds = 20 },
            client: { $0.maximumConnectionsPerOrigin = 3 }
        ) { fixture in
            let subscriptions = try (0..<60).map { _ in try fixture.subscribe(origin: 1) }
            let outcomes = try await fixture.send(to: subscriptions)
            #expect(outcomes.allSatisfy { $0.verdict == .delivered })
            let connections = fixture.simulator.connections(originIndex: 1)
            #expect(connections.peak <= 3)
            #expect(connections.opened >= 2, "one HTTP/1.1 connection carries one message at a time")
            #expect(fixture.simulator.stats().http1Requests == 60)
        }
    }

    @Test("the cap over all origins: a connection beyond it waits, and another origin's idle one closes for it")
    func capOverall() async throws {
        try await withWebPush(
            simulator: {
                $0.origins = (0..<3).map { _ in .init(offersHTTP2: false) }
                $0.latencyMilliseconds = 10
            },
            client: {
                $0.maximumConnections = 2
                $0.maximumConnectionsPerOrigin = 2
                // Far beyond the messages' 20 s: only a connection closed for the waiting origin lets
                // the third origin's messages go.
                $0.idleTimeout = .seconds(600)
            }
        ) { fixture in
            let subscriptions = try (0..<30).map { try fixture.subscribe(origin: $0 % 3) }
            let outcomes = try await fixture.send(to: subscriptions)
            #expect(outcomes.allSatisfy { $0.verdict == .delivered })
            #expect(fixture.simulator.connections(originIndex: nil).peak <= 2)
            for origin in 0..<3 {
                #expect(fixture.simulator.received().filter { $0.originIndex == origin }.count == 10)
            }
        }
    }

    @Test("a push service whose certificate the trust roots do not vouch for is never sent to")
    func unverifiedServer() async throws {
        try await withWebPush(client: {
            $0.trustRoots = .certificates([])
            $0.requestTimeout = .seconds(2)
        }) { fixture in
            let outcomes = try await fixture.send(to: [fixture.subscribe(origin: 0), fixture.subscribe(origin: 1)])
            for outcome in outcomes {
                // Never sent (connect_failed once an attempt has failed, deadline_exceeded on a machine too
                // busy to finish the first handshake in time): the dispatcher sends it again later.
                #expect(outcome.verdict == .retry, "\(outcome)")
                #expect(["connect_failed", "deadline_exceeded"].contains(outcome.failure?.label), "\(outcome)")
            }
            // The simulator was reached, and refused by the client's verification: no request came.
            #expect(fixture.simulator.connections(originIndex: nil).opened >= 1)
            #expect(fixture.simulator.stats().requests == 0)
        }
    }

    @Test("a request's message that cannot be built fails its browser devices, unsent")
    func invalidMessage() async throws {
        try await withWebPush { fixture in
            let subscription = try fixture.subscribe(origin: 0)
            let large = "{\"a\":\"" + String(repeating: "x", count: 4000) + "\"}"
            let outcomes = try await fixture.send(large, to: [subscription])
            #expect(outcomes[0].reason == WebPushPushService.invalidMessage)
            #expect(fixture.simulator.stats().requests == 0)
        }
    }

    @Test("withdraw takes back what is still queued; shutdown fails later messages")
    func withdrawAndShutdown() async throws {
        try await withWebPush(
            simulator: { $0.latencyMilliseconds = 300 },
            client: { $0.maximumConnectionsPerOrigin = 1 }
        ) { fixture in
            let subscriptions = try (0..<5).map { _ in try fixture.subscribe(origin: 1) }
            let collector = OutcomeCollector(expecting: 5)
            let request = NotificationRequest(
                id: try RequestID("w1"),
                payload: try Payload(jsonString: #"{"a":1}"#),
                createdAt: Date()
            )
            let prepared = try fixture.service.prepare(request, logger: .init(label: "test"))
            let sends = try subscriptions.enumerated().map {
                PushSend(
                    token: try WebPushSubscription(jsonBytes: Array($0.element.json.utf8)).deviceToken,
                    tag: UInt64($0.offset)
                )
            }
            let submission = prepared.submit(sends, sentAt: Date(), to: collector)
            // One HTTP/1.1 connection carries one message at a time: at least four are still queued
            // (the first may be written already).
            let withdrawn = fixture.service.withdraw(Array(submission.ids.dropFirst()))
            #expect(withdrawn == 4)
            let outcomes = await collector.all()
            #expect(outcomes.values.filter { $0.failure == .cancelled }.count == 4)
            #expect(outcomes[0]?.verdict == .delivered)
        }
    }
}
