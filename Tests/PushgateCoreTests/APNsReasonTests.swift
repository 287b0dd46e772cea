import PushgateCore
import Testing

@Suite("APNs reasons")
struct APNsReasonTests {
    /// Apple's table of reasons and statuses ("Handling notification responses from APNs"), written
    /// out here independently of the code under test.
    static let appleTable: [String: Int] = [
        "BadCollapseId": 400, "BadDeviceToken": 400, "BadExpirationDate": 400, "BadMessageId": 400,
        "BadPriority": 400, "BadTopic": 400, "DeviceTokenNotForTopic": 400, "DuplicateHeaders": 400,
        "IdleTimeout": 400, "InvalidPushType": 400, "MissingDeviceToken": 400, "MissingTopic": 400,
        "PayloadEmpty": 400, "TopicDisallowed": 400,
        "BadCertificate": 403, "BadCertificateEnvironment": 403, "ExpiredProviderToken": 403, "Forbidden": 403,
        "InvalidProviderToken": 403, "MissingProviderToken": 403, "UnrelatedKeyIdInToken": 403,
        "BadEnvironmentKeyIdInToken": 403,
        "BadPath": 404, "MethodNotAllowed": 405, "ExpiredToken": 410, "Unregistered": 410, "PayloadTooLarge": 413,
        "TooManyProviderTokenUpdates": 429, "TooManyRequests": 429, "InternalServerError": 500,
        "ServiceUnavailable": 503, "Shutdown": 503,
    ]

    static let connectionFatal: Set<String> = [
        "IdleTimeout", "Shutdown", "ExpiredProviderToken", "TooManyProviderTokenUpdates",
    ]
    static let retryable: Set<String> = ["TooManyRequests", "InternalServerError", "ServiceUnavailable"]

    @Test("every documented reason is known, and only those")
    func documentedSet() {
        #expect(APNsReason.documented.count == Self.appleTable.count)
        #expect(Set(APNsReason.documented.map(\.rawValue)) == Set(Self.appleTable.keys))
    }

    @Test("every documented reason round-trips its string and has Apple's status", arguments: appleTable.keys.sorted())
    func roundTripAndStatus(raw: String) {
        let reason = APNsReason(rawValue: raw)
        #expect(reason.rawValue == raw)
        #expect("\(reason)" == raw)
        #expect(reason.status == Self.appleTable[raw])
        if case .unknown = reason { Issue.record("\(raw) parsed as unknown") }
    }

    @Test("each reason is in its outcome class", arguments: appleTable.keys.sorted())
    func outcomeClass(raw: String) {
        let expected: OutcomeClass =
            Self.connectionFatal.contains(raw)
            ? .connectionFatal : Self.retryable.contains(raw) ? .retryable : .rejected
        #expect(APNsReason(rawValue: raw).outcomeClass == expected)
        #expect(APNsReason.classify(status: Self.appleTable[raw]!, reason: APNsReason(rawValue: raw)) == expected)
    }

    @Test("both spellings of BadEnvironmentKeyIdInToken are understood; Apple's is sent")
    func badEnvironmentKeySpellings() {
        #expect(APNsReason(rawValue: "BadEnvironmentKeyIdInToken") == .badEnvironmentKeyIDInToken)
        #expect(APNsReason(rawValue: "BadEnvironmentKeyInToken") == .badEnvironmentKeyIDInToken)
        #expect(APNsReason.badEnvironmentKeyIDInToken.rawValue == "BadEnvironmentKeyIdInToken")
    }

    @Test("reasons are case-sensitive: another spelling is unknown")
    func caseSensitive() {
        #expect(APNsReason(rawValue: "unregistered") == .unknown("unregistered"))
    }

    @Test("an unknown reason keeps its string, has no status and is classed by the answer's status")
    func unknownReasons() {
        let reason = APNsReason(rawValue: "SomethingApple Added")
        #expect(reason == .unknown("SomethingApple Added"))
        #expect(reason.rawValue == "SomethingApple Added")
        #expect(reason.status == nil)
        #expect(APNsReason.classify(status: 429, reason: reason) == .retryable)
        #expect(APNsReason.classify(status: 500, reason: reason) == .retryable)
        #expect(APNsReason.classify(status: 502, reason: reason) == .retryable)
        #expect(APNsReason.classify(status: 503, reason: reason) == .retryable)
        #expect(APNsReason.classify(status: 400, reason: reason) == .rejected)
        #expect(APNsReason.classify(status: 403, reason: reason) == .rejected)
        #expect(APNsReason.classify(status: 410, reason: reason) == .rejected)
    }

