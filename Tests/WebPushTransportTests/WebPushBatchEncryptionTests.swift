import Foundation
import PushgateCore
import Testing
import WebPush
import WebPushSimulator

@testable import WebPushTransport

@Suite("Web Push: a batch's encryption spread over the cores")
struct WebPushBatchEncryptionTests {
    @Test("a batch is cut into one slice per core at most, each of 8 devices or more")
    func sliceCounts() {
        #expect(WebPushBatchEncryption.slices(for: 0, cores: 2) == 1)
        #expect(WebPushBatchEncryption.slices(for: 15, cores: 2) == 1)
        #expect(WebPushBatchEncryption.slices(for: 16, cores: 2) == 2)
        #expect(WebPushBatchEncryption.slices(for: 500, cores: 2) == 2)
        #expect(WebPushBatchEncryption.slices(for: 500, cores: 16) == 16)
        #expect(WebPushBatchEncryption.slices(for: 40, cores: 16) == 5)
        #expect(WebPushBatchEncryption.slices(for: 500, cores: 1) == 1)
    }

    @Test("the slices cover every device once, in order, their sizes one apart at most")
    func sliceBounds() {
        for count in [16, 17, 100, 499, 500, 501] {
            for slices in 1...7 where count >= slices {
                let ranges = (0..<slices).map { WebPushBatchEncryption.bounds(of: $0, slices: slices, count: count) }
                #expect(ranges.flatMap { Array($0) } == Array(0..<count), "\(count) in \(slices)")
                let sizes = ranges.map(\.count)
                #expect(sizes.max()! - sizes.min()! <= 1)
            }
        }
    }

    @Test("map gives each item's result at its own position, whatever the batch's size")
    func mapKeepsOrder() {
        for count in [0, 1, 7, 8, 15, 16, 17, 33, 500, 1_001] {
            let items = (0..<count).map { "device-\($0)" }
            #expect(WebPushBatchEncryption.map(items) { $0 + "!" } == items.map { $0 + "!" })
        }
    }

    @Test("200 browsers in one submit (one stored subscription broken): each message delivered once, to its browser")
    func wholeBatchThroughTheService() async throws {
        try await withWebPush { fixture in
            let subscriptions = try (0..<200).map { _ in try fixture.subscribe() }
            var tokens = try subscriptions.map { try WebPushSubscription(jsonBytes: Array($0.json.utf8)).deviceToken }
            let broken = try DeviceToken(storageKey: "webpush:https://push.example/x not-a-key nor-this")
            tokens.insert(broken, at: 77)
            let outcomes = try await fixture.send(#"{"title":"Goal"}"#, toTokens: tokens)
            #expect(outcomes[77].reason == WebPushPushService.invalidSubscription)
            for (position, outcome) in outcomes.enumerated() where position != 77 {
                #expect(outcome.verdict == .delivered)
            }
            for subscription in subscriptions {
                let texts = fixture.simulator.received(subscriptionID: subscription.id).compactMap(\.text)
                #expect(texts == [#"{"title":"Goal"}"#])
            }
            let stats = fixture.simulator.stats()
            #expect(stats.subscriptionsDelivered == 200 && stats.duplicates == 0)
        }
    }
}
