import Foundation
import PushgateCore

/// Browsers' subscriptions (`webpush:ENDPOINT P256DH AUTH`) beside phones: one endpoint is one device
/// whatever its keys, so that a browser that subscribes again is sent to once, with the keys it can
/// decrypt.
enum WebPushChecks {
    typealias F = Fixture

    static func subscriptionsRegisterAndReadBackAsWebPush(_ store: any PushStore) async throws {
        try expectEqual(try await F.register(store, F.subscription(1), in: "news", at: 5), .created, "a subscription")
        let results = try await store.register(batch: [
            Registration(app: F.app, token: F.subscription(2), group: "news", at: F.at(6)),
            Registration(app: F.app, token: F.subscription(1), group: "news", at: F.at(7)),
            Registration(app: F.app, token: F.fcmToken(3), group: "news", at: F.at(6)),
            F.registration(4, "news", at: 6),
        ])
        try expectEqual(results, [.created, .alreadyMember, .created, .created], "a batch of three platforms")
        let device = try unwrap(try await store.device(app: F.app, token: F.subscription(1)), "look-up")
        try expectEqual(device.token, F.subscription(1), "the subscription, keys and all")
        try expectEqual(device.token.platform, .webpush, "platform")
        try expectEqual(device.groups, ["news"], "groups")
        try expectEqual(device.lastRegisteredAt, F.at(7), "lastRegisteredAt")
        try expectEqual(
            try await store.device(app: F.app, token: F.endpointOnly(1))?.token,
            F.subscription(1),
            "found by its endpoint alone, with its keys"
        )
        try expectEqual(try await store.device(app: F.app, token: F.endpointOnly(9)), nil, "an unknown endpoint")
        let page = try await store.devices(app: F.app, group: "news", after: nil, limit: 10)
        try expectEqual(
            Set(page.devices.map(\.token)),
            [F.subscription(1), F.subscription(2), F.fcmToken(3), F.token(4)],
            "one group holds the three platforms, each with its own"
        )
    }

    static func aNewSubscriptionOfTheSameEndpointReplacesTheDevicesKeys(_ store: any PushStore) async throws {
        let old = F.subscription(1, keys: 1)
        let renewed = F.subscription(1, keys: 2)
        try expectEqual(try await F.register(store, old, in: "a", at: 1), .created, "the first subscription")
        try expectEqual(try await F.register(store, renewed, in: "b", at: 2), .joinedGroup, "new keys: the same device")
        let device = try unwrap(try await store.device(app: F.app, token: old), "looked up with the old keys")
        try expectEqual(device.token, renewed, "the device holds the new keys")
        try expectEqual(device.groups, ["a", "b"], "and keeps its groups")
        try expectEqual(device.registeredAt, F.at(1), "registered once")
        try expectEqual(
            try await store.devices(app: F.app, group: "a", after: nil, limit: 10).devices.map(\.token),
            [renewed],
            "group a lists one device, with the new keys"
        )
        // In one batch too: the last keys win, one device.
        let results = try await store.register(batch: [
            Registration(app: F.app, token: F.subscription(2, keys: 1), group: "a", at: F.at(3)),
            Registration(app: F.app, token: F.subscription(2, keys: 2), group: "a", at: F.at(3)),
            Registration(app: F.app, token: F.subscription(1, keys: 3), group: "a", at: F.at(3)),
        ])
        try expectEqual(results, [.created, .alreadyMember, .alreadyMember], "one device per endpoint in a batch")
        let result = try await store.enqueue(F.request("r1", groups: ["a", "b"], at: 4))
        try expectEqual(result.targetCount, 2, "two browsers, counted once each")
        let sent = try await F.deliverAll(store, now: F.at(5))
        try expectEqual(
            sent.sorted(),
            [F.subscription(1, keys: 3), F.subscription(2, keys: 2)].sorted(),
            "each browser gets the notification once, with its latest keys"
        )
    }

