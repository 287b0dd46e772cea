import Foundation
import GRDB
public import PushgateCore

/// Chunks of a request's targets: claimed under a lease, read in pages, progress recorded.
extension SQLiteStore {
    // MARK: - Chunks

    public func claimChunk(_ lease: LeaseWindow, chunkSize: Int) async throws -> WorkChunk? {
        let chunkSize = try StoreError.positive(chunkSize, "chunk size")
        return try await writeUnsynced { db in try Self.claimChunk(lease, chunkSize: chunkSize, in: db) }
    }

    /// ``claimChunk(_:chunkSize:)`` in a write transaction of the caller's: the steps of ``ChunkClaim``,
    /// each with its statements.
    static func claimChunk(_ lease: LeaseWindow, chunkSize: Int, in db: Database) throws -> WorkChunk? {
        var claim = ChunkClaim(lease, chunkSize: chunkSize)
        // The candidates' rows carry their cut cursors: the request picked is cut from its row.
        var candidates = [Int64: Row]()
        var action = claim.start()
        while true {
            switch action {
            case .expireOverdue:
                _ = try expireOverdue(nowMs: lease.nowMillis, in: db)
                action = claim.overdueExpired()
            case .takeOverExpiredLease:
                action = claim.tookOver(try takeOverExpiredLease(lease, in: db))
            case .readCandidates(let limit):
                let rows = try candidateRows(limit: limit, nowMs: lease.nowMillis, in: db)
                candidates = Dictionary(rows.map { ($0[0] as Int64, $0) }, uniquingKeysWith: { first, _ in first })
                action = claim.candidatesRead(
                    rows.map { ClaimScheduler.Candidate(seq: $0[0], app: $0[6], priority: $0[7], lastTurn: $0[8]) }
                )
            case .readLatestTurn:
                let latest = try Int64.fetchOne(db.cachedStatement(sql: "SELECT coalesce(max(id), 0) FROM chunk"))
                action = claim.latestTurnRead(latest ?? 0)
            case .readRecentTurns(let after):
                action = claim.recentTurnsRead(try recentTurns(after: after, in: db))
            case .readRequest(let seq):
                action = claim.requestRead(try candidates[seq].map { try cutRequest($0, in: db) })
            case .scanMembers(let groupIDs, let scan):
                action = claim.membersScanned(try cutMembers(groupIDs: groupIDs, scan, in: db))
            case .markCutDone(let seq):
                try db.cachedStatement(sql: "UPDATE request SET cut_done = 1 WHERE seq = ?").execute(arguments: [seq])
                action = claim.cutMarkedDone()
            case .finishIfDone(let seq):
                try finishIfDone(requestSeq: seq, nowMs: lease.nowMillis, in: db)
                action = claim.completionChecked()
            case .insertChunk(let seq, let cut):
                action = claim.chunkInserted(id: try insertChunk(cut, of: seq, lease, in: db))
            case .claimed(let chunk):
                return chunk
            }
        }
    }

    public func claimChunks(_ claim: BatchClaim) async throws -> [ClaimedWork] {
        _ = try StoreError.positive(claim.chunkSize, "chunk size")
        _ = try StoreError.positive(claim.pageLimit)
        _ = try StoreError.positive(claim.maximumChunks, "chunks")
        return try await writeUnsynced { db in try Self.claimChunks(claim, in: db) }
    }

