import Foundation
import PushgateCore

enum RegistryChecks {
    typealias F = Fixture

    static func registeringCreatesAValidDevice(_ store: any PushStore) async throws {
        try expectEqual(try await store.register(F.registration(1, "news", at: 5)), .created, "first registration")
        let device = try unwrap(try await store.device(app: F.app, token: F.token(1)), "lookup")
        try expectEqual(device.state, .valid, "state")
        try expectEqual(device.groups, ["news"], "groups")
        try expectEqual(device.registeredAt, F.at(5), "registeredAt")
        try expectEqual(device.lastRegisteredAt, F.at(5), "lastRegisteredAt")
        try expectEqual(device.invalidatedAt, nil, "invalidatedAt")
        try expectEqual(device.invalidReason, nil, "invalidReason")
        try expectEqual(device.app, F.app, "app")
        try expectEqual(device.token, F.token(1), "token")
    }

    static func registeringTwiceIsIdempotent(_ store: any PushStore) async throws {
        try expectEqual(try await store.register(F.registration(1, "news", at: 5)), .created, "first registration")
        try expectEqual(
            try await store.register(F.registration(1, "news", at: 9)),
            .alreadyMember,
            "second registration"
        )
        let device = try unwrap(try await store.device(app: F.app, token: F.token(1)), "lookup")
        try expectEqual(device.groups, ["news"], "groups")
        try expectEqual(device.registeredAt, F.at(5), "registeredAt stays the first")
        try expectEqual(device.lastRegisteredAt, F.at(9), "lastRegisteredAt moves to the latest")
        let page = try await store.devices(app: F.app, group: "news", after: nil, limit: 10)
        try expectEqual(page.devices.map(\.token), [F.token(1)], "group members")
        // An older registration arriving late does not move lastRegisteredAt back.
        try expectEqual(try await store.register(F.registration(1, "news", at: 7)), .alreadyMember, "late registration")
        try expectEqual(
            try await store.device(app: F.app, token: F.token(1))?.lastRegisteredAt,
            F.at(9),
            "lastRegisteredAt never moves back"
        )
    }

    static func registeringInAnotherGroupJoinsIt(_ store: any PushStore) async throws {
        try expectEqual(try await store.register(F.registration(1, "sports")), .created, "first group")
        try expectEqual(try await store.register(F.registration(1, "news")), .joinedGroup, "second group")
        try expectEqual(
            try await store.device(app: F.app, token: F.token(1))?.groups,
            ["news", "sports"],
            "groups by name"
        )
    }

    static func appsAreSeparateNamespaces(_ store: any PushStore) async throws {
        try expectEqual(try await store.register(F.registration(1, "news", app: "one")), .created, "app one")
        try expectEqual(
            try await store.register(F.registration(1, "news", app: "two")),
            .created,
            "same token, app two"
        )
        try expectEqual(
            try await store.invalidate(
                app: "one",
                token: F.token(1),
                reason: .badDeviceToken,
                appleTimestamp: nil,
                at: F.at(1)
            ),
            .invalidated,
            "invalidate in app one"
        )
        try expectEqual(try await store.device(app: "one", token: F.token(1))?.state, .invalid, "app one's device")
        try expectEqual(try await store.device(app: "two", token: F.token(1))?.state, .valid, "app two's device")
        try await expectStoreError(.unknownGroup, "app three has no group news") {
            _ = try await store.devices(app: "three", group: "news", after: nil, limit: 10)
        }
        try await expectStoreError(.unknownGroup, "a request for app three's group news") {
            var request = F.request("r1", groups: ["news"])
            request.app = "three"
            _ = try await store.enqueue(request)
        }
    }

    static func batchRegistrationReportsEachRegistration(_ store: any PushStore) async throws {
        _ = try await store.register(F.registration(9, "old"))
        _ = try await store.invalidate(
            app: F.app,
            token: F.token(9),
            reason: .unregistered,
            appleTimestamp: F.at(1),
            at: F.at(2)
        )
        let results = try await store.register(batch: [
            F.registration(1, "a", at: 3), F.registration(1, "a", at: 3), F.registration(2, "a", at: 3),
            F.registration(1, "b", at: 3), F.registration(9, "a", at: 3),
        ])
        try expectEqual(results, [.created, .alreadyMember, .created, .joinedGroup, .revalidated], "results in order")
        try expectEqual(try await store.register(batch: []), [], "an empty batch")
        let page = try await store.devices(app: F.app, group: "a", after: nil, limit: 10)
        try expectEqual(Set(page.devices.map(\.token)), [F.token(1), F.token(2), F.token(9)], "group a")
        try expectEqual(
            try await store.device(app: F.app, token: F.token(9))?.groups,
            ["a", "old"],
            "revalidated keeps its groups"
        )
    }

