import AsyncHTTPClient
import Crypto
import Foundation
import PushgateCore
import Testing
import WebPush
import WebPushSimulator

@Suite("Web Push: the WebPush module against the simulator, over loopback TLS")
struct WebPushSimulatorTests {
    @Test("messages from WebPush are decrypted and their VAPID verified, on an HTTP/2 and an HTTP/1.1-only origin")
    func delivered() async throws {
        try await WebPushSimulator.withRunning { simulator in
            try await withClient(trusting: simulator) { client in
                var sender = Sender()
                let first = try simulator.createSubscription(originIndex: 0)
                let second = try simulator.createSubscription(originIndex: 1)
                let expiration = Int64(Date().timeIntervalSince1970) + 600
                for (subscription, text) in [(first, #"{"team":"Lyon"}"#), (second, "second")] {
                    let message = try sender.message(
                        text,
                        to: subscription,
                        expiration: .at(epochSeconds: expiration),
                        pushType: .background,
                        priority: .conservePower,
                        key: "score"
                    )
                    let answer = try await post(client, message.url, headers: message.headers, body: message.body)
                    #expect(answer.status == 201, "\(answer.body)")
                    #expect(
                        answer.headers.first(name: "location")?.hasPrefix(simulator.origins[subscription.originIndex])
                            == true
                    )
                    #expect(WebPushAnswer.classify(status: answer.status, now: Date()) == .delivered)
                }
                let onFirst = simulator.received(subscriptionID: first.id)
                let onSecond = simulator.received(subscriptionID: second.id)
                try #require(onFirst.count == 1 && onSecond.count == 1)
                #expect(onFirst[0].text == #"{"team":"Lyon"}"#)
                #expect(onSecond[0].text == "second")
                #expect(onFirst[0].httpVersion == 2)
                #expect(onSecond[0].httpVersion == 1)
                #expect((590...600).contains(onFirst[0].ttl))
                #expect(onFirst[0].urgency == "low" && onFirst[0].topic == "score")
                #expect(onFirst[0].vapidAudience == simulator.origins[0])
                #expect(onSecond[0].vapidAudience == simulator.origins[1])
                #expect(onFirst[0].vapidSubject == "mailto:ops@example.com")
                #expect(onFirst[0].vapidPublicKey == sender.key.publicKeyBase64URL)
                let stats = simulator.stats()
                #expect(stats.delivered == 2 && stats.http2Requests == 1 && stats.http1Requests == 1)
            }
        }
    }

