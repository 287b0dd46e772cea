import Foundation

/// Ledger rows as both stores select them (the same columns in the same order), and what the ledger's
/// rules make of them: one reading, whichever database the row came from.
extension StoredForm {
    /// The request column that holds the cut cursor of `kind`: `token_cut` (positions of direct tokens)
    /// or `group_cut` (device ids of group members).
    package static func cutCursorColumn(_ kind: WorkChunk.Kind) -> String {
        switch kind {
        case .directTokens: "token_cut"
        case .deviceRange: "group_cut"
        }
    }

    /// A chunk row taken over: `chunk.id`, its request's id, `kind`, `range_after`, `range_through`,
    /// `progress` and the `generation` after the takeover's increment.
    package typealias TakenOverChunk = (
        id: Int64, requestID: String, kind: Int64, after: Int64, through: Int64, progress: Int64, generation: Int64
    )

    /// The chunk a takeover claimed, leased until `lease.expiresAt`.
    package static func chunk(takenOver row: TakenOverChunk, _ lease: LeaseWindow) throws -> WorkChunk {
        WorkChunk(
            id: row.id,
            requestID: try requestID(row.requestID),
            kind: chunkKind(row.kind),
            after: row.after,
            through: row.through,
            progress: row.progress,
            leaseGeneration: row.generation,
            leaseExpiresAt: lease.expiresAt,
            isTakeover: true
        )
    }

    /// A retry row claimed: its request's id, `token`, `attempt`, `last_reason` and the `generation` after
    /// the claim's increment.
    package typealias ClaimedRetry = (
        requestID: String, token: String, attempt: Int64, lastReason: String, generation: Int64
    )

    package static func retryClaim(_ row: ClaimedRetry, _ lease: LeaseWindow) throws -> RetryClaim {
        RetryClaim(
            requestID: try requestID(row.requestID),
            token: try deviceToken(row.token),
            attempt: Int(row.attempt),
            lastReason: row.lastReason,
            leaseGeneration: row.generation,
            leaseExpiresAt: lease.expiresAt
        )
    }

    /// A chunk row read under lock before progress is recorded: `owner`, `generation`, `state`, `progress`.
    package typealias ChunkLease = (owner: String?, generation: Int64, state: Int64, progress: Int64)
}

extension ChunkProgress {
    /// The progress to write over `row`: the chunk's end when this completes it, else the furthest of the
    /// recorded and the reported progress within the chunk. Nil when `owner` no longer holds the chunk
    /// (another owner or generation, or closed): nothing may be written.
    package func progressToStore(over row: StoredForm.ChunkLease, owner: InstanceID) -> Int64? {
        guard row.owner == owner.value, row.generation == chunk.leaseGeneration,
            row.state == StoredForm.ChunkStateCode.open.rawValue
        else { return nil }
        return completesChunk ? chunk.through : max(row.progress, min(through, chunk.through))
    }

    /// `chunk.state` after this is recorded.
    package var chunkState: StoredForm.ChunkStateCode { completesChunk ? .done : .open }
}

extension DeviceInvalidation {
    /// What invalidating a stored device answers when nothing is to be written: it is invalid already, or
    /// it was registered again (`last_registered_at`, stored milliseconds) after the push service's
    /// timestamp. Nil: mark it invalid.
    package func refusal(stateCode: Int64, lastRegisteredAt: Int64) -> InvalidationResult? {
        if StoredForm.deviceState(stateCode) == .invalid { return .alreadyInvalid }
        if let appleTimestamp, lastRegisteredAt > Millis.from(appleTimestamp) {
            return .keptBecauseRegisteredLater(lastRegisteredAt: Millis.date(lastRegisteredAt))
        }
        return nil
    }
}

extension LedgerArithmetic.CutCursor {
    /// The cursors as a request row stores them: `device_bound`, `group_cut`, `token_cut`, `token_count`.
    package init(stored row: (bound: Int64, groupCut: Int64, tokenCut: Int64, tokenCount: Int64), hasGroups: Bool) {
        self.init(
            tokenCut: row.tokenCut,
            tokenCount: row.tokenCount,
            groupCut: row.groupCut,
            bound: row.bound,
            hasGroups: hasGroups
        )
    }
}