    /// ``claimChunks(_:)`` in a write transaction of the caller's: the steps of ``ChunkBatchClaim``, each
    /// with its statements, then each chunk's first page (the writer's view: nothing else writes meanwhile).
    ///
    /// What the claim read or wrote itself is not read again: a request's cut cursors after its first read
    /// (from the candidates) are the ones its chunks' inserts wrote, and a chunk it cut reads its first
    /// page with the request it was cut from. `knownGroups` are request_group rows written earlier in this
    /// transaction (by seq; a group commit's enqueue passes those it just inserted), used instead of a read.
    /// `knownMemberships` are, by seq of a request stored earlier in this transaction with one group, that
    /// group's memberships as its enqueue counted them: fewer than a chunk, they are the request's first
    /// cut without a scan (every membership is within the request's bound, the highest device id of this
    /// transaction, and nothing in it changes memberships between that count and this claim).
    static func claimChunks(
        _ batch: BatchClaim,
        knownGroups: [Int64: [Int64]] = [:],
        knownMemberships: [Int64: Int] = [:],
        in db: Database
    ) throws -> [ClaimedWork] {
        let lease = batch.lease
        var claim = ChunkBatchClaim(batch)
        var action = claim.start()
        // The candidates' rows, as read at the start of this claim.
        var candidateRows = [Int64: Row]()
        // Requests this claim read: their cut state as it is now in this transaction.
        var requests = [Int64: (cut: ChunkClaim.CutRequest, page: TargetPageRead.Request?)]()
        // Chunks this claim cut: the request each first page reads.
        var pageRequests = [Int64: TargetPageRead.Request]()
        while true {
            switch action {
            case .takeOverExpiredLease:
                action = claim.tookOver(try takeOverExpiredLease(lease, in: db))
            case .readCandidates(let limit):
                let rows = try Self.candidateRows(limit: limit, nowMs: lease.nowMillis, in: db)
                candidateRows = Dictionary(rows.map { ($0[0] as Int64, $0) }, uniquingKeysWith: { first, _ in first })
                action = claim.candidatesRead(rows.map(candidate))
            case .readLatestTurn:
                let latest = try Int64.fetchOne(db.cachedStatement(sql: "SELECT coalesce(max(id), 0) FROM chunk"))
                action = claim.latestTurnRead(latest ?? 0)
            case .readRecentTurns(let after):
                action = claim.recentTurnsRead(try recentTurns(after: after, in: db))
            case .readRequest(let seq):
                if let known = requests[seq] {
                    // Cut by this claim already: its cursors are the ones the insert just wrote.
                    action = claim.requestRead(known.cut)
                } else if let row = candidateRows[seq] {
                    let cut = try cutRequest(row, groupIDs: knownGroups[seq], in: db)
                    let page = TargetPageRead.Request(seq: seq, app: row[6], createdAt: row[9], groupIDs: cut.groupIDs)
                    requests[seq] = (cut, page)
                    action = claim.requestRead(cut)
                } else {
                    action = claim.requestRead(try requestRow(seq: seq, in: db).map { try cutRequest($0, in: db) })
                }
            case .scanMembers(let seq, let groupIDs, let scan):
                if scan.after == 0, groupIDs.count == 1, let count = knownMemberships[seq], count < scan.limit {
                    // A short first scan covers the rest up to the bound, whatever its last id.
                    action = claim.membersScanned((count, count > 0 ? scan.bound : nil))
                } else {
                    action = claim.membersScanned(try cutMembers(groupIDs: groupIDs, scan, in: db))
                }
            case .markCutDone(let seq):
                try db.cachedStatement(sql: "UPDATE request SET cut_done = 1 WHERE seq = ?").execute(arguments: [seq])
                action = claim.cutMarkedDone()
            case .finishIfDone(let seq):
                try finishIfDone(requestSeq: seq, nowMs: lease.nowMillis, in: db)
                action = claim.completionChecked()
            case .insertChunk(let seq, let cut):
                let id = try insertChunk(cut, of: seq, lease, in: db)
                if var known = requests[seq] {
                    switch cut.kind {
                    case .deviceRange: known.cut.groupCut = cut.through
                    case .directTokens: known.cut.tokenCut = cut.through
                    }
                    requests[seq] = known
                    pageRequests[id] = known.page
                }
                action = claim.chunkInserted(id: id)
            case .claimed(let chunks):
                var reads = [(read: TargetPageRead, next: TargetPageRead.Action, storedHere: Bool)]()
                reads.reserveCapacity(chunks.count)
                for chunk in chunks {
                    var read = try TargetPageRead(chunk: chunk, after: chunk.progress, limit: batch.pageLimit)
                    var first = try read.start()
                    let known = pageRequests[chunk.id]
                    if case .readRequest = first, let known { first = try read.requestRead(known) }
                    // A request stored in this transaction has no removed targets: only a membership
                    // deleted after it was stored records one, and that is another transaction's write.
                    let storedHere = known.map { knownGroups[$0.seq] != nil } ?? false
                    reads.append((read, first, storedHere))
                }
                try readWholeGroupPages(&reads, pageRequests: pageRequests, knownMemberships: knownMemberships, in: db)
                return try zip(chunks, reads).map { chunk, item in
                    var read = item.read
                    let page = try targetPage(&read, item.next, removedTargetsRead: !item.storedHere, in: db)
                    return ClaimedWork(chunk: chunk, firstPage: page)
                }
            }
        }
    }

