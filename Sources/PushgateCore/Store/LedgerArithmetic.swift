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

    /// What to cut next from a request.
    public enum NextCut: Hashable, Sendable {
        /// Direct tokens first (usually few, cheap to cut): positions `(after, through]`.
        case tokens(after: Int64, through: Int64, cutDone: Bool)
        /// Group members: read up to the chunk size of member ids in `(after, bound]`, then ask
        /// ``deviceRange(after:bound:found:lastFound:chunkSize:)``.
        case members(after: Int64, bound: Int64)
    }

    public static func nextCut(_ cursor: CutCursor, chunkSize: Int) -> NextCut {
        if cursor.tokenCut < cursor.tokenCount {
            let through = min(cursor.tokenCut + Int64(chunkSize), cursor.tokenCount)
            return .tokens(
                after: cursor.tokenCut,
                through: through,
                cutDone: through == cursor.tokenCount && !cursor.hasGroups
            )
        }
        return .members(after: cursor.groupCut, bound: cursor.bound)
    }

    /// A chunk of group members, from the `found` member ids read after `after` (at most `chunkSize`,
    /// the last one `lastFound`). Nil when none was found: the request's cut is done. A full page ends at
    /// its last id; a short one covers the rest, up to the bound.
    public static func deviceRange(
        after: Int64,
        bound: Int64,
        found: Int,
        lastFound: Int64?,
        chunkSize: Int
    ) -> (after: Int64, through: Int64, cutDone: Bool)? {
        guard let lastFound, found > 0 else { return nil }
        let through = found == chunkSize ? lastFound : bound
        return (after, through, through >= bound)
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
}
