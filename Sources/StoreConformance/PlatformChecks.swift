import Foundation
import PushgateCore

/// Devices of both platforms in one registry and one ledger: every token handed back keeps the platform
/// it was registered, targeted or recorded with.
enum PlatformChecks {
    typealias F = Fixture

    static func fcmDevicesRegisterAndReadBackAsFCM(_ store: any PushStore) async throws {
        try expectEqual(try await F.register(store, F.fcmToken(1), in: "news", at: 5), .created, "one FCM registration")
        let results = try await store.register(batch: [
            Registration(app: F.app, token: F.fcmToken(2), group: "news", at: F.at(6)),
            Registration(app: F.app, token: F.fcmToken(1), group: "news", at: F.at(7)),
            F.registration(3, "news", at: 6),
        ])
        try expectEqual(results, [.created, .alreadyMember, .created], "a batch mixing platforms")
        let device = try unwrap(try await store.device(app: F.app, token: F.fcmToken(1)), "FCM lookup")
        try expectEqual(device.token, F.fcmToken(1), "token")
        try expectEqual(device.token.platform, .fcm, "platform")
        try expectEqual(device.state, .valid, "state")
        try expectEqual(device.groups, ["news"], "groups")
        try expectEqual(device.registeredAt, F.at(5), "registeredAt")
        try expectEqual(device.lastRegisteredAt, F.at(7), "lastRegisteredAt")
        let page = try await store.devices(app: F.app, group: "news", after: nil, limit: 2)
        let rest = try await store.devices(app: F.app, group: "news", after: page.next, limit: 2)
        let members = (page.devices + rest.devices).map(\.token)
        try expectEqual(members.count, 3, "two pages list each member once")
        try expectEqual(
            Set(members),
            [F.fcmToken(1), F.fcmToken(2), F.token(3)],
            "one group holds both platforms, each with its platform"
        )
        try expectEqual(try await store.device(app: F.app, token: F.fcmToken(9)), nil, "an unknown FCM token")
    }

    static func sameTextOnBothPlatformsIsTwoDevices(_ store: any PushStore) async throws {
        try expectEqual(try await F.register(store, F.token(1), in: "a"), .created, "the APNs device")
        try expectEqual(try await F.register(store, F.fcmTwin(1), in: "a"), .created, "its FCM twin is another device")
        try expectEqual(try await F.register(store, F.fcmTwin(1), in: "b"), .joinedGroup, "the twin joins b")
        try expectEqual(try await store.device(app: F.app, token: F.token(1))?.groups, ["a"], "APNs groups")
        try expectEqual(try await store.device(app: F.app, token: F.fcmTwin(1))?.groups, ["a", "b"], "FCM groups")
        try expectEqual(
            Set(try await store.devices(app: F.app, group: "a", after: nil, limit: 10).devices.map(\.token)),
            [F.token(1), F.fcmTwin(1)],
            "group a lists both"
        )
        try expectEqual(try await store.unassign(app: F.app, token: F.fcmTwin(1), group: "a"), true, "unassign FCM")
        try expectEqual(try await store.device(app: F.app, token: F.token(1))?.groups, ["a"], "APNs keeps a")
        try expectEqual(try await store.device(app: F.app, token: F.fcmTwin(1))?.groups, ["b"], "FCM left a")
        try expectEqual(try await store.removeDevice(app: F.app, token: F.fcmTwin(1)), true, "remove the FCM device")
        try expectEqual(try await store.device(app: F.app, token: F.fcmTwin(1)), nil, "the FCM device is gone")
        try expectEqual(try await store.device(app: F.app, token: F.token(1))?.state, .valid, "the APNs one stays")
        try expectEqual(try await store.removeDevice(app: F.app, token: F.fcmTwin(1)), false, "removed already")
    }

    static func invalidatingAnFCMDeviceSkipsItAndLeavesItsAPNsTwin(_ store: any PushStore) async throws {
        _ = try await F.register(store, F.token(1), in: "g")
        _ = try await F.register(store, F.fcmTwin(1), in: "g")
        _ = try await F.register(store, F.fcmToken(2), in: "g")
        let unregistered = APNsReason(rawValue: "UNREGISTERED")
        try expectEqual(
            try await store.invalidate(
                app: F.app,
                token: F.fcmTwin(1),
                reason: unregistered,
                appleTimestamp: nil,
                at: F.at(3)
            ),
            .invalidated,
            "invalidate the FCM twin"
        )
        let twin = try unwrap(try await store.device(app: F.app, token: F.fcmTwin(1)), "the FCM twin")
        try expectEqual(twin.state, .invalid, "FCM twin state")
        try expectEqual(twin.invalidReason, unregistered, "FCM twin reason")
        try expectEqual(try await store.device(app: F.app, token: F.token(1))?.state, .valid, "the APNs device")
        let result = try await store.enqueue(F.request("r1", groups: ["g"], devices: [F.fcmTwin(1)], at: 4))
        try expectEqual(result.targetCount, 2, "targets: the APNs device and the valid FCM device")
        let sent = try await F.deliverAll(store, now: F.at(5))
        try expectEqual(Set(sent), [F.token(1), F.fcmToken(2)], "fan-out skips the invalid FCM device")

        // Invalidated with a batch of outcomes, as the dispatcher does for UNREGISTERED.
        _ = try await store.enqueue(F.request("r2", groups: ["g"], at: 6))
        try await F.completeNextChunk(
            store,
            accepted: 1,
            dead: F.fcmToken(2),
            reason: "UNREGISTERED",
            status: 404,
            at: 7
        )
        try expectEqual(try await store.device(app: F.app, token: F.fcmToken(2))?.state, .invalid, "FCM 2 invalid")
        try expectEqual(
            try await store.failures(of: F.requestID("r2"), after: nil, limit: 10).map(\.token),
            [F.fcmToken(2)],
            "the failure names the FCM device"
        )
    }