    static func invalidBatchWritesNothing(_ store: any PushStore) async throws {
        try await expectStoreError(.invalidArgument, "a batch with an empty group name") {
            _ = try await store.register(batch: [F.registration(1, "a"), F.registration(2, "")])
        }
        try expectEqual(try await store.device(app: F.app, token: F.token(1)), nil, "nothing of the batch was applied")
    }

    static func unassignLeavesOtherGroups(_ store: any PushStore) async throws {
        _ = try await store.register(F.registration(1, "a"))
        _ = try await store.register(F.registration(1, "b"))
        try expectEqual(try await store.unassign(app: F.app, token: F.token(1), group: "a"), true, "unassign a member")
        try expectEqual(try await store.unassign(app: F.app, token: F.token(1), group: "a"), false, "unassign again")
        try expectEqual(
            try await store.unassign(app: F.app, token: F.token(2), group: "b"),
            false,
            "unassign an unknown device"
        )
        try expectEqual(
            try await store.unassign(app: F.app, token: F.token(1), group: "zz"),
            false,
            "unassign from an unknown group"
        )
        try expectEqual(try await store.device(app: F.app, token: F.token(1))?.groups, ["b"], "remaining groups")
        try expectEqual(
            try await store.devices(app: F.app, group: "a", after: nil, limit: 10).devices,
            [],
            "group a is empty but exists"
        )
        _ = try await store.unassign(app: F.app, token: F.token(1), group: "b")
        try expectEqual(
            try await store.device(app: F.app, token: F.token(1))?.groups,
            [],
            "a device in no group stays registered"
        )
    }

    static func removingADeviceRemovesItEverywhere(_ store: any PushStore) async throws {
        _ = try await store.register(F.registration(1, "a"))
        _ = try await store.register(F.registration(1, "b"))
        _ = try await store.register(F.registration(2, "a"))
        try expectEqual(try await store.removeDevice(app: F.app, token: F.token(1)), true, "remove")
        try expectEqual(try await store.removeDevice(app: F.app, token: F.token(1)), false, "remove again")
        try expectEqual(try await store.device(app: F.app, token: F.token(1)), nil, "lookup after removal")
        try expectEqual(
            try await store.devices(app: F.app, group: "a", after: nil, limit: 10).devices.map(\.token),
            [F.token(2)],
            "group a"
        )
        try expectEqual(try await store.devices(app: F.app, group: "b", after: nil, limit: 10).devices, [], "group b")
        try expectEqual(try await store.register(F.registration(1, "b")), .created, "registering again creates it anew")
    }

    static func lookingUpAnUnknownDeviceFindsNothing(_ store: any PushStore) async throws {
        try expectEqual(try await store.device(app: F.app, token: F.token(1)), nil, "unknown device")
        _ = try await store.register(F.registration(1, "a", app: "other"))
        try expectEqual(try await store.device(app: F.app, token: F.token(1)), nil, "device of another app")
    }

    static func pagedGroupListingIsStableAcrossPages(_ store: any PushStore) async throws {
        try await F.register(store, 1...25, in: "g")
        try await F.register(store, 100...105, in: "other")
        var seen = [DeviceToken]()
        var cursor: GroupCursor? = nil
        var pages = 0
        repeat {
            let page = try await store.devices(app: F.app, group: "g", after: cursor, limit: 10)
            try expect(page.devices.count <= 10, "page size within the limit")
            seen += page.devices.map(\.token)
            cursor = page.next
            pages += 1
            if pages == 1 {
                // Registrations while a client pages through change nothing it has not reached yet.
                try await F.register(store, 200...204, in: "g")
                _ = try await store.register(F.registration(3, "g", at: 50))  // already listed: not again
            }
            try expect(pages < 10, "listing terminates")
        } while cursor != nil
        try expectEqual(seen.count, Set(seen).count, "no device listed twice")
        try expect(Set(1...25).map(F.token).allSatisfy(Set(seen).contains), "every device present throughout is listed")
        try expectEqual(seen.count, 30, "the devices added during the listing appear once, on later pages")

        // A group whose size is a multiple of the limit ends with next == nil, not with an empty page.
        try await F.register(store, 300...319, in: "even")
        let first = try await store.devices(app: F.app, group: "even", after: nil, limit: 10)
        let second = try await store.devices(
            app: F.app,
            group: "even",
            after: try unwrap(first.next, "next"),
            limit: 10
        )
        try expectEqual(second.devices.count, 10, "second page")
        try expectEqual(second.next, nil, "no page after the last")
        try expectEqual(
            first.devices.map(\.token) + second.devices.map(\.token),
            (300...319).map(F.token),
            "listing order is registration order"
        )
    }

