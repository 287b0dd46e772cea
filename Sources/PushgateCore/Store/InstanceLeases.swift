public import Foundation

/// One live process per instance id: an instance claims its id (a heartbeat row with a time to live)
/// before it releases "its own" leases at start, renews the claim while it runs, and releases it when it
/// stops. A second live process with the same id is refused; a claim left by a process that died goes
/// stale at its expiry and is taken over.
public protocol InstanceLeases: Sendable {
    /// Claims `id` for `holder` (a value unique to this process) until `now + timeToLive`. Succeeds if
    /// the id is free, was released, went stale (its expiry is at or before `now`) or is `holder`'s
    /// already. Throws ``StoreError/Code/instanceIDInUse`` if another holder's claim is live.
    func claimInstance(_ id: InstanceID, holder: String, now: Date, timeToLive: Duration) async throws

    /// Extends `holder`'s claim of `id` to `now + timeToLive`. Throws ``StoreError/Code/instanceIDInUse``
    /// if another holder took the id over meanwhile (this process stopped renewing for too long).
    func renewInstance(_ id: InstanceID, holder: String, now: Date, timeToLive: Duration) async throws

    /// Ends `holder`'s claim of `id`, so that the id can be claimed at once. Does nothing if another
    /// holder has it.
    func releaseInstance(_ id: InstanceID, holder: String) async throws
}

extension InstanceLeases {
    /// A claim by the holder itself: the same rule (refused only while another holder's claim is live).
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