    static func aPrunedSubscriptionIsSkippedAndComesBackWhenTheBrowserSubscribesAgain(
        _ store: any PushStore
    ) async throws {
        _ = try await F.register(store, F.subscription(1), in: "g")
        _ = try await F.register(store, F.subscription(2), in: "g")
        _ = try await F.register(store, F.token(3), in: "g")
        _ = try await store.enqueue(F.request("r1", groups: ["g"], at: 1))
        // A 410 from the push service: the dispatcher fails the message and invalidates the subscription.
        try await F.completeNextChunk(
            store,
            accepted: 2,
            dead: F.subscription(2),
            reason: "webpush_gone",
            status: 410,
            at: 2
        )
        let gone = APNsReason(rawValue: "webpush_gone")
        let pruned = try unwrap(try await store.device(app: F.app, token: F.endpointOnly(2)), "the pruned browser")
        try expectEqual(pruned.state, .invalid, "invalid")
        try expectEqual(pruned.invalidReason, gone, "its reason")
        try expectEqual(
            try await store.failures(of: F.requestID("r1"), after: nil, limit: 10).map(\.token),
            [F.subscription(2)],
            "the failure names the subscription"
        )
        _ = try await store.enqueue(F.request("r2", groups: ["g"], at: 3))
        try expectEqual(
            Set(try await F.deliverAll(store, now: F.at(4))),
            [F.subscription(1), F.token(3)],
            "fan-out skips the pruned subscription"
        )
        try expectEqual(
            try await F.register(store, F.subscription(2, keys: 5), in: "g", at: 5),
            .revalidated,
            "subscribing again (new keys) makes it valid"
        )
        try expectEqual(
            try await store.device(app: F.app, token: F.endpointOnly(2))?.token,
            F.subscription(2, keys: 5),
            "with the new keys"
        )
    }

    static func subscriptionsAreUnassignedAndRemovedByTheirEndpoint(_ store: any PushStore) async throws {
        _ = try await F.register(store, F.subscription(1), in: "a")
        _ = try await F.register(store, F.subscription(1), in: "b")
        try expectEqual(try await store.unassign(app: F.app, token: F.endpointOnly(1), group: "a"), true, "unassign")
        try expectEqual(try await store.device(app: F.app, token: F.subscription(1))?.groups, ["b"], "left a")
        try expectEqual(
            try await store.unassign(app: F.app, token: F.endpointOnly(1), group: "a"),
            false,
            "not a member any more"
        )
        try expectEqual(try await store.removeDevice(app: F.app, token: F.endpointOnly(1)), true, "remove")
        try expectEqual(try await store.device(app: F.app, token: F.subscription(1)), nil, "gone")
        try expectEqual(try await store.removeDevice(app: F.app, token: F.subscription(1)), false, "removed already")
    }

    static func webPushRetriesFailuresAndCountsKeepThePlatform(_ store: any PushStore) async throws {
        for number in 1...3 { _ = try await F.register(store, F.subscription(number), in: "g") }
        _ = try await F.register(store, F.fcmToken(4), in: "g")
        _ = try await F.register(store, F.token(5), in: "g")
        let id = try await store.enqueue(F.request("r1", groups: ["g"])).id
        try await F.deliverAll(store, now: F.at(1)) { token in
            switch token {
            case F.subscription(1): .retry("webpush_429", nextAttemptAt: F.at(10))
            case F.subscription(2): .reject("webpush_413", status: 413)
            case F.fcmToken(4): .reject("UNREGISTERED", status: 404)
            default: .accept
            }
        }
        let claims = try await store.claimRetries(owner: F.instanceA, now: F.at(10), leaseDuration: F.lease, limit: 10)
        try expectEqual(claims.map(\.token), [F.subscription(1)], "the retry is the browser's, keys and all")
        _ = try await store.recordRetryOutcomes(
            [RetryOutcome(claim: claims[0], result: .failed(reason: "webpush_429", status: 429))],
            owner: F.instanceA,
            now: F.at(11)
        )
        let failures = try await store.failures(of: id, after: nil, limit: 10)
        try expectEqual(
            Set(failures.map(\.token)),
            [F.subscription(1), F.subscription(2), F.fcmToken(4)],
            "failures keep each device's platform"
        )
        let paged = try await F.failuresPagedOneByOne(store, of: id)
        try expectEqual(paged, failures.map(\.token), "paging after a subscription lists each failure once")
        let report = try unwrap(try await store.report(id), "report")
        try expectEqual(report.accepted, 2, "accepted: subscription 3 and the APNs device")
        try expectEqual(
            report.failedByReason,
            ["webpush_429": 1, "webpush_413": 1, "UNREGISTERED": 1],
            "failed by reason"
        )
    }

    static func theWebPushOverrideOfARequestReadsBack(_ store: any PushStore) async throws {
        _ = try await F.register(store, F.subscription(1), in: "a")
        let override = try WebPushOverride(jsonBytes: Array(#"{"aps":null,"title":"Goal!"}"#.utf8))
        let variants = [
            NotificationRequest(
                id: F.requestID("with-webpush"),
                app: F.app,
                groups: ["a"],
                payload: Payload.alert("x"),
                webPush: override,
                createdAt: F.at(2)
            ),
            NotificationRequest(
                id: F.requestID("without-webpush"),
                app: F.app,
                groups: ["a"],
                payload: Payload.alert("y"),
                createdAt: F.at(3)
            ),
        ]
        try await F.expectRequestsReadBack(store, variants, override: { $0.webPush?.bytes }, equals: override.bytes)
        try expectEqual(
            try await store.request(F.requestID("without-webpush"))?.webPush,
            nil,
            "none without one"
        )
    }
}
