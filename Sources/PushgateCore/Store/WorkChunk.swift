public import Foundation

/// The identity of a gateway instance as the ledger's leases record it.
///
/// Stable across restarts of the same instance (configure it, or derive it from the host name), so that
/// a restarted instance can release what its previous run held (``DeliveryLedger/releaseLeases(owner:now:)``)
/// instead of waiting for the leases to expire.
public struct InstanceID: Hashable, Sendable, CustomStringConvertible {
    public let value: String

    public init(_ value: String) { self.value = value }

    public var description: String { value }
}

/// A slice of one request's targets, leased to one instance.
///
/// A chunk is a half-open range `(after, through]` over a target sequence:
/// - ``Kind/deviceRange``: ids of registered devices (the order fan-out reads group memberships in);
/// - ``Kind/directTokens``: positions in the request's list of direct tokens.
///
/// Chunks are cut lazily, one per claim, from the request's cut cursor: a request for a million devices
/// never has more than (instances × 1) uncut-but-claimed chunks and writes one row per chunk, not per device.
public struct WorkChunk: Hashable, Sendable, CustomStringConvertible {
    public enum Kind: String, Hashable, Sendable {
        case deviceRange = "devices"
        case directTokens = "tokens"
    }

    /// The chunk's id in the store.
    public let id: Int64
    public let requestID: RequestID
    public let kind: Kind
    /// The range is `(after, through]`.
    public let after: Int64
    public let through: Int64
    /// Every target at or before this cursor has a recorded outcome: resume after it. Equal to `after`
    /// for a fresh chunk; further on for a chunk taken over from an instance that died.
    public let progress: Int64
    /// Changes on every claim: ``DeliveryLedger/recordProgress(_:owner:now:leaseDuration:)`` is refused
    /// when it no longer matches, i.e. when another instance (or a later run of this one) took the chunk.
    public let leaseGeneration: Int64
    public let leaseExpiresAt: Date
    /// True when this claim resumes a chunk an earlier lease held (crash recovery): the targets just after
    /// `progress` may have been sent already, within the earlier holder's in-flight window.
    public let isTakeover: Bool

    public init(
        id: Int64,
        requestID: RequestID,
        kind: Kind,
        after: Int64,
        through: Int64,
        progress: Int64,
        leaseGeneration: Int64,
        leaseExpiresAt: Date,
        isTakeover: Bool
    ) {
        self.id = id
        self.requestID = requestID
        self.kind = kind
        self.after = after
        self.through = through
        self.progress = progress
        self.leaseGeneration = leaseGeneration
        self.leaseExpiresAt = leaseExpiresAt
        self.isTakeover = isTakeover
    }

    /// A chunk just cut from its request: progress at its start, the first lease generation, no takeover.
    package static func cut(
        id: Int64,
        of requestID: RequestID,
        _ range: LedgerArithmetic.Cut,
        leaseExpiresAt: Date
    ) -> WorkChunk {
        WorkChunk(
            id: id,
            requestID: requestID,
            kind: range.kind,
            after: range.after,
            through: range.through,
            progress: range.after,
            leaseGeneration: 1,
            leaseExpiresAt: leaseExpiresAt,
            isTakeover: false
        )
    }

    public var description: String {
        "chunk \(id) of \(requestID) (\(kind.rawValue) (\(after), \(through)], progress \(progress), generation \(leaseGeneration))"
    }
}

/// One device to send to.
public struct DeliveryTarget: Hashable, Sendable {
    /// The target's position in its chunk's sequence. Progress is recorded in these.
    public var cursor: Int64
    public var token: DeviceToken

    public init(cursor: Int64, token: DeviceToken) {
        self.cursor = cursor
        self.token = token
    }
}

/// A page of a chunk's targets, in cursor order, each distinct device once, invalid devices left out.
public struct TargetPage: Hashable, Sendable {
    public var targets: [DeliveryTarget]
    /// How far the page read: every target of the chunk at or before this cursor is in this page or an
    /// earlier one. When a run of invalid devices is skipped, `targets` may be empty while this moves on;
    /// record progress up to it anyway.
    public var scannedThrough: Int64
    /// True when nothing of the chunk is left after `scannedThrough` (it then equals the chunk's `through`).
    public var isEnd: Bool
    /// Cursors of targets the page left out because they were invalidated after the request was stored
    /// (the request's target count includes them), ascending. Record each with the progress that covers
    /// its cursor (``ChunkProgress/skipped``), so that a finished request's
    /// `targets = accepted + failed + skipped`.
    public var skipped: [Int64]
    /// The service of each of `skipped`, in the same order (for the report's split by service); shorter
    /// than `skipped` when a page does not say, the rest then counts as APNs.
    public var skippedPlatforms: [PushPlatform]

    public init(
        targets: [DeliveryTarget],
        scannedThrough: Int64,
        isEnd: Bool,
        skipped: [Int64] = [],
        skippedPlatforms: [PushPlatform] = []
    ) {
        self.targets = targets
        self.scannedThrough = scannedThrough
        self.isEnd = isEnd
        self.skipped = skipped
        self.skippedPlatforms = skippedPlatforms
    }

    /// The services of the first `count` of ``skipped``.
    public func skippedByService(first count: Int) -> ServiceCounts {
        var counts = ServiceCounts(skippedPlatforms.prefix(count))
        counts.apns += count - min(count, skippedPlatforms.count)
        return counts
    }
}