    @Test("an answer without a reason is classed by its status")
    func noReason() {
        #expect(APNsReason.classify(status: 200, reason: nil) == .accepted)
        #expect(APNsReason.classify(status: 429, reason: nil) == .retryable)
        #expect(APNsReason.classify(status: 500, reason: nil) == .retryable)
        #expect(APNsReason.classify(status: 400, reason: nil) == .rejected)
        #expect(APNsReason.classify(status: 410, reason: nil) == .rejected)
    }

    @Test("only Unregistered, ExpiredToken and BadDeviceToken remove the device")
    func invalidatesDevice() {
        for reason in APNsReason.documented {
            #expect(reason.invalidatesDevice == [.unregistered, .expiredToken, .badDeviceToken].contains(reason))
        }
        #expect(!APNsReason.unknown("Gone").invalidatesDevice)
    }
}

@Suite("APNs outcomes")
struct APNsOutcomeTests {
    private func answered(_ status: Int, _ reason: String?, timestamp: Int64? = nil) -> APNsOutcome {
        .answered(
            status: status,
            reason: reason.map(APNsReason.init(rawValue:)),
            apnsID: "123e4567-e89b-12d3-a456-4266554400a0",
            apnsUniqueID: nil,
            invalidatedAtMilliseconds: timestamp
        )
    }

    @Test("200 is accepted")
    func accepted() {
        let outcome = answered(200, nil)
        #expect(outcome.outcomeClass == .accepted)
        #expect(outcome.isAccepted)
        #expect(outcome.apnsID == "123e4567-e89b-12d3-a456-4266554400a0")
        #expect(outcome.reasonLabel == "")
    }

    @Test("410 Unregistered is a rejection that keeps Apple's timestamp")
    func unregistered() {
        let outcome = answered(410, "Unregistered", timestamp: 1_800_000_000_123)
        #expect(outcome.outcomeClass == .rejected)
        #expect(!outcome.isAccepted)
        #expect(outcome.invalidatedAtMilliseconds == 1_800_000_000_123)
        #expect(outcome.reason?.invalidatesDevice == true)
        #expect(outcome.reasonLabel == "Unregistered")
    }

    @Test("answers are classed by their reason, or their status without one")
    func classification() {
        #expect(answered(400, "BadDeviceToken").outcomeClass == .rejected)
        #expect(answered(403, "ExpiredProviderToken").outcomeClass == .connectionFatal)
        #expect(answered(429, "TooManyRequests").outcomeClass == .retryable)
        #expect(answered(503, "Shutdown").outcomeClass == .connectionFatal)
        #expect(answered(500, nil).outcomeClass == .retryable)
        #expect(answered(500, nil).reasonLabel == "status_500")
        #expect(answered(418, "Teapot").outcomeClass == .rejected)
        #expect(answered(418, "Teapot").reasonLabel == "Teapot")
    }

    @Test("no answer is retryable, or connection-fatal when the connection is to blame")
    func transportFailures() {
        #expect(APNsOutcome.failed(.goAway).outcomeClass == .connectionFatal)
        #expect(APNsOutcome.failed(.connectFailed("refused")).outcomeClass == .connectionFatal)
        #expect(APNsOutcome.failed(.connectionLost).outcomeClass == .retryable)
        #expect(APNsOutcome.failed(.streamRefused).outcomeClass == .retryable)
        #expect(APNsOutcome.failed(.deadlineExceeded).outcomeClass == .retryable)
        #expect(APNsOutcome.failed(.streamReset("INTERNAL_ERROR")).reasonLabel == "stream_reset")
        #expect(APNsOutcome.failed(.connectFailed("tls: bad certificate")).reasonLabel == "connect_failed")
        #expect(APNsOutcome.failed(.goAway).status == nil)
    }

    @Test("the description lists class, status, reason and ids")
    func description() {
        #expect(
            "\(answered(410, "Unregistered", timestamp: 5))"
                == "rejected status=410 reason=Unregistered apns-id=123e4567-e89b-12d3-a456-4266554400a0 timestamp=5"
        )
    }
}
