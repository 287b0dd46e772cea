public import Foundation

/// One live process per instance id: an instance claims its id (a heartbeat row with a time to live)
/// before it releases "its own" leases at start, renews the claim while it runs, and releases it when it
/// stops. A second live process with the same id is refused; a claim left by a process that died goes
/// stale at its expiry and is taken over.
public protocol InstanceLeases: Sendable {
    /// Claims `lease.owner`'s id for `holder` (a value unique to this process) until `lease.expiresAt`, if
    /// the id is free, was released, went stale (its expiry is at or before `lease.now`) or is `holder`'s
    /// already. Returns false, writing nothing, if another holder's claim is live.
    func takeInstance(_ lease: LeaseWindow, holder: String) async throws -> Bool

    /// Ends `holder`'s claim of `id`, so that the id can be claimed at once. Does nothing if another
    /// holder has it.
    func releaseInstance(_ id: InstanceID, holder: String) async throws
}

extension InstanceLeases {
    /// Claims `id` for `holder` until `now + timeToLive` (see ``takeInstance(_:holder:)``). Throws
    /// ``StoreError/Code/instanceIDInUse`` if another holder's claim is live.
    public func claimInstance(_ id: InstanceID, holder: String, now: Date, timeToLive: Duration) async throws {
        guard try await takeInstance(LeaseWindow(owner: id, now: now, duration: timeToLive), holder: holder) else {
            throw StoreError.instanceIDInUse(id)
        }
    }

    /// Extends `holder`'s claim of `id` to `now + timeToLive`: a claim by the holder itself, by the same
    /// rule. Throws ``StoreError/Code/instanceIDInUse`` if another holder took the id over meanwhile (this
    /// process stopped renewing for too long).
    public func renewInstance(_ id: InstanceID, holder: String, now: Date, timeToLive: Duration) async throws {
        try await claimInstance(id, holder: holder, now: now, timeToLive: timeToLive)
    }
}

extension InstanceID {
    /// A default id unique per process: the host name, the process id and a random suffix, e.g.
    /// `push-1.example-4242-9f3a1c07`.
    public static func unique(
        hostName: String = ProcessInfo.processInfo.hostName,
        processID: Int32 = ProcessInfo.processInfo.processIdentifier,
        using generator: inout some RandomNumberGenerator
    ) -> InstanceID {
        let suffix = String(generator.next() as UInt32, radix: 16)
        return InstanceID("\(hostName)-\(processID)-\(String(repeating: "0", count: 8 - suffix.count))\(suffix)")
    }

    public static func unique() -> InstanceID {
        var generator = SystemRandomNumberGenerator()
        return unique(using: &generator)
    }
}