    static func mixedGroupFanOutReachesBothPlatforms(_ store: any PushStore) async throws {
        var batch = [Registration]()
        for number in 1...5 {
            batch.append(F.registration(number, number.isMultiple(of: 2) ? "a" : "b"))
            batch.append(Registration(app: F.app, token: F.fcmToken(number), group: "a", at: F.at(0)))
        }
        _ = try await store.register(batch: batch)
        let direct = [F.fcmToken(1), F.fcmToken(50), F.token(60)]
        let result = try await store.enqueue(F.request("r1", groups: ["a", "b"], devices: direct))
        try expectEqual(result.targetCount, 12, "5 APNs + 5 FCM members, 2 unregistered direct tokens")
        let sent = try await F.deliverAll(store, chunkSize: 4, pageSize: 3)
        let expected = Set((1...5).map(F.token) + (1...5).map(F.fcmToken) + [F.fcmToken(50), F.token(60)])
        try expectEqual(sent.count, expected.count, "each target once")
        try expectEqual(Set(sent), expected, "every target, each on its own platform")
        try expectEqual(sent.filter { $0.platform == .fcm }.count, 6, "FCM targets")
        try expectEqual(try await store.report(result.id)?.accepted, 12, "accepted")
    }

    static func fcmRetriesAndFailuresKeepThePlatform(_ store: any PushStore) async throws {
        for number in 1...3 { _ = try await F.register(store, F.fcmToken(number), in: "g") }
        _ = try await store.register(F.registration(4, "g"))
        let id = try await store.enqueue(F.request("r1", groups: ["g"])).id
        try await F.deliverAll(store, now: F.at(1)) { token in
            switch token {
            case F.fcmToken(1): .retry("QUOTA_EXCEEDED", nextAttemptAt: F.at(10))
            case F.fcmToken(2): .reject("SENDER_ID_MISMATCH", status: 403)
            case F.token(4): .reject("BadDeviceToken", status: 400)
            default: .accept
            }
        }
        let claims = try await store.claimRetries(owner: F.instanceA, now: F.at(10), leaseDuration: F.lease, limit: 10)
        try expectEqual(claims.map(\.token), [F.fcmToken(1)], "the retry is the FCM device's")
        try expectEqual(claims.first?.token.platform, .fcm, "retry claim platform")
        let recorded = try await store.recordRetryOutcomes(
            [RetryOutcome(claim: claims[0], result: .failed(reason: "QUOTA_EXCEEDED", status: 429))],
            owner: F.instanceA,
            now: F.at(11)
        )
        try expectEqual(recorded.applied, 1, "the FCM retry's outcome is applied")
        let failures = try await store.failures(of: id, after: nil, limit: 10)
        try expectEqual(
            Set(failures.map(\.token)),
            [F.fcmToken(1), F.fcmToken(2), F.token(4)],
            "failures keep each device's platform"
        )
        let paged = try await F.failuresPagedOneByOne(store, of: id)
        try expectEqual(paged, failures.map(\.token), "paging after an FCM token lists each failure once")
        let report = try unwrap(try await store.report(id), "report")
        try expectEqual(report.state, .done, "state")
        try expectEqual(
            report.failedByReason,
            ["QUOTA_EXCEEDED": 1, "SENDER_ID_MISMATCH": 1, "BadDeviceToken": 1],
            "failed by reason"
        )
    }

    static func fcmOverrideAndFCMTokensOfARequestReadBack(_ store: any PushStore) async throws {
        _ = try await F.register(store, F.fcmToken(1), in: "a")
        let override = try FCMOverride(
            jsonBytes: Array(#"{"android":{"priority":"high","ttl":"60s"},"data":{"k":"v"}}"#.utf8)
        )
        let variants = [
            NotificationRequest(
                id: F.requestID("with-fcm"),
                app: F.app,
                groups: ["a"],
                devices: [F.fcmToken(2), F.token(3), F.fcmTwin(3)],
                payload: Payload.alert("x"),
                fcm: override,
                createdAt: F.at(2)
            ),
            NotificationRequest(
                id: F.requestID("without-fcm"),
                app: F.app,
                devices: [F.fcmToken(4)],
                payload: Payload.alert("y"),
                createdAt: F.at(3)
            ),
        ]
        try await F.expectRequestsReadBack(store, variants, override: { $0.fcm?.bytes }, equals: override.bytes)
    }
}
