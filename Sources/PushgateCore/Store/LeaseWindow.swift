public import Foundation

/// A lease being taken or renewed: who takes it, when, and for how long.
///
/// Every claim and renewal in the ledger (chunks, retries, instance ids) is one of these: the stores
/// compare rows' `lease_expires_at` (or `expires_at`) with ``nowMillis`` and write ``expiresAtMillis``.
public struct LeaseWindow: Hashable, Sendable {
    public var owner: InstanceID
    public var now: Date
    public var duration: Duration

    public init(owner: InstanceID, now: Date, duration: Duration) {
        self.owner = owner
        self.now = now
        self.duration = duration
    }

    /// `now` as stored.
    package var nowMillis: Int64 { Millis.from(now) }
    /// The end of the lease as stored: `now + duration`, both in whole milliseconds.
    package var expiresAtMillis: Int64 { nowMillis + Millis.from(duration) }
    /// The end of the lease as a claim reports it.
    public var expiresAt: Date { Millis.date(expiresAtMillis) }
}

/// Times are stored as whole milliseconds since 1970 (APNs' 410 timestamps have that precision), in
/// SQLite and PostgreSQL alike.
package enum Millis {
    package static func from(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded(.down)) }

    package static func date(_ milliseconds: Int64) -> Date {
        Date(timeIntervalSince1970: TimeInterval(milliseconds) / 1000)
    }

    /// A duration in whole milliseconds (rounded down).
    package static func from(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }
}