    /// The first pages of the chunks whose next step reads one group's members and whose whole group (as
    /// the enqueue counted it, earlier in this transaction: ``TargetLookups``) fits in the page: one statement
    /// for all of them (the chunks' group, range and request time passed as a JSON array, read with
    /// `json_each` through the membership key a page read of one uses) instead of one each. Without a limit:
    /// a range of such a group holds at most that count. Each read moves on as ``targetPage`` would have.
    private static func readWholeGroupPages(
        _ reads: inout [(read: TargetPageRead, next: TargetPageRead.Action, storedHere: Bool)],
        pageRequests: [Int64: TargetPageRead.Request],
        knownMemberships: [Int64: Int],
        in db: Database
    ) throws {
        var batched = [Int]()
        var list = [String]()
        for (index, item) in reads.enumerated() {
            guard case .readDeviceTargets(let groupIDs, let scan, let since) = item.next, groupIDs.count == 1,
                let seq = pageRequests[item.read.chunk.id]?.seq, let count = knownMemberships[seq], count <= scan.limit
            else { continue }
            list.append("[\(batched.count),\(groupIDs[0]),\(scan.after),\(scan.through),\(since)]")
            batched.append(index)
        }
        // One alone is read as before: the batched statement pays for its JSON.
        guard batched.count > 1 else { return }
        var rows = [[TargetScan.Row]](repeating: [], count: batched.count)
        let cursor = try Row.fetchCursor(
            db.cachedStatement(
                sql: """
                    SELECT j.value ->> 0, m.device_id, d.token, d.state
                    FROM json_each(?) j
                    JOIN membership m ON m.group_id = j.value ->> 1
                        AND m.device_id > j.value ->> 2 AND m.device_id <= j.value ->> 3
                    JOIN device d ON d.id = m.device_id
                    WHERE d.state = 0 OR d.invalidated_at >= j.value ->> 4
                    ORDER BY 1, m.device_id
                    """
            ),
            arguments: ["[" + list.joined(separator: ",") + "]"]
        )
        while let row = try cursor.next() {
            rows[row[0] as Int].append((row[1], row[2], (row[3] as Int64) != 0))
        }
        for (position, index) in batched.enumerated() {
            reads[index].next = try reads[index].read.rowsRead(rows[position])
        }
    }

    private static func candidate(_ row: Row) -> ClaimScheduler.Candidate {
        ClaimScheduler.Candidate(seq: row[0], app: row[6], priority: row[7], lastTurn: row[8])
    }

    /// A request's row as it is now (a claim may have cut it already), in the columns of
    /// ``candidateRows(limit:nowMs:in:)`` that ``cutRequest(_:in:)`` reads.
    private static func requestRow(seq: Int64, in db: Database) throws -> Row? {
        try Row.fetchOne(
            db.cachedStatement(
                sql: "SELECT seq, id, device_bound, group_cut, token_cut, token_count FROM request WHERE seq = ?"
            ),
            arguments: [seq]
        )
    }

    /// Step 1 of a claim: the first open chunk whose lease ended, leased to `lease.owner`.
    private static func takeOverExpiredLease(_ lease: LeaseWindow, in db: Database) throws -> WorkChunk? {
        guard
            let row = try Row.fetchOne(
                db.cachedStatement(
                    sql: """
                        SELECT c.id, r.id, c.kind, c.range_after, c.range_through, c.progress, c.generation
                        FROM chunk c JOIN request r ON r.seq = c.request_seq
                        WHERE c.state = \(ChunkCode.open.rawValue) AND c.lease_expires_at <= ?1
                            AND \(notOverdue("r"))
                        ORDER BY c.request_seq, c.id LIMIT 1
                        """
                ),
                arguments: [lease.nowMillis]
            )
        else { return nil }
        let taken: StoredForm.TakenOverChunk = (row[0], row[1], row[2], row[3], row[4], row[5], row[6] + 1)
        try db.cachedStatement(
            sql: "UPDATE chunk SET owner = ?, lease_expires_at = ?, generation = ? WHERE id = ?"
        ).execute(arguments: [lease.owner.value, lease.expiresAtMillis, taken.generation, taken.id])
        return try StoredForm.chunk(takenOver: taken, lease)
    }