    @Test("200 messages at once to 50 subscriptions on both origins: each decrypted once, for the right browser")
    func concurrent() async throws {
        try await WebPushSimulator.withRunning { simulator in
            try await withClient(trusting: simulator) { client in
                var sender = Sender()
                let subscriptions = try (0..<50).map { try simulator.createSubscription(originIndex: $0 % 2) }
                var messages: [(url: String, headers: [(String, String)], body: [UInt8])] = []
                for index in 0..<200 {
                    messages.append(try sender.message("m\(index)", to: subscriptions[index % 50]))
                }
                let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                    for message in messages {
                        group.addTask {
                            try await post(client, message.url, headers: message.headers, body: message.body).status
                        }
                    }
                    return try await group.reduce(into: [Int]()) { $0.append($1) }
                }
                #expect(statuses.count == 200 && statuses.allSatisfy { $0 == 201 })
                for (index, subscription) in subscriptions.enumerated() {
                    let texts = Set(simulator.received(subscriptionID: subscription.id).compactMap(\.text))
                    #expect(texts == Set(stride(from: index, to: 200, by: 50).map { "m\($0)" }))
                }
                #expect(simulator.stats().delivered == 200)
            }
        }
    }

    @Test("a 3,993-byte message reaches the browser whole (the 4,096-byte encrypted limit)")
    func largest() async throws {
        try await WebPushSimulator.withRunning { simulator in
            try await withClient(trusting: simulator) { client in
                var sender = Sender()
                let subscription = try simulator.createSubscription()
                let text = String(repeating: "w", count: 3993)
                let message = try sender.message(text, to: subscription)
                #expect(message.body.count == 4096)
                let answer = try await post(client, message.url, headers: message.headers, body: message.body)
                #expect(answer.status == 201, "\(answer.body)")
                #expect(simulator.received(subscriptionID: subscription.id).first?.text == text)
            }
        }
    }

    @Test("VAPID is checked: no header, another origin's aud, expired, over 24 h, bad signature → 401; other key → 403")
    func vapidRefusals() async throws {
        try await WebPushSimulator.withRunning { simulator in
            try await withClient(trusting: simulator) { client in
                var sender = Sender()
                let subscription = try simulator.createSubscription(
                    applicationServerKey: sender.key.publicKeyBase64URL
                )
                let good = try sender.message("x", to: subscription)
                let plain = good.headers.filter { $0.0 != "authorization" }
                let origin = try WebPushSubscription(jsonBytes: Array(subscription.json.utf8)).origin
                let otherOrigin = try WebPushSubscription(
                    jsonBytes: Array(try simulator.createSubscription(originIndex: 1).json.utf8)
                ).origin
                let now = Date()
                func vapid(_ audience: WebPushOrigin, expiresIn seconds: TimeInterval, key: VAPIDKey? = nil) -> String {
                    VAPIDToken(
                        key: key ?? sender.key,
                        subject: sender.subject,
                        audience: audience,
                        expiresAt: now.addingTimeInterval(seconds)
                    ).authorization
                }
                var tampered = vapid(origin, expiresIn: 3600)
                let signatureStart = tampered.range(of: ", k=")!.lowerBound
                let index = tampered.index(signatureStart, offsetBy: -5)
                tampered.replaceSubrange(index...index, with: tampered[index] == "A" ? "B" : "A")
                let cases: [(String?, Int)] = [
                    (nil, 401),
                    (vapid(otherOrigin, expiresIn: 3600), 401),
                    (vapid(origin, expiresIn: -10), 401),
                    (vapid(origin, expiresIn: 25 * 3600), 401),
                    (tampered, 401),
                    (vapid(origin, expiresIn: 3600, key: VAPIDKey.generate()), 403),
                    (vapid(origin, expiresIn: 3600), 201),
                ]
                for (authorization, status) in cases {
                    let headers = plain + (authorization.map { [("authorization", $0)] } ?? [])
                    let answer = try await post(client, good.url, headers: headers, body: good.body)
                    #expect(answer.status == status, "\(authorization ?? "none"): \(answer.body)")
                    if status == 401 || status == 403 {
                        #expect(
                            WebPushAnswer.classify(status: answer.status, now: now)
                                == .configurationAlarm(status: status)
                        )
                    }
                }
                #expect(simulator.received().count == 1)
            }
        }
    }

    @Test("the message is checked: TTL, Urgency, Topic, encoding, size, decryption, unknown subscription")
    func messageRefusals() async throws {
        try await WebPushSimulator.withRunning { simulator in
            try await withClient(trusting: simulator) { client in
                var sender = Sender()
                let subscription = try simulator.createSubscription()
                let good = try sender.message("x", to: subscription)
                func replacing(_ name: String, with value: String?) -> [(String, String)] {
                    good.headers.filter { $0.0 != name } + (value.map { [(name, $0)] } ?? [])
                }
                // Encrypted for another subscription's keys (same endpoint): the simulator cannot read it.
                var wrongKeys =
                    try JSONSerialization.jsonObject(
                        with: Data(try simulator.createSubscription().json.utf8)
                    ) as! [String: Any]
                wrongKeys["endpoint"] = subscription.endpoint
                let wrong = try WebPushSubscription(
                    jsonBytes: Array(try JSONSerialization.data(withJSONObject: wrongKeys))
                )
                let cases: [([(String, String)], [UInt8], String, Int)] = [
                    (replacing("ttl", with: nil), good.body, good.url, 400),
                    (replacing("ttl", with: "-1"), good.body, good.url, 400),
                    (replacing("urgency", with: "urgent"), good.body, good.url, 400),
                    (replacing("topic", with: String(repeating: "t", count: 33)), good.body, good.url, 400),
                    (replacing("content-encoding", with: "aesgcm"), good.body, good.url, 415),
                    (good.headers, try WebPushEncryption.encrypt([1], for: wrong), good.url, 400),
                    (good.headers, Array(good.body.dropLast()), good.url, 400),
                    (good.headers, good.body + [UInt8](repeating: 0, count: 4097 - good.body.count), good.url, 413),
                    (good.headers, good.body, simulator.origins[0] + "/push/nobody", 404),
                    // The subscription belongs to origin 0: origin 1 does not know it.
                    (good.headers, good.body, simulator.origins[1] + "/push/\(subscription.id)", 404),
                ]
                for (headers, body, url, status) in cases {
                    let answer = try await post(client, url, headers: headers, body: body)
                    #expect(answer.status == status, "\(answer.body)")
                }
                #expect(simulator.received().isEmpty)
                #expect(WebPushAnswer.classify(status: 413, now: Date()) == .failMessage(status: 413))
            }
        }
    }

    @Test("scripted answers: 410 and 404 expiries, 429 with Retry-After, 503 per origin, latency, dropped connections")
    func scripted() async throws {
        try await WebPushSimulator.withRunning { simulator in
            try await withClient(trusting: simulator) { client in
                var sender = Sender()
                let gone = try simulator.createSubscription()
                let busy = try simulator.createSubscription()
                let other = try simulator.createSubscription(originIndex: 1)
                try simulator.expire(subscriptionID: gone.id, status: 410)
                try simulator.script(
                    WebPushScriptedAnswer(status: 429, retryAfter: "7", count: 2, subscriptionID: busy.id)
                )
                try simulator.script(WebPushScriptedAnswer(status: 503, originIndex: 1))
                func send(_ subscription: WebPushSimulatorSubscription) async throws -> WebPushAnswer {
                    let message = try sender.message("m", to: subscription)
                    let answer = try await post(client, message.url, headers: message.headers, body: message.body)
                    return WebPushAnswer.classify(
                        status: answer.status,
                        retryAfter: answer.headers.first(name: "retry-after"),
                        now: Date()
                    )
                }
                #expect(try await send(gone) == .invalidateSubscription(status: 410))
                #expect(try await send(busy) == .retry(status: 429, after: .seconds(7)))
                #expect(try await send(busy) == .retry(status: 429, after: .seconds(7)))
                #expect(try await send(busy) == .delivered)
                #expect(try await send(other) == .retry(status: 503, after: nil))
                #expect(try await send(other) == .delivered)
                try simulator.expire(subscriptionID: busy.id, status: 404)
                #expect(try await send(busy) == .invalidateSubscription(status: 404))

                // A held answer is held; a dropped connection is an error on the client's side.
                let slow = try simulator.createSubscription()
                try simulator.script(
                    WebPushScriptedAnswer(status: 201, subscriptionID: slow.id, latencyMilliseconds: 300)
                )
                let clock = ContinuousClock()
                let started = clock.now
                #expect(try await send(slow) == .delivered)
                #expect(clock.now - started >= .milliseconds(300))
                try simulator.script(WebPushScriptedAnswer(subscriptionID: slow.id, dropsConnection: true))
                await #expect(throws: (any Error).self) { _ = try await send(slow) }
                // Then a new connection (a fresh client: this one may not have seen the close yet) delivers.
                let message = try sender.message("after the drop", to: slow)
                let answer = try await withClient(trusting: simulator) { fresh in
                    try await post(fresh, message.url, headers: message.headers, body: message.body)
                }
                #expect(answer.status == 201)
                #expect(simulator.received(subscriptionID: slow.id).count == 2)
                #expect(simulator.stats().answeredByStatus[0] == 1)
            }
        }
    }

    @Test("the control API makes subscriptions, scripts answers and lists what each subscription received")
    func controlAPI() async throws {
        try await WebPushSimulator.withRunning { simulator in
            try await withClient(trusting: simulator) { client in
                let origins = try await control(client, simulator, .GET, "/origins")["origins"] as? [String]
                #expect(origins == simulator.origins)
                let made = try await control(client, simulator, .POST, "/subscriptions", #"{"origin":1}"#)
                let id = try #require(made["id"] as? String)
                let json = try JSONSerialization.data(withJSONObject: try #require(made["subscription"]))
                let subscription = try WebPushSubscription(jsonBytes: Array(json))
                #expect(subscription.origin.serialized == simulator.origins[1])
                let refused = try await control(client, simulator, .POST, "/subscriptions", #"{"origin":5}"#)
                #expect((refused["error"] as? String)?.contains("origin") == true)

                var sender = Sender()
                _ = try await control(client, simulator, .POST, "/answers", #"{"status":500,"subscription":"\#(id)"}"#)
                let message = try sender.message(#"{"n":1}"#, to: subscription, key: "k1")
                #expect(try await post(client, message.url, headers: message.headers, body: message.body).status == 500)
                #expect(try await post(client, message.url, headers: message.headers, body: message.body).status == 201)
                let listed = try await control(client, simulator, .GET, "/messages?subscription=\(id)")
                let messages = try #require(listed["messages"] as? [[String: Any]])
                #expect(messages.count == 1)
                #expect(messages.first?["payload"] as? String == #"{"n":1}"#)
                #expect(messages.first?["topic"] as? String == "k1")
                #expect((messages.first?["vapid"] as? [String: Any])?["aud"] as? String == simulator.origins[1])
                let stats = try await control(client, simulator, .GET, "/stats")
                #expect(stats["delivered"] as? Int == 1)
                #expect((stats["answeredByStatus"] as? [String: Any])?["500"] as? Int == 1)
                _ = try await control(client, simulator, .POST, "/expire", #"{"subscription":"\#(id)","status":404}"#)
                #expect(try await post(client, message.url, headers: message.headers, body: message.body).status == 404)
                _ = try await control(client, simulator, .POST, "/reset")
                #expect(simulator.received().isEmpty)
                #expect(try await post(client, message.url, headers: message.headers, body: message.body).status == 201)
            }
        }
    }
}

@Suite("Web Push simulator: settings")
struct WebPushSimulatorSettingsTests {
    @Test("without decryption a message is recorded without plaintext; the log keeps the newest recordLimit")
    func noDecryptionAndRecordLimit() async throws {
        var configuration = WebPushSimulator.Configuration()
        configuration.decryptsMessages = false
        configuration.recordLimit = 2
        configuration.origins = [.init()]
        configuration.controlPort = nil
        try await WebPushSimulator.withRunning(configuration) { simulator in
            #expect(simulator.controlPort == nil && simulator.origins.count == 1)
            try await withClient(trusting: simulator) { client in
                var sender = Sender()
                let subscription = try simulator.createSubscription()
                for index in 1...3 {
                    let message = try sender.message("m\(index)", to: subscription, key: "k\(index)")
                    #expect(
                        try await post(client, message.url, headers: message.headers, body: message.body).status == 201
                    )
                }
                let received = simulator.received()
                #expect(received.map(\.topic) == ["k2", "k3"])
                #expect(received.allSatisfy { $0.plaintext == nil && $0.bodyBytes == 2 + 103 })
                #expect(simulator.stats().delivered == 3)
            }
        }
        await #expect(throws: (any Error).self) {
            var none = WebPushSimulator.Configuration()
            none.origins = []
            try await WebPushSimulator.withRunning(none) { _ in }
        }
    }

    @Test(
        "with worker threads every message is checked and decrypted off the event loops, once; batch-made subscriptions are counted each"
    )
    func workerThreadsAndBatchSubscriptions() async throws {
        var configuration = WebPushSimulator.Configuration()
        configuration.workerThreads = 2
        configuration.origins = [.init(), .init(offersHTTP2: false)]
        try await WebPushSimulator.withRunning(configuration) { simulator in
            try await withClient(trusting: simulator) { client in
                var sender = Sender()
                let made = try await controlText(
                    client,
                    simulator,
                    "/subscriptions/batch",
                    #"{"origin":0,"count":30,"applicationServerKey":"\#(sender.key.publicKeyBase64URL)"}"#
                )
                #expect(made.status == 200)
                let lines = made.body.split(separator: "\n")
                try #require(lines.count == 30)
                let subscriptions = try lines.map { try WebPushSubscription(tokenValue: String($0)) }
                #expect(Set(subscriptions.map(\.endpoint)).count == 30)
                #expect(subscriptions.allSatisfy { $0.origin.serialized == simulator.origins[0] })
                let refused = try await controlText(client, simulator, "/subscriptions/batch", #"{"count":0}"#)
                #expect(refused.status == 400)

                // Two messages to each, all at once, over HTTP/2: 30 subscriptions get 2 each.
                var messages: [(url: String, headers: [(String, String)], body: [UInt8])] = []
                for index in 0..<60 { messages.append(try sender.message("m\(index)", to: subscriptions[index % 30])) }
                let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                    for message in messages {
                        group.addTask {
                            try await post(client, message.url, headers: message.headers, body: message.body).status
                        }
                    }
                    return try await group.reduce(into: [Int]()) { $0.append($1) }
                }
                #expect(statuses.count == 60 && statuses.allSatisfy { $0 == 201 })
                // A message that does not decrypt is refused on a worker too (the check runs there).
                let http1 = try simulator.createSubscription(originIndex: 1)
                var broken = try sender.message("x", to: http1)
                broken.body[broken.body.count - 1] ^= 1
                #expect(try await post(client, broken.url, headers: broken.headers, body: broken.body).status == 400)
                for (index, subscription) in subscriptions.enumerated() {
                    let id = String(subscription.endpoint.split(separator: "/").last!)
                    let texts = Set(simulator.received(subscriptionID: id).compactMap(\.text))
                    #expect(texts == ["m\(index)", "m\(index + 30)"])
                }
                let stats = simulator.stats()
                #expect(stats.delivered == 60 && stats.requests == 61)
                #expect(stats.subscriptionsDelivered == 30 && stats.duplicates == 30)
                #expect(stats.checkedOnWorkers == 61)
            }
        }
    }
}
