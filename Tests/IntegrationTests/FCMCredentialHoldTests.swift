import FCMSimulator
import FCMTransport
import Foundation
import PushgateCore
import Testing

/// The dispatcher, the real FCM client and the simulator's token endpoint refusing the service account
/// (`invalid_grant`, as for a revoked key): a configuration alarm, and the devices wait in the ledger
/// instead of failing; delivered once the endpoint accepts the account again, failed with a clear reason
/// once their request expires. Never pruned either way.
@Suite("FCM credentials refused: devices wait, bounded by their expiration", .timeLimit(.minutes(5)))
struct FCMCredentialHoldTests {
    /// A refusal is fetched again after 200-400 ms (instead of 15 s to 10 minutes).
    static func quickBackoff(_ configuration: inout FCMClient.Configuration) {
        configuration.tokenFetchBackoff = FCMTokenFetchBackoff.Configuration(
            outage: Backoff(base: .milliseconds(100), multiplier: 2, cap: .milliseconds(400)),
            refusal: Backoff(base: .milliseconds(200), multiplier: 2, cap: .milliseconds(400))
        )
    }

    @Test("invalid_grant: the alarm is raised, no device fails; the endpoint accepts again: each delivered once")
    func heldThenDelivered() async throws {
        try await FCMDeliveryTests.withBothServices(apnsDevices: 0, fcmDevices: 40, fcmClient: Self.quickBackoff) {
            context in
            context.fcmSimulator.setTokenEndpointFaults(FCMTokenEndpointFaults(oauthError: "invalid_grant"))
            let id = try RequestID("refused-then-accepted")
            _ = try await context.dispatcher.submit(
                NotificationRequest(
                    id: id,
                    groups: ["mixed"],
                    expiration: .storagePolicy,
                    payload: Payload(jsonString: #"{"aps":{"alert":"hello"}}"#),
                    createdAt: Date()
                )
            )
            do {
                try await eventually("every device held, the refusal fetched again") {
                    try await context.store.report(id)?.pendingRetries == 40
                        && context.fcmSimulator.stats().tokenFaultAnswers >= 3
                }
            } catch {
                let report = try await context.store.report(id)
                Issue.record("\(String(describing: report)) \(context.fcmSimulator.stats())")
                throw error
            }
            let waiting = try #require(try await context.store.report(id))
            #expect(waiting.failed == 0, "\(waiting.failedByReason)")
            #expect(!waiting.state.isFinished)
            #expect(context.fcmClient.credentialAlarm?.contains("invalid_grant") == true)
            #expect(context.fcmSimulator.stats().sends == 0)

            context.fcmSimulator.clearTokenEndpointFaults()
            try await eventually("delivered once the endpoint accepts the account") {
                try await context.store.report(id)?.state == .done
            }
            let report = try #require(try await context.store.report(id))
            #expect(report.accepted == 40)
            #expect(report.failed == 0)
            #expect(context.fcmSimulator.stats().devices == 40)
            #expect(context.fcmSimulator.stats().duplicates == 0)
            #expect(context.fcmClient.credentialAlarm == nil)
        }
    }

    @Test(
        "invalid_grant until the request expires: its devices fail then, as fcm_credentials_refused, none invalidated"
    )
    func failedAtExpiration() async throws {
        try await FCMDeliveryTests.withBothServices(apnsDevices: 0, fcmDevices: 10, fcmClient: Self.quickBackoff) {
            context in
            context.fcmSimulator.setTokenEndpointFaults(FCMTokenEndpointFaults(oauthError: "invalid_grant"))
            let id = try RequestID("refused-until-expiry")
            let expires = Int64(Date().timeIntervalSince1970) + 3
            _ = try await context.dispatcher.submit(
                NotificationRequest(
                    id: id,
                    groups: ["mixed"],
                    expiration: .at(epochSeconds: expires),
                    payload: Payload(jsonString: #"{"aps":{"alert":"hello"}}"#),
                    createdAt: Date()
                )
            )
            try await eventually("the request is finished") {
                try await context.store.report(id)?.state.isFinished == true
            }
            let report = try #require(try await context.store.report(id))
            // Whichever comes first at the deadline: the held retry, failed with the alarm's reason, or the
            // ledger expiring the request.
            #expect(report.failed == 10 && report.accepted == 0)
            #expect(
                Set(report.failedByReason.keys).isSubset(of: ["fcm_credentials_refused", "expired"]),
                "\(report.failedByReason)"
            )
            #expect(Date().timeIntervalSince1970 >= Double(expires), "not failed before the expiration")
            for index in 0..<10 {
                let device = try await context.store.device(app: "default", token: FCMDeliveryTests.fcmToken(index))
                #expect(device?.state == .valid)
            }
            #expect(context.fcmSimulator.stats().sends == 0)
        }
    }
}