    /// A request (`alias`) not overdue at `?1` (the claim's now): a claim takes nothing of an overdue one.
    private static func notOverdue(_ alias: String) -> String {
        "(\(alias).expiration IS NULL OR \(alias).expiration <= 0 OR \(alias).expiration * 1000 >= ?1)"
    }

    /// The oldest unfinished requests with uncut targets, not overdue at `nowMs` (through `request_unfinished`), each with its
    /// newest chunk (the larger of its newest open and newest done chunk: two lookups at the end of
    /// `chunk_by_request`'s range, whatever the number of chunks). Columns: seq, id, device_bound,
    /// group_cut, token_cut, token_count, app, priority, newest chunk, created_at.
    private static func candidateRows(limit: Int, nowMs: Int64, in db: Database) throws -> [Row] {
        try Row.fetchAll(
            db.cachedStatement(
                sql: """
                    SELECT r.seq, r.id, r.device_bound, r.group_cut, r.token_cut, r.token_count, r.app, r.priority,
                        nullif(max(
                        coalesce((SELECT max(c.id) FROM chunk c WHERE c.request_seq = r.seq AND c.state = 0), 0),
                        coalesce((SELECT max(c.id) FROM chunk c WHERE c.request_seq = r.seq AND c.state = 1), 0)), 0),
                        r.created_at
                    FROM request r WHERE r.state < \(Code.done.rawValue) AND r.cut_done = 0 AND \(notOverdue("r"))
                    ORDER BY r.seq LIMIT \(limit)
                    """
            ),
            arguments: [nowMs]
        )
    }

    /// The apps of the chunks after `after` (a range of `chunk`'s primary key), each with its newest.
    private static func recentTurns(after: Int64, in db: Database) throws -> [String: Int64] {
        let recent = try Row.fetchAll(
            db.cachedStatement(
                sql: """
                    SELECT r.app, max(c.id) FROM chunk c JOIN request r ON r.seq = c.request_seq
                    WHERE c.id > ? GROUP BY r.app
                    """
            ),
            arguments: [after]
        )
        return Dictionary(recent.map { ($0[0] as String, $0[1] as Int64) }, uniquingKeysWith: max)
    }

    /// A candidate's row (``candidateRows(limit:in:)``) with its groups: what its cut reads.
    private static func cutRequest(
        _ row: Row,
        groupIDs known: [Int64]? = nil,
        in db: Database
    ) throws
        -> ChunkClaim.CutRequest
    {
        let seq: Int64 = row[0]
        let requestID = try StoredForm.requestID(row[1])
        let groupIDs =
            try known
            ?? Int64.fetchAll(
                db.cachedStatement(sql: "SELECT group_id FROM request_group WHERE request_seq = ? ORDER BY group_id"),
                arguments: [seq]
            )
        return ChunkClaim.CutRequest(
            id: requestID,
            bound: row[2],
            groupCut: row[3],
            tokenCut: row[4],
            tokenCount: row[5],
            groupIDs: groupIDs
        )
    }

    /// Step 2's write: the request's cursor moved past the cut, and the chunk, leased. Answers its id.
    private static func insertChunk(
        _ cut: LedgerArithmetic.Cut,
        of seq: Int64,
        _ lease: LeaseWindow,
        in db: Database
    ) throws -> Int64 {
        // Cached (one statement per cursor column): a statement parsed per chunk was a tenth of a claim.
        try db.cachedStatement(
            sql: """
                UPDATE request SET \(StoredForm.cutCursorColumn(cut.kind)) = ?, cut_done = ?,
                    state = max(state, ?)
                WHERE seq = ?
                """
        ).bindAndExecute { row in
            row.bind(cut.through)
            row.bind(cut.cutDone)
            row.bind(Code.sending.rawValue)
            row.bind(seq)
        }
        try db.cachedStatement(
            sql: """
                INSERT INTO chunk (request_seq, kind, range_after, range_through, progress, state, owner,
                                   lease_expires_at, generation)
                VALUES (?, ?, ?, ?, ?, \(ChunkCode.open.rawValue), ?, ?, 1)
                """
        ).bindAndExecute { row in
            row.bind(seq)
            row.bind(StoredForm.ChunkKindCode(cut.kind).rawValue)
            row.bind(cut.after)
            row.bind(cut.through)
            row.bind(cut.after)
            row.bind(lease.owner.value)
            row.bind(lease.expiresAtMillis)
        }
        return db.lastInsertedRowID
    }

