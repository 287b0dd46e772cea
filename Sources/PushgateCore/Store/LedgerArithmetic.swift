package import Foundation

/// The ledger's arithmetic, pure: the stores read rows, ask these functions, and write what they answer,
/// so that SQLite and PostgreSQL cut chunks and count expired targets the same way.
public enum LedgerArithmetic {
    /// A request's cut cursors, as stored on its row.
    public struct CutCursor: Hashable, Sendable {
        /// Direct tokens are positions 1...tokenCount; those up to `tokenCut` are cut.
        public var tokenCut: Int64
        public var tokenCount: Int64
        /// Group members are device ids up to `bound`; those up to `groupCut` are cut.
        public var groupCut: Int64
        public var bound: Int64
        public var hasGroups: Bool

        public init(tokenCut: Int64, tokenCount: Int64, groupCut: Int64, bound: Int64, hasGroups: Bool) {
            self.tokenCut = tokenCut
            self.tokenCount = tokenCount
            self.groupCut = groupCut
            self.bound = bound
            self.hasGroups = hasGroups
        }
    }

    /// A chunk to cut: its targets `(after, through]` of `kind`, and whether it is the request's last.
    public struct Cut: Hashable, Sendable {
        public var kind: WorkChunk.Kind
        public var after: Int64
        public var through: Int64
        /// Nothing of the request is left to cut after this chunk.
        public var cutDone: Bool

        public init(_ kind: WorkChunk.Kind, after: Int64, through: Int64, cutDone: Bool) {
            self.kind = kind
            self.after = after
            self.through = through
            self.cutDone = cutDone
        }
    }

    /// What to cut next from a request.
    public enum NextCut: Hashable, Sendable {
        /// Direct tokens first (usually few, cheap to cut): positions `(after, through]`.
        case tokens(Cut)
        /// Group members: read them, then ask the scan for the chunk (``MemberScan/cut(found:)``).
        case members(MemberScan)
    }

    /// Where the next chunk of group members is looked for: member ids in `(after, bound]`, at most
    /// `limit` (the chunk size) of them, ascending.
    public struct MemberScan: Hashable, Sendable {
        public var after: Int64
        public var bound: Int64
        public var limit: Int

        public init(after: Int64, bound: Int64, limit: Int) {
            self.after = after
            self.bound = bound
            self.limit = limit
        }

        /// The chunk of the member ids the scan found: how many, and the last one. Nil when none was
        /// found: the request's cut is done. A full page ends at its last id; a short one covers the rest,
        /// up to the bound.
        public func cut(found: (count: Int, last: Int64?)) -> Cut? {
            guard let last = found.last, found.count > 0 else { return nil }
            let through = found.count == limit ? last : bound
            return Cut(.deviceRange, after: after, through: through, cutDone: through >= bound)
        }
    }

    public static func nextCut(_ cursor: CutCursor, chunkSize: Int) -> NextCut {
        if cursor.tokenCut < cursor.tokenCount {
            let through = min(cursor.tokenCut + Int64(chunkSize), cursor.tokenCount)
            let cutDone = through == cursor.tokenCount && !cursor.hasGroups
            return .tokens(Cut(.directTokens, after: cursor.tokenCut, through: through, cutDone: cutDone))
        }
        return .members(MemberScan(after: cursor.groupCut, bound: cursor.bound, limit: chunkSize))
    }

    /// A range of a request's targets not sent yet, counted as failed ("expired") when it expires.
    public struct UnsentRange: Hashable, Sendable {
        public var kind: WorkChunk.Kind
        public var after: Int64
        public var through: Int64

        public init(kind: WorkChunk.Kind, after: Int64, through: Int64) {
            self.kind = kind
            self.after = after
            self.through = through
        }
    }

    /// What an expiring request never sent: the rest of each open chunk after its progress, and, if its
    /// cut is not done, everything not cut yet. Empty ranges are left out.
    public static func unsentRanges(
        openChunks: [(kind: WorkChunk.Kind, progress: Int64, through: Int64)],
        cursor: CutCursor,
        cutDone: Bool
    ) -> [UnsentRange] {
        var ranges = openChunks.map { UnsentRange(kind: $0.kind, after: $0.progress, through: $0.through) }
        if !cutDone {
            ranges.append(UnsentRange(kind: .directTokens, after: cursor.tokenCut, through: cursor.tokenCount))
            ranges.append(UnsentRange(kind: .deviceRange, after: cursor.groupCut, through: cursor.bound))
        }
        return ranges.filter { $0.after < $0.through }
    }

    /// ``DeliveryLedger/nextWakeUp(after:)`` from what the store read (stored milliseconds, nil where
    /// there is none): the earliest retry due (`max(next_attempt_at, lease_expires_at)`: a leased retry
    /// is due when its lease ends), the earliest end of an open chunk's lease, and the earliest expiration
    /// of an unfinished request (`expiration`, epoch seconds). Expiry happens once `now` is past the
    /// expiration: 1 ms after it.
    package static func nextWakeUp(retryDue: Int64?, leaseEnd: Int64?, expiration: Int64?) -> Date? {
        [retryDue, leaseEnd, expiration.map { $0 * 1000 + 1 }].compactMap { $0 }.min().map(Millis.date)
    }
}
