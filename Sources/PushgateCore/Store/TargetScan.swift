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

    /// A row a page read: a target's cursor and storage key, and whether it is left out because its device
    /// was invalidated after the request was stored (``TargetPage/skipped``).
    package typealias Row = (cursor: Int64, token: String, skipped: Bool)

    /// The page of the rows read, `(cursor, storage key)` in ascending cursor order, none skipped.
    package func page(found: [(cursor: Int64, token: String)]) throws -> TargetPage {
        try page(rows: found.map { (cursor: $0.cursor, token: $0.token, skipped: false) })
    }

    /// The page of the rows read, in ascending cursor order, skipped ones included: they count towards
    /// `limit` like the others. Fewer than `limit` rows means the range held no more: the page then
    /// scanned through the chunk's end.
    package func page(rows: [Row]) throws -> TargetPage {
        var targets = [DeliveryTarget]()
        var skipped = [Int64]()
        var skippedPlatforms = [PushPlatform]()
        targets.reserveCapacity(rows.count)
        for row in rows {
            if row.skipped {
                skipped.append(row.cursor)
                skippedPlatforms.append(PushPlatform(storageKey: row.token))
            } else {
                targets.append(DeliveryTarget(cursor: row.cursor, token: try StoredForm.deviceToken(row.token)))
            }
        }
        let scanned = rows.count < limit ? through : (rows.last?.cursor ?? through)
        return TargetPage(
            targets: targets,
            scannedThrough: scanned,
            isEnd: scanned >= through,
            skipped: skipped,
            skippedPlatforms: skippedPlatforms
        )
    }
}
