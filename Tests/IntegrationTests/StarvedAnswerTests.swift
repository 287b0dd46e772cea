import APNsSimulator
import FCMSimulator
import FCMTransport
import Foundation
import PushgateCore
import Testing

/// Issue #27: on a starved machine the FCM client gave up on answers that were merely late, and the
/// dispatcher sent those messages again although FCM had accepted them (1,400 messages for 1,000
/// devices). Here the simulator holds every answer past the client's deadline: it accepts (and records)
/// each message at once, as FCM would, and answers too late. APNs shares the transport engine.
@Suite("Answers held past the client's deadline (FCM and APNs)", .timeLimit(.minutes(10)))
struct StarvedAnswerTests {
    @Test("an answer that never came in time: each device is sent once, failed as answer_timeout, never resent")
    func answersHeldPastTheDeadline() async throws {
        try await FCMDeliveryTests.withBothServices(
            apnsDevices: 0,
            fcmDevices: 40,
            fcmSimulator: { $0.latencyMilliseconds = 1_500 },
            fcmClient: { $0.requestTimeout = .milliseconds(500) }
        ) { context in
            // Retried for an hour, were it retried: a resend would show.
            let report = try await context.notify("held", expiration: .storagePolicy)
            let messages = context.fcmSimulator.messages().compactMap(\.token)
            // Before the fix: 79 messages for the 40 devices, each failed `deadline_exceeded` and resent.
            #expect(report.accepted == 0)
            #expect(report.failedByReason == ["answer_timeout": 40])
            #expect(report.pendingRetries == 0)
            #expect(messages.count == 40)
            #expect(Set(messages) == Set((0..<40).map { FCMDeliveryTests.fcmToken($0).value }))
        }
    }

    @Test("APNs answers held past the deadline: each device is sent once, failed as answer_timeout, never resent")
    func apnsAnswersHeldPastTheDeadline() async throws {
        try await FCMDeliveryTests.withBothServices(
            apnsDevices: 40,
            fcmDevices: 0,
            apnsSimulator: { $0.faults.latencyMilliseconds = 1_500 },
            apnsClient: { $0.requestTimeout = .milliseconds(500) }
        ) { context in
            let report = try await context.notify("apns-held", expiration: .storagePolicy)
            #expect(report.accepted == 0)
            #expect(report.failedByReason == ["answer_timeout": 40])
            #expect(report.pendingRetries == 0)
            let stats = context.apnsSimulator.stats()
            #expect(stats.received == 40)
            #expect(stats.duplicates == 0)
            let tokens = context.apnsSimulator.notifications().map(\.deviceToken)
            #expect(Set(tokens) == Set((0..<40).map { FCMDeliveryTests.apnsToken($0).hex }))
        }
    }

    /// A retry batch records its outcomes before half its lease is gone (here 5 s); every answer comes
    /// 8 s after its request. The first attempts answer 429 (late, but within the client's deadline),
    /// the retries are written and still unanswered at the half lease: recorded `answer_timeout`, never
    /// sent a third time (before: recorded as due again at once, and sent again).
    @Test("a retry still unanswered when its batch must record: failed as answer_timeout, never sent again")
    func retryUnansweredAtHalfLease() async throws {
        try await FCMDeliveryTests.withBothServices(
            apnsDevices: 0,
            fcmDevices: 10,
            fcmSimulator: { $0.latencyMilliseconds = 8_000 },
            dispatcher: { $0.leaseDuration = .seconds(10) }
        ) { context in
            context.fcmSimulator.inject(FCMInjectedError(errorCode: "QUOTA_EXCEEDED", count: 10, retryAfterSeconds: 1))
            let report = try await context.notify("retry-held", expiration: .storagePolicy)
            #expect(report.accepted == 0)
            #expect(report.failedByReason == ["answer_timeout": 10])
            #expect(report.pendingRetries == 0)
            // Ten 429s, then ten retries that FCM accepted: no third send.
            #expect(context.fcmSimulator.stats().sends == 20)
            let messages = context.fcmSimulator.messages().compactMap(\.token)
            #expect(messages.count == 10)
            #expect(Set(messages) == Set((0..<10).map { FCMDeliveryTests.fcmToken($0).value }))
        }
    }

    /// Two streams and answers 100 ms away: the last of 60 messages waits about 3 s in the client's queue,
    /// three times the request timeout. Those still queued at it fail `deadline_exceeded` (never sent)
    /// and are sent again later; a written one has the whole timeout for its answer from its write. On a
    /// machine so loaded that an answer still comes too late, that device fails `answer_timeout`, once:
    /// whatever the load, no device gets two messages, and every device gets one.
    @Test("a queue longer than the request timeout: what waited is sent later, each device exactly once")
    func queueLongerThanTheTimeout() async throws {
        try await FCMDeliveryTests.withBothServices(
            apnsDevices: 0,
            fcmDevices: 60,
            fcmSimulator: {
                $0.maximumConcurrentStreams = 2
                $0.latencyMilliseconds = 100
            },
            fcmClient: {
                $0.maxConnections = 1
                $0.requestTimeout = .seconds(1)
            }
        ) { context in
            let report = try await context.notify("queued", expiration: .storagePolicy)
            let messages = context.fcmSimulator.messages().compactMap(\.token)
            // Before the fix (40 devices, 150 ms answers, 400 ms timeout): 51 messages for 40 devices.
            #expect(messages.count == 60)
            #expect(Set(messages) == Set((0..<60).map { FCMDeliveryTests.fcmToken($0).value }))
            let answerTimeouts = report.failedByReason["answer_timeout", default: 0]
            #expect(report.accepted + answerTimeouts == 60, "\(report)")
            #expect(report.failed == answerTimeouts, "\(report)")
            #expect(report.pendingRetries == 0)
        }
    }
}