    static func listingAnUnknownGroupFails(_ store: any PushStore) async throws {
        try await expectStoreError(.unknownGroup, "listing a group never registered to") {
            _ = try await store.devices(app: F.app, group: "nope", after: nil, limit: 10)
        }
    }

    static func badDeviceTokenInvalidatesWithoutTimestamp(_ store: any PushStore) async throws {
        _ = try await store.register(F.registration(1, "a", at: 100))
        try expectEqual(
            try await store.invalidate(
                app: F.app,
                token: F.token(1),
                reason: .badDeviceToken,
                appleTimestamp: nil,
                at: F.at(200)
            ),
            .invalidated,
            "BadDeviceToken"
        )
        let device = try unwrap(try await store.device(app: F.app, token: F.token(1)), "lookup")
        try expectEqual(device.state, .invalid, "state")
        try expectEqual(device.invalidReason, .badDeviceToken, "reason")
        try expectEqual(device.invalidatedAt, F.at(200), "invalidatedAt")
        try expectEqual(device.groups, ["a"], "an invalid device keeps its memberships")
        try expectEqual(
            try await store.invalidate(
                app: F.app,
                token: F.token(1),
                reason: .badDeviceToken,
                appleTimestamp: nil,
                at: F.at(300)
            ),
            .alreadyInvalid,
            "invalidating again"
        )
        try expectEqual(
            try await store.device(app: F.app, token: F.token(1))?.invalidatedAt,
            F.at(200),
            "the first invalidation is kept"
        )
    }

    static func reRegistrationAfterAppleTimestampSurvives410(_ store: any PushStore) async throws {
        _ = try await store.register(F.registration(1, "a", at: 0))
        _ = try await store.register(F.registration(1, "a", at: 100))
        let result = try await store.invalidate(
            app: F.app,
            token: F.token(1),
            reason: .unregistered,
            appleTimestamp: F.at(50),
            at: F.at(120)
        )
        try expectEqual(
            result,
            .keptBecauseRegisteredLater(lastRegisteredAt: F.at(100)),
            "410 older than the re-registration"
        )
        try expectEqual(try await store.device(app: F.app, token: F.token(1))?.state, .valid, "state")
    }

    static func registrationBeforeAppleTimestampIsInvalidatedBy410(_ store: any PushStore) async throws {
        _ = try await store.register(F.registration(1, "a", at: 0))
        try expectEqual(
            try await store.invalidate(
                app: F.app,
                token: F.token(1),
                reason: .unregistered,
                appleTimestamp: F.at(50),
                at: F.at(60)
            ),
            .invalidated,
            "410 newer than the registration"
        )
        let device = try unwrap(try await store.device(app: F.app, token: F.token(1)), "lookup")
        try expectEqual(device.state, .invalid, "state")
        try expectEqual(device.invalidReason, .unregistered, "reason")
        // A timestamp equal to the registration time also invalidates: the registration is not *after* it.
        _ = try await store.register(F.registration(2, "a", at: 70))
        try expectEqual(
            try await store.invalidate(
                app: F.app,
                token: F.token(2),
                reason: .unregistered,
                appleTimestamp: F.at(70),
                at: F.at(80)
            ),
            .invalidated,
            "410 at the very moment of the registration"
        )
    }

    static func reRegisteringAnInvalidDeviceRevalidatesIt(_ store: any PushStore) async throws {
        _ = try await store.register(F.registration(1, "a", at: 0))
        _ = try await store.invalidate(
            app: F.app,
            token: F.token(1),
            reason: .unregistered,
            appleTimestamp: F.at(5),
            at: F.at(10)
        )
        try expectEqual(try await store.register(F.registration(1, "b", at: 20)), .revalidated, "re-registration")
        let device = try unwrap(try await store.device(app: F.app, token: F.token(1)), "lookup")
        try expectEqual(device.state, .valid, "state")
        try expectEqual(device.registeredAt, F.at(20), "registeredAt is the re-registration")
        try expectEqual(device.lastRegisteredAt, F.at(20), "lastRegisteredAt")
        try expectEqual(device.invalidatedAt, nil, "invalidatedAt cleared")
        try expectEqual(device.invalidReason, nil, "invalidReason cleared")
        try expectEqual(device.groups, ["a", "b"], "old and new groups")
    }

    static func invalidatingAnUnknownDeviceChangesNothing(_ store: any PushStore) async throws {
        try expectEqual(
            try await store.invalidate(
                app: F.app,
                token: F.token(1),
                reason: .badDeviceToken,
                appleTimestamp: nil,
                at: F.at(1)
            ),
            .unknownDevice,
            "unknown device"
        )
        try expectEqual(try await store.device(app: F.app, token: F.token(1)), nil, "still unknown")
    }
}