    public func targets(of chunk: WorkChunk, after cursor: Int64, limit: Int) async throws -> TargetPage {
        var read = try TargetPageRead(chunk: chunk, after: cursor, limit: limit)
        let first = try read.start()
        if case .finished(let page) = first { return page }
        return try await self.read { [read] db in
            var read = read
            return try Self.targetPage(&read, first, in: db)
        }
    }

    /// ``targets(of:after:limit:)`` on a connection of the caller's (a read, or the writer in the middle
    /// of its transaction).
    static func targetPage(of chunk: WorkChunk, after cursor: Int64, limit: Int, in db: Database) throws -> TargetPage {
        var read = try TargetPageRead(chunk: chunk, after: cursor, limit: limit)
        return try targetPage(&read, try read.start(), in: db)
    }

    /// The steps of ``TargetPageRead`` from `action` on, each with its statements.
    private static func targetPage(
        _ read: inout TargetPageRead,
        _ action: TargetPageRead.Action,
        removedTargetsRead: Bool = true,
        in db: Database
    ) throws -> TargetPage {
        var action = action
        while true {
            switch action {
            case .readRequest(let chunkID, let groups):
                action = try read.requestRead(try pageRequest(chunkID: chunkID, groups: groups, in: db))
            case .readDeviceTargets(let groupIDs, let scan, let since):
                action = try read.rowsRead(try deviceTargets(groupIDs: groupIDs, scan, invalidatedSince: since, in: db))
            case .readTokenTargets(let seq, let app, let scan, let since):
                action = try read.rowsRead(
                    try tokenTargets(requestSeq: seq, app: app, scan, invalidatedSince: since, in: db)
                )
            case .readRemovedTargets(let seq, let after, let through):
                guard removedTargetsRead else {
                    action = read.removedRead([])
                    continue
                }
                action = read.removedRead(try removedTargets(requestSeq: seq, after: after, through: through, in: db))
            case .finished(let page):
                return page
            }
        }
    }

    /// The request of a chunk, as a page reads it; nil for an unknown chunk.
    private static func pageRequest(chunkID: Int64, groups: Bool, in db: Database) throws -> TargetPageRead.Request? {
        guard
            let row = try Row.fetchOne(
                db.cachedStatement(
                    sql: """
                        SELECT c.request_seq, r.app, r.created_at FROM chunk c JOIN request r ON r.seq = c.request_seq
                        WHERE c.id = ?
                        """
                ),
                arguments: [chunkID]
            )
        else { return nil }
        let seq: Int64 = row[0]
        let groupIDs =
            groups
            ? try Int64.fetchAll(
                try db.cachedStatement(sql: "SELECT group_id FROM request_group WHERE request_seq = ?"),
                arguments: [seq]
            ) : []
        return TargetPageRead.Request(seq: seq, app: row[1], createdAt: row[2], groupIDs: groupIDs)
    }

    public func recordProgress(_ progress: ChunkProgress, renewing lease: LeaseWindow) async throws -> ProgressResult {
        try await write { db in try Self.recordProgress(progress, renewing: lease, in: db) }
    }

    /// ``recordProgress(_:renewing:)`` in a write transaction of the caller's.
    static func recordProgress(
        _ progress: ChunkProgress,
        renewing lease: LeaseWindow,
        in db: Database
    ) throws -> ProgressResult {
        let held = try Row.fetchOne(
            try db.cachedStatement(
                sql: """
                    SELECT c.id, c.request_seq, c.owner, c.generation, c.state, c.progress, r.app
                    FROM chunk c JOIN request r ON r.seq = c.request_seq WHERE c.id = ?
                    """
            ),
            arguments: [progress.chunk.id]
        ).map(HeldChunk.init)
        guard let seq = try writeProgress(progress, over: held, renewing: lease, in: db) else { return .leaseLost }
        return try finishProgress(progress, requestSeq: seq, renewing: lease, in: db)
    }

