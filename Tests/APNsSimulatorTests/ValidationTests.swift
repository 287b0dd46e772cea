import APNsSimulator
import Foundation
import Testing

/// Each documented failure answers Apple's status and reason, over a real HTTP/2 TLS connection.
@Suite("Validation over HTTP/2")
struct ValidationTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var request: SimulatorProbe.Request
        var status: Int
        var reason: String?

        var testDescription: String { self.name }
    }

    static let token = deviceToken(7)

    static func push(
        _ headers: [(String, String)],
        payload: String = #"{"aps":{"alert":"hi"}}"#,
        path: String? = nil,
        method: String = "POST"
    ) -> SimulatorProbe.Request {
        SimulatorProbe.Request(
            method: method,
            path: path ?? "/3/device/\(Self.token)",
            headers: headers,
            body: Array(payload.utf8)
        )
    }

    static let cases: [Case] = [
        Case(name: "valid alert", request: push(alertHeaders()), status: 200),
        Case(
            name: "GET is 405 MethodNotAllowed",
            request: push(alertHeaders(), method: "GET"),
            status: 405,
            reason: "MethodNotAllowed"
        ),
        Case(
            name: "wrong path is 404 BadPath",
            request: push(alertHeaders(), path: "/3/devices/\(token)"),
            status: 404,
            reason: "BadPath"
        ),
        Case(
            name: "no token is MissingDeviceToken",
            request: push(alertHeaders(), path: "/3/device/"),
            status: 400,
            reason: "MissingDeviceToken"
        ),
        Case(
            name: "non-hex token is BadDeviceToken",
            request: push(alertHeaders(), path: "/3/device/xyz0"),
            status: 400,
            reason: "BadDeviceToken"
        ),
        Case(
            name: "odd-length token is BadDeviceToken",
            request: push(alertHeaders(), path: "/3/device/abc"),
            status: 400,
            reason: "BadDeviceToken"
        ),
        Case(
            name: "missing topic is MissingTopic",
            request: push([("apns-push-type", "alert")]),
            status: 400,
            reason: "MissingTopic"
        ),
        Case(
            name: "unknown push type is InvalidPushType",
            request: push([("apns-topic", bundleID), ("apns-push-type", "telegram")]),
            status: 400,
            reason: "InvalidPushType"
        ),
        Case(
            name: "voip without .voip suffix is BadTopic",
            request: push([("apns-topic", bundleID), ("apns-push-type", "voip")]),
            status: 400,
            reason: "BadTopic"
        ),
        Case(
            name: "alert to a .voip topic is BadTopic",
            request: push([("apns-topic", bundleID + ".voip"), ("apns-push-type", "alert")]),
            status: 400,
            reason: "BadTopic"
        ),
        Case(
            name: "priority 7 is BadPriority",
            request: push([("apns-topic", bundleID), ("apns-push-type", "alert"), ("apns-priority", "7")]),
            status: 400,
            reason: "BadPriority"
        ),
        Case(
            name: "background with priority 10 is BadPriority",
            request: push(
                [("apns-topic", bundleID), ("apns-push-type", "background"), ("apns-priority", "10")],
                payload: #"{"aps":{"content-available":1}}"#
            ),
            status: 400,
            reason: "BadPriority"
        ),
        Case(
            name: "background with priority 5 is accepted",
            request: push(
                [("apns-topic", bundleID), ("apns-push-type", "background"), ("apns-priority", "5")],
                payload: #"{"aps":{"content-available":1}}"#
            ),
            status: 200
        ),
        Case(
            name: "non-integer expiration is BadExpirationDate",
            request: push(alertHeaders(extra: [("apns-expiration", "tomorrow")])),
            status: 400,
            reason: "BadExpirationDate"
        ),
        Case(
            name: "integer expiration is accepted",
            request: push(alertHeaders(extra: [("apns-expiration", "0")])),
            status: 200
        ),
        Case(
            name: "65-byte collapse id is BadCollapseId",
            request: push(alertHeaders(extra: [("apns-collapse-id", String(repeating: "c", count: 65))])),
            status: 400,
            reason: "BadCollapseId"
        ),
        Case(
            name: "64-byte collapse id is accepted",
            request: push(alertHeaders(extra: [("apns-collapse-id", String(repeating: "c", count: 64))])),
            status: 200
        ),
        Case(
            name: "non-UUID apns-id is BadMessageId",
            request: push(alertHeaders(extra: [("apns-id", "not-a-uuid")])),
            status: 400,
            reason: "BadMessageId"
        ),
        Case(
            name: "empty payload is PayloadEmpty",
            request: push(alertHeaders(), payload: ""),
            status: 400,
            reason: "PayloadEmpty"
        ),
        Case(
            name: "4097-byte payload is 413 PayloadTooLarge",
            request: push(alertHeaders(), payload: jsonPayload(bytes: 4097)),
            status: 413,
            reason: "PayloadTooLarge"
        ),
        Case(
            name: "4096-byte payload is accepted",
            request: push(alertHeaders(), payload: jsonPayload(bytes: 4096)),
            status: 200
        ),
        Case(
            name: "5120-byte voip payload is accepted",
            request: push(
                [("apns-topic", bundleID + ".voip"), ("apns-push-type", "voip")],
                payload: jsonPayload(bytes: 5120)
            ),
            status: 200
        ),
        Case(
            name: "5121-byte voip payload is 413 PayloadTooLarge",
            request: push(
                [("apns-topic", bundleID + ".voip"), ("apns-push-type", "voip")],
                payload: jsonPayload(bytes: 5121)
            ),
            status: 413,
            reason: "PayloadTooLarge"
        ),
        Case(
            name: "non-JSON payload is PayloadEmpty (documented choice)",
            request: push(alertHeaders(), payload: "hello"),
            status: 400,
            reason: "PayloadEmpty"
        ),
        Case(
            name: "JSON array payload is PayloadEmpty (documented choice)",
            request: push(alertHeaders(), payload: "[1,2]"),
            status: 400,
            reason: "PayloadEmpty"
        ),
        Case(
            name: "repeated apns-topic is DuplicateHeaders",
            request: push(alertHeaders(extra: [("apns-topic", bundleID)])),
            status: 400,
            reason: "DuplicateHeaders"
        ),
    ]

    /// A JSON object of exactly `bytes` bytes.
    static func jsonPayload(bytes: Int) -> String {
        let prefix = #"{"aps":{"alert":""#
        let suffix = #""}}"#
        return prefix + String(repeating: "x", count: bytes - prefix.utf8.count - suffix.utf8.count) + suffix
    }

    @Test(arguments: Self.cases)
    func answersApplesStatusAndReason(_ testCase: Case) async throws {
        try await withSimulatorAndProbe { simulator, probe in
            let response = try #require(try await probe.send(testCase.request).response)
            #expect(response.status == testCase.status)
            #expect(response.reason == testCase.reason)
            #expect(response.headers["apns-id"].map(isCanonicalUUID) == true)
            if let reason = testCase.reason {
                #expect(String(decoding: response.body, as: UTF8.self) == #"{"reason":"\#(reason)"}"#)
                #expect(simulator.stats().rejectedByReason[reason] == 1)
                #expect(simulator.notifications().isEmpty)
            } else {
                #expect(response.body.isEmpty)
                #expect(simulator.notifications().count == 1)
            }
        }
    }

    @Test func everyPushTypeIsAcceptedWithItsTopicSuffix() async throws {
        let suffixes = [
            ("alert", ""), ("background", ""), ("mdm", ""), ("location", ".location-query"), ("voip", ".voip"),
            ("complication", ".complication"), ("fileprovider", ".pushkit.fileprovider"),
            ("liveactivity", ".push-type.liveactivity"), ("pushtotalk", ".voip-ptt"),
            ("widgets", ".push-type.widgets"), ("controls", ".push-type.controls"),
        ]
        try await withSimulatorAndProbe { _, probe in
            for (pushType, suffix) in suffixes {
                let priority = pushType == "background" ? "5" : "10"
                let request = Self.push([
                    ("apns-topic", bundleID + suffix), ("apns-push-type", pushType), ("apns-priority", priority),
                ])
                let response = try #require(try await probe.send(request).response)
                #expect(response.status == 200, "\(pushType): \(response.reason ?? "")")
                if pushType != "alert" && pushType != "background" && pushType != "mdm" {
                    let bare = Self.push([("apns-topic", bundleID), ("apns-push-type", pushType)])
                    #expect(try await probe.send(bare).response?.reason == "BadTopic", "\(pushType) without suffix")
                }
            }
        }
    }

    @Test func theRequestsApnsIDIsEchoedAndOtherwiseOneIsGenerated() async throws {
        try await withSimulatorAndProbe { simulator, probe in
            let id = "123e4567-e89b-12d3-a456-426655440000"
            let echoed = try #require(try await probe.send(Self.push(alertHeaders(extra: [("apns-id", id)]))).response)
            #expect(echoed.headers["apns-id"] == id)
            let generated = try #require(try await probe.send(Self.push(alertHeaders())).response)
            let generatedID = try #require(generated.headers["apns-id"])
            #expect(isCanonicalUUID(generatedID) && generatedID != id)
            #expect(simulator.notifications().map(\.apnsID) == [id, generatedID])
            #expect(generated.headers["apns-unique-id"].map(isCanonicalUUID) == true)
        }
    }

    @Test func theProductionEnvironmentSendsNoUniqueID() async throws {
        var configuration = APNsSimulator.Configuration()
        configuration.environment = .production
        try await withSimulatorAndProbe(configuration) { _, probe in
            let response = try #require(try await probe.send(Self.push(alertHeaders())).response)
            #expect(response.status == 200)
            #expect(response.headers["apns-unique-id"] == nil)
            #expect(response.headers["apns-id"] != nil)
        }
    }

    @Test func acceptAllAnswers200WithoutChecks() async throws {
        var configuration = APNsSimulator.Configuration()
        configuration.handling = .acceptAll
        try await withSimulatorAndProbe(configuration) { simulator, probe in
            let outcomes = try await probe.send([
                Self.push([], payload: "not json"),
                Self.push(alertHeaders(), path: "/3/device/xyz"),
            ])
            #expect(outcomes.map { $0.response?.status } == [200, 400])
            #expect(simulator.stats().accepted == 1)
        }
    }

    @Test func aScriptedHandlerDecidesEachRequest() async throws {
        var configuration = APNsSimulator.Configuration()
        configuration.handling = .scripted { request in
            switch request.requestIndexOnConnection {
            case 0: return .reject(SimulatedRejection(.tooManyRequests))
            case 1: return .reject(SimulatedRejection(status: 400, reason: "SomethingNew"))
            case 2: return .validate
            default: return .accept
            }
        }
        try await withSimulatorAndProbe(configuration) { _, probe in
            var results: [String] = []
            for request in [Self.push(alertHeaders()), Self.push(alertHeaders()), Self.push([]), Self.push([])] {
                let response = try #require(try await probe.send(request).response)
                results.append("\(response.status) \(response.reason ?? "-")")
            }
            #expect(results == ["429 TooManyRequests", "400 SomethingNew", "400 MissingTopic", "200 -"])
        }
    }

    @Test func http2WithoutALPNIsServedAsPriorKnowledge() async throws {
        try await APNsSimulator.withRunning { simulator in
            let probe = try await SimulatorProbe.connect(
                port: simulator.port,
                trustRootsPEM: simulator.caCertificatePEM,
                applicationProtocols: []
            )
            let response = try await probe.send(Self.push(alertHeaders())).response
            #expect(response?.status == 200)
            await probe.close()
        }
    }
}

func isCanonicalUUID(_ value: String) -> Bool {
    UUID(uuidString: value) != nil && value.count == 36
}
