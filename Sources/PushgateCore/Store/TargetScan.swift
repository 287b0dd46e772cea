/// One page of a chunk's targets to read: the cursors (device ids or positions) in `(after, through]`,
/// ascending, at most `limit`. What every store's `targets(of:after:limit:)` shares: where the page
/// starts, and how the rows it read become a ``TargetPage``; each store keeps only its queries.
package struct TargetScan: Hashable, Sendable {
    package let after: Int64
    package let through: Int64
    package let limit: Int

    /// The page of `chunk` after `cursor` (a cursor before the chunk's start reads from the start).
    /// Throws ``StoreError/Code/invalidArgument`` for a limit below one.
    package init(chunk: WorkChunk, after cursor: Int64, limit: Int) throws(StoreError) {
        self.limit = try StoreError.positive(limit)
        self.after = max(cursor, chunk.after)
        self.through = chunk.through
    }

    /// True when nothing of the chunk is left to read: answer `page(found: [])` without a query.
    package var isDone: Bool { after >= through }

    /// The page of the rows read, `(cursor, storage key)` in ascending cursor order. Fewer than `limit`
    /// rows means the range held no more: the page then scanned through the chunk's end.
    package func page(found: [(cursor: Int64, token: String)]) throws -> TargetPage {
        var targets = [DeliveryTarget]()
        targets.reserveCapacity(found.count)
        for (cursor, key) in found {
            targets.append(DeliveryTarget(cursor: cursor, token: try StoredForm.deviceToken(key)))
        }
        let scanned = found.count < limit ? through : (targets.last?.cursor ?? through)
        return TargetPage(targets: targets, scannedThrough: scanned, isEnd: scanned >= through)
    }
}