    /// Group commit's outcomes: ``recordProgress(_:renewing:in:)`` of each record, in order, with the
    /// chunks read in one statement and the completions of the chunks they complete in one more, when the
    /// records' writes cannot touch each other's reads (distinct chunks of distinct requests, no
    /// invalidation: a device removed from its groups records a removed target of other requests).
    /// Otherwise record by record.
    static func recordProgress(batch records: [ProgressRecord], in db: Database) throws -> [ProgressResult] {
        let chunkIDs = records.map(\.progress.chunk.id)
        let sequential = { try records.map { try recordProgress($0.progress, renewing: $0.lease, in: db) } }
        guard records.count > 1, Set(chunkIDs).count == records.count,
            records.allSatisfy({ $0.progress.invalidations.isEmpty })
        else { return try sequential() }
        var held = [Int64: HeldChunk]()
        let cursor = try Row.fetchCursor(
            db.cachedStatement(
                sql: """
                    SELECT c.id, c.request_seq, c.owner, c.generation, c.state, c.progress, r.app
                    FROM json_each(?) j JOIN chunk c ON c.id = j.value JOIN request r ON r.seq = c.request_seq
                    """
            ),
            arguments: ["[" + chunkIDs.map { String($0) }.joined(separator: ",") + "]"]
        )
        while let row = try cursor.next() { held[row[0]] = HeldChunk(row) }
        guard Set(held.values.map(\.seq)).count == held.count else { return try sequential() }
        var results = [ProgressResult?](repeating: nil, count: records.count)
        var completing: [(index: Int, seq: Int64)] = []
        // The chunks' progress updates, written together below: the records are of distinct chunks, and
        // nothing until the completion read reads a chunk.
        var chunkUpdates = [String]()
        chunkUpdates.reserveCapacity(records.count)
        for (index, record) in records.enumerated() {
            let progress = record.progress
            guard
                let seq = try writeProgress(
                    progress,
                    over: held[progress.chunk.id],
                    renewing: record.lease,
                    deferringChunkUpdate: { chunkUpdates.append($0) },
                    in: db
                )
            else {
                results[index] = .leaseLost
                continue
            }
            if progress.completesChunk {
                completing.append((index, seq))
            } else {
                results[index] = try finishProgress(progress, requestSeq: seq, renewing: record.lease, in: db)
            }
        }
        try updateChunks(chunkUpdates, in: db)
        if !completing.isEmpty {
            let completions = try completionRows(requestSeqs: completing.map(\.seq), in: db)
            // The requests each completes, marked done together below: distinct requests, and nothing after
            // the completion read reads them in this batch.
            var finished = [String]()
            for (index, seq) in completing {
                results[index] = try finishProgress(
                    records[index].progress,
                    requestSeq: seq,
                    renewing: records[index].lease,
                    completion: completions[seq],
                    deferringMark: { finished.append($0) },
                    in: db
                )
            }
            try markFinished(finished, in: db)
        }
        return results.map { $0! }
    }

    /// The progress of several chunks in one statement (each row as ``writeProgress`` builds it, a JSON
    /// array, read with `json_each`), as each chunk's own `UPDATE` would write it.
    private static func updateChunks(_ rows: [String], in db: Database) throws {
        if rows.isEmpty { return }
        try db.cachedStatement(
            sql: """
                UPDATE chunk SET progress = j.value ->> 1, lease_expires_at = j.value ->> 2, state = j.value ->> 3,
                    accepted = accepted + (j.value ->> 4), skipped = skipped + (j.value ->> 5),
                    fcm_accepted = fcm_accepted + (j.value ->> 6),
                    webpush_accepted = webpush_accepted + (j.value ->> 7),
                    fcm_skipped = fcm_skipped + (j.value ->> 8), webpush_skipped = webpush_skipped + (j.value ->> 9)
                FROM json_each(?) j
                WHERE chunk.id = j.value ->> 0
                """
        ).execute(arguments: ["[" + rows.joined(separator: ",") + "]"])
    }

    /// A chunk as a progress record finds it: its request and its lease.
    private struct HeldChunk {
        var seq: Int64
        var lease: StoredForm.ChunkLease
        var app: String

