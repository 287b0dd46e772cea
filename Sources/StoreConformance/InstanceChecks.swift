import Foundation
import PushgateCore

enum InstanceChecks {
    typealias F = Fixture
    static let ttl = Duration.seconds(30)

    static func leases(_ store: any PushStore) throws -> any InstanceLeases {
        try unwrap(store as? any InstanceLeases, "the store as InstanceLeases")
    }

    static func aLiveInstanceIDIsRefusedToAnotherProcess(_ store: any PushStore) async throws {
        let leases = try leases(store)
        try await leases.claimInstance(F.instanceA, holder: "process-1", now: F.at(0), timeToLive: ttl)
        try await expectStoreError(.instanceIDInUse, "a second process claiming a live id") {
            try await leases.claimInstance(F.instanceA, holder: "process-2", now: F.at(29), timeToLive: ttl)
        }
        try await leases.claimInstance(F.instanceB, holder: "process-2", now: F.at(29), timeToLive: ttl)
        // Renewing keeps it live past the first expiry.
        try await leases.renewInstance(F.instanceA, holder: "process-1", now: F.at(20), timeToLive: ttl)
        try await expectStoreError(.instanceIDInUse, "still live after the renewal") {
            try await leases.claimInstance(F.instanceA, holder: "process-2", now: F.at(45), timeToLive: ttl)
        }
        // Claiming one's own id again is a renewal.
        try await leases.claimInstance(F.instanceA, holder: "process-1", now: F.at(45), timeToLive: ttl)
    }

    static func aStaleInstanceIDIsTakenOverAndTheOldHolderCannotRenew(_ store: any PushStore) async throws {
        let leases = try leases(store)
        try await leases.claimInstance(F.instanceA, holder: "process-1", now: F.at(0), timeToLive: ttl)
        try await leases.claimInstance(F.instanceA, holder: "process-2", now: F.at(30), timeToLive: ttl)
        try await expectStoreError(.instanceIDInUse, "the old holder renewing after the takeover") {
            try await leases.renewInstance(F.instanceA, holder: "process-1", now: F.at(31), timeToLive: ttl)
        }
        // A release by the old holder does not free the new holder's id.
        try await leases.releaseInstance(F.instanceA, holder: "process-1")
        try await expectStoreError(.instanceIDInUse, "after the old holder's release") {
            try await leases.claimInstance(F.instanceA, holder: "process-3", now: F.at(32), timeToLive: ttl)
        }
    }

    static func aReleasedInstanceIDIsFreeAtOnce(_ store: any PushStore) async throws {
        let leases = try leases(store)
        try await leases.claimInstance(F.instanceA, holder: "process-1", now: F.at(0), timeToLive: ttl)
        try await leases.releaseInstance(F.instanceA, holder: "process-1")
        try await leases.claimInstance(F.instanceA, holder: "process-2", now: F.at(1), timeToLive: ttl)
    }
}