        /// Columns: chunk id, request seq, owner, generation, state, progress, app.
        init(_ row: Row) {
            seq = row[1]
            lease = (row[2], row[3], row[4], row[5])
            app = row[6]
        }
    }

    /// A progress record's writes but the request's: its failures, retries, invalidations and the chunk's
    /// progress. Answers the request's seq; nil (nothing written) when the lease is lost.
    private static func writeProgress(
        _ progress: ChunkProgress,
        over held: HeldChunk?,
        renewing lease: LeaseWindow,
        deferringChunkUpdate deferChunkUpdate: ((String) -> Void)? = nil,
        in db: Database
    ) throws -> Int64? {
        let chunk = progress.chunk
        guard let held, let newProgress = progress.progressToStore(over: held.lease, owner: lease.owner) else {
            return nil
        }
        let seq = held.seq
        let app = held.app

        try Self.recordFailures(progress.failures, requestSeq: seq, in: db)
        let upsertRetry = try db.cachedStatement(
            sql: """
                INSERT INTO retry (request_seq, token, attempt, next_attempt_at, last_reason)
                VALUES (?, ?, ?, ?, ?)
                ON CONFLICT (request_seq, token) DO UPDATE SET
                    attempt = excluded.attempt, next_attempt_at = excluded.next_attempt_at,
                    last_reason = excluded.last_reason, owner = NULL, lease_expires_at = 0
                """
        )
        for retry in progress.retries {
            try upsertRetry.execute(arguments: [
                seq, retry.token.storageKey, retry.attempt, Millis.from(retry.nextAttemptAt), retry.reason,
            ])
        }
        for invalidation in progress.invalidations {
            _ = try Self.invalidate(app: app, invalidation, at: lease.now, in: db)
        }
        if let deferChunkUpdate {
            // [id, progress, lease expiry, state, accepted, skipped, fcm and webpush accepted, then skipped]
            deferChunkUpdate(
                "[\(chunk.id),\(newProgress),\(lease.expiresAtMillis),\(progress.chunkState.rawValue),"
                    + "\(progress.accepted),\(progress.skipped),\(progress.acceptedByService.fcm),"
                    + "\(progress.acceptedByService.webpush),\(progress.skippedByService.fcm),"
                    + "\(progress.skippedByService.webpush)]"
            )
            return seq
        }
        try db.cachedStatement(
            sql: """
                UPDATE chunk SET progress = ?, lease_expires_at = ?, state = ?, accepted = accepted + ?,
                    skipped = skipped + ?, fcm_accepted = fcm_accepted + ?, webpush_accepted = webpush_accepted + ?,
                    fcm_skipped = fcm_skipped + ?, webpush_skipped = webpush_skipped + ?
                WHERE id = ?
                """
        ).bindAndExecute { row in
            row.bind(newProgress)
            row.bind(lease.expiresAtMillis)
            row.bind(progress.chunkState.rawValue)
            row.bind(progress.accepted)
            row.bind(progress.skipped)
            row.bind(progress.acceptedByService.fcm)
            row.bind(progress.acceptedByService.webpush)
            row.bind(progress.skippedByService.fcm)
            row.bind(progress.skippedByService.webpush)
            row.bind(chunk.id)
        }
        return seq
    }

    /// A progress record's write of its request, after ``writeProgress(_:over:renewing:in:)``: the
    /// completion check when it completes its chunk (with `completion` read by the caller, or read here).
    private static func finishProgress(
        _ progress: ChunkProgress,
        requestSeq seq: Int64,
        renewing lease: LeaseWindow,
        completion: CompletionRow? = nil,
        deferringMark deferMark: ((String) -> Void)? = nil,
        in db: Database
    ) throws -> ProgressResult {
        // The last apns-id goes with the request's completion when this record completes it (one
        // statement instead of two for a one-chunk request), on its own otherwise.
        if progress.completesChunk,
            try Self.finishIfDone(
                requestSeq: seq,
                nowMs: lease.nowMillis,
                recording: progress.lastAPNsID,
                completion: completion,
                deferringMark: deferMark,
                in: db
            )
        {
            return .chunkCompleted
        }
        try Self.recordAccepted(0, apnsID: progress.lastAPNsID, requestSeq: seq, in: db)
        return progress.completesChunk ? .chunkCompleted : .recorded(leaseExpiresAt: lease.expiresAt)
    }
}
