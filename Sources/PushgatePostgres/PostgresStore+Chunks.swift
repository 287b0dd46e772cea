import Foundation
import Logging
import PostgresNIO
public import PushgateCore

/// Chunks of a request's targets: claimed under a lease, read in pages, progress recorded.
extension PostgresStore {
    // MARK: - Chunks

    /// ``ChunkClaim``'s claim as ``ChunkBatchClaim``'s of one chunk (the same steps, but for the first:
    /// overdue requests are expired in the same transaction before anything is claimed), so that one loop
    /// runs both claims' statements.
    public func claimChunk(_ lease: LeaseWindow, chunkSize: Int) async throws -> WorkChunk? {
        let chunkSize = try StoreError.positive(chunkSize, "chunk size")
        let claim = BatchClaim(lease: lease, chunkSize: chunkSize, pageLimit: chunkSize, maximumChunks: 1)
        return try await transaction { connection in
            _ = try await Self.expireOverdue(nowMs: lease.nowMillis, on: connection, logger: logger)
            return try await claimChunks(claim, notifyingUnlessCut: [], on: connection).first
        }
    }

    /// The steps of ``ChunkBatchClaim``, each with its statements, in one transaction; then the chunks'
    /// first pages, together in one snapshot of their own (``firstPages(of:limit:)``). A request another
    /// instance is cutting is waited for only while this claim holds no lock, else skipped. Should a page
    /// read fail after the claim committed, the chunks are ours until their leases end, then anyone's
    /// (ours included) to take over.
    public func claimChunks(_ batch: BatchClaim) async throws -> [ClaimedWork] {
        try await claimChunks(batch, notifyingUnlessCut: [])
    }

    /// ``claimChunks(_:)``, and a `NOTIFY` in its transaction if any of `requests` (stored just before,
    /// without one) is not cut through by it: what this claim leaves of them is for every instance.
    func claimChunks(_ batch: BatchClaim, notifyingUnlessCut requests: Set<RequestID>) async throws -> [ClaimedWork] {
        _ = try StoreError.positive(batch.chunkSize, "chunk size")
        _ = try StoreError.positive(batch.pageLimit)
        _ = try StoreError.positive(batch.maximumChunks, "chunks")
        let chunks = try await transaction { connection in
            try await claimChunks(batch, notifyingUnlessCut: requests, on: connection)
        }
        return try await firstPages(of: chunks, limit: batch.pageLimit)
    }

    /// The steps of ``ChunkBatchClaim`` in a READ COMMITTED transaction of the caller's.
    private func claimChunks(
        _ batch: BatchClaim,
        notifyingUnlessCut requests: Set<RequestID>,
        on connection: PostgresConnection
    ) async throws -> [WorkChunk] {
        let lease = batch.lease
        var claim = ChunkBatchClaim(batch)
        var orderedIndexScans = false
        // The first request read waits for another instance cutting it (instances take turns on a
        // broadcast); later ones, read while this transaction holds locks, are skipped, so that it never
        // waits holding a lock another transaction may wait for. A group commit's claim (`requests`) never
        // waits: the claim holding the row (this instance's dispatcher, or another instance) takes it, and
        // what is left uncut is announced.
        var holdsLocks = !requests.isEmpty
        // Of `requests`, those this claim read (by seq) and those it left with nothing to cut.
        var read = [Int64: RequestID]()
        var uncut = requests
        var action = claim.start()
        while true {
            switch action {
            case .takeOverExpiredLease:
                let taken = try await takeOverExpiredLease(lease, on: connection)
                if taken != nil { holdsLocks = true }
                action = claim.tookOver(taken)
            case .readCandidates(let limit):
                // Every instance reads the same turns, so they follow one order.
                if !orderedIndexScans {
                    try await Self.preferOrderedIndexScans(on: connection, logger: logger)
                    orderedIndexScans = true
                }
                action = claim.candidatesRead(
                    try await candidates(limit: limit, nowMs: lease.nowMillis, on: connection)
                )
            case .readLatestTurn:
                let latest = try await connection.first(
                    "SELECT coalesce(max(id), 0) FROM chunk",
                    as: Int64.self,
                    logger: logger
                )
                action = claim.latestTurnRead(latest ?? 0)
            case .readRecentTurns(let after):
                action = claim.recentTurnsRead(try await recentTurns(after: after, on: connection))
            case .readRequest(let seq):
                // Locked even when it answers nil (cut through meanwhile) unless skipped.
                let request = try await lockCutRequest(seq, skipLocked: holdsLocks, on: connection)
                holdsLocks = true
                if let request, requests.contains(request.id) { read[seq] = request.id }
                action = claim.requestRead(request)
            case .scanMembers(_, let groupIDs, let scan):
                action = claim.membersScanned(
                    try await Self.cutMembers(groupIDs: groupIDs, scan, on: connection, logger: logger)
                )
            case .markCutDone(let seq):
                try await connection.run("UPDATE request SET cut_done = TRUE WHERE seq = \(seq)", logger: logger)
                if let id = read[seq] { uncut.remove(id) }
                action = claim.cutMarkedDone()
            case .finishIfDone(let seq):
                try await Self.finishIfDone(requestSeq: seq, nowMs: lease.nowMillis, on: connection, logger: logger)
                action = claim.completionChecked()
            case .insertChunk(let seq, let cut):
                if cut.cutDone, let id = read[seq] { uncut.remove(id) }
                action = claim.chunkInserted(id: try await insertChunk(cut, of: seq, lease, on: connection))
            case .claimed(let chunks):
                if !uncut.isEmpty { try await notifyWork(on: connection) }
                return chunks
            }
        }
    }

    /// Step 1 of a claim: the first open chunk whose lease ended, leased to `lease.owner`; rows another
    /// instance is writing right now are skipped, not waited for.
    private func takeOverExpiredLease(
        _ lease: LeaseWindow,
        on connection: PostgresConnection
    ) async throws
        -> WorkChunk?
    {
        let (owner, nowMs, leaseUntil) = (lease.owner.value, lease.nowMillis, lease.expiresAtMillis)
        guard
            let row = try await connection.first(
                """
                WITH t AS (
                    SELECT k.id FROM chunk k JOIN request q ON q.seq = k.request_seq
                    WHERE k.state = \(unescaped: Self.sql(ChunkCode.open)) AND k.lease_expires_at <= \(nowMs)
                        AND (q.expiration IS NULL OR q.expiration <= 0 OR q.expiration * 1000 >= \(nowMs))
                    ORDER BY k.request_seq, k.id LIMIT 1 FOR UPDATE OF k SKIP LOCKED
                )
                UPDATE chunk c SET owner = \(owner), lease_expires_at = \(leaseUntil), generation = c.generation + 1
                FROM t, request r WHERE c.id = t.id AND r.seq = c.request_seq
                RETURNING c.id, r.id, c.kind::BIGINT, c.range_after, c.range_through, c.progress, c.generation
                """,
                as: (Int64, String, Int64, Int64, Int64, Int64, Int64).self,
                logger: logger
            )
        else { return nil }
        return try StoredForm.chunk(takenOver: row, lease)
    }

    /// The oldest unfinished requests with uncut targets (through `request_uncut`), each with its
    /// newest chunk (through `chunk_by_request`).
    private func candidates(
        limit: Int,
        nowMs: Int64,
        on connection: PostgresConnection
    ) async throws -> [ClaimScheduler.Candidate] {
        try await connection.all(
            """
            SELECT r.seq, r.app, r.priority::BIGINT, (SELECT max(c.id) FROM chunk c WHERE c.request_seq = r.seq)
            FROM request r WHERE r.state < \(unescaped: Self.sql(Code.done)) AND NOT r.cut_done
                AND (r.expiration IS NULL OR r.expiration <= 0 OR r.expiration * 1000 >= \(nowMs))
            ORDER BY r.seq LIMIT \(unescaped: String(limit))
            """,
            as: (Int64, String, Int64, Int64?).self,
            logger: logger
        ).map { ClaimScheduler.Candidate(seq: $0.0, app: $0.1, priority: Int($0.2), lastTurn: $0.3) }
    }

    /// The apps of the chunks after `after` (a range of `chunk`'s primary key), each with its newest.
    private func recentTurns(after: Int64, on connection: PostgresConnection) async throws -> [String: Int64] {
        let recent = try await connection.all(
            """
            SELECT r.app, max(c.id) FROM chunk c JOIN request r ON r.seq = c.request_seq
            WHERE c.id > \(after) GROUP BY r.app
            """,
            as: (String, Int64).self,
            logger: logger
        )
        return Dictionary(recent.map { ($0.0, $0.1) }, uniquingKeysWith: { max($0, $1) })
    }

    /// Locks the request picked for a cut and reads its cursors and groups, in one statement; nil when
    /// another instance finished cutting it meanwhile (or, `skipLocked`, holds it right now). Instances
    /// cutting the same broadcast take turns on its row lock (a cut takes milliseconds).
    private func lockCutRequest(
        _ seq: Int64,
        skipLocked: Bool = false,
        on connection: PostgresConnection
    ) async throws
        -> ChunkClaim.CutRequest?
    {
        // The groups' subquery is evaluated for the row once it is locked: request_group rows never change.
        guard
            let row = try await connection.first(
                """
                SELECT id, device_bound, group_cut, token_cut, token_count, cut_done, state::BIGINT,
                    ARRAY(SELECT group_id FROM request_group WHERE request_seq = request.seq ORDER BY group_id)
                FROM request WHERE seq = \(seq) FOR UPDATE \(unescaped: skipLocked ? "SKIP LOCKED" : "")
                """,
                as: (String, Int64, Int64, Int64, Int64, Bool, Int64, [Int64]).self,
                logger: logger
            ),
            !row.5, row.6 < Code.done.rawValue
        else { return nil }
        return ChunkClaim.CutRequest(
            id: try StoredForm.requestID(row.0),
            bound: row.1,
            groupCut: row.2,
            tokenCut: row.3,
            tokenCount: row.4,
            groupIDs: row.7
        )
    }

    /// Step 2's write, one statement: the request's cursor moved past the cut, and the chunk, leased.
    /// Answers its id.
    private func insertChunk(
        _ cut: LedgerArithmetic.Cut,
        of seq: Int64,
        _ lease: LeaseWindow,
        on connection: PostgresConnection
    ) async throws -> Int64 {
        guard
            let chunkID = try await connection.first(
                """
                WITH u AS (
                    UPDATE request SET \(unescaped: StoredForm.cutCursorColumn(cut.kind)) = \(cut.through),
                        cut_done = \(cut.cutDone), state = GREATEST(state, \(unescaped: Self.sql(Code.sending)))
                    WHERE seq = \(seq)
                )
                INSERT INTO chunk (request_seq, kind, range_after, range_through, progress, state, owner, lease_expires_at, generation)
                VALUES (\(seq), \(Int16(StoredForm.ChunkKindCode(cut.kind).rawValue)), \(cut.after),
                        \(cut.through), \(cut.after),
                        \(unescaped: Self.sql(ChunkCode.open)),
                        \(lease.owner.value), \(lease.expiresAtMillis), 1)
                RETURNING id
                """,
                as: Int64.self,
                logger: logger
            )
        else { throw StoreError.backend("inserting a chunk returned no id") }
        return chunkID
    }

    /// The steps of ``TargetPageRead``, each with its statements.
    public func targets(of chunk: WorkChunk, after cursor: Int64, limit: Int) async throws -> TargetPage {
        var start = try TargetPageRead(chunk: chunk, after: cursor, limit: limit)
        let first = try start.start()
        if case .finished(let page) = first { return page }
        // One snapshot for the page and the removed targets of its range: a removal committed meanwhile
        // is either in the page or in its removed targets.
        return try await transaction(isolation: "REPEATABLE READ") { [start] connection in
            try await Self.preferOrderedIndexScans(on: connection, logger: logger)
            let requests = try await pageRequests(of: [chunk.id], on: connection)
            return try await page(start, first, requests[chunk.id], on: connection)
        }
    }

    /// The first page of each chunk a claim took (at most `limit` targets after its progress), all in one
    /// REPEATABLE READ snapshot: their requests in one statement, then each chunk's rows.
    func firstPages(of chunks: [WorkChunk], limit: Int) async throws -> [ClaimedWork] {
        var reads = [(read: TargetPageRead, first: TargetPageRead.Action)]()
        for chunk in chunks {
            var read = try TargetPageRead(chunk: chunk, after: chunk.progress, limit: limit)
            let first = try read.start()
            reads.append((read, first))
        }
        let toRead = chunks.indices.filter { if case .finished = reads[$0].first { false } else { true } }
        var pages = [TargetPage?](repeating: nil, count: chunks.count)
        for index in chunks.indices { if case .finished(let page) = reads[index].first { pages[index] = page } }
        if !toRead.isEmpty {
            let read = try await transaction(isolation: "REPEATABLE READ") { [reads] connection in
                try await Self.preferOrderedIndexScans(on: connection, logger: logger)
                let requests = try await pageRequests(of: toRead.map { chunks[$0].id }, on: connection)
                var read = [(Int, TargetPage)]()
                for index in toRead {
                    let (start, first) = reads[index]
                    read.append((index, try await page(start, first, requests[chunks[index].id], on: connection)))
                }
                return read
            }
            for (index, page) in read { pages[index] = page }
        }
        return zip(chunks, pages).map { ClaimedWork(chunk: $0, firstPage: $1!) }
    }

    /// What a page read needs of a chunk's request, and whether any removed target of it is recorded.
    private typealias PageRequest = (request: TargetPageRead.Request, hasRemovedTargets: Bool)

    /// The requests of chunks `ids` with their groups, by chunk id, in one statement.
    private func pageRequests(of ids: [Int64], on connection: PostgresConnection) async throws -> [Int64: PageRequest] {
        var requests = [Int64: PageRequest]()
        for (chunkID, seq, app, groupIDs, createdAt, hasRemoved) in try await connection.all(
            """
            SELECT c.id, c.request_seq, r.app,
                ARRAY(SELECT group_id FROM request_group WHERE request_seq = c.request_seq ORDER BY group_id),
                r.created_at, EXISTS (SELECT 1 FROM request_removed t WHERE t.request_seq = c.request_seq)
            FROM chunk c JOIN request r ON r.seq = c.request_seq WHERE c.id = ANY(\(ids)::BIGINT[])
            """,
            as: (Int64, Int64, String, [Int64], Int64, Bool).self,
            logger: logger
        ) {
            let request = TargetPageRead.Request(seq: seq, app: app, createdAt: createdAt, groupIDs: groupIDs)
            requests[chunkID] = (request, hasRemoved)
        }
        return requests
    }

    /// The rest of a ``TargetPageRead`` from `action`, in the caller's snapshot, its request read already
    /// (`request`, nil for an unknown chunk). A request with no removed target recorded in this snapshot
    /// has none in the page's range: that read is left out.
    private func page(
        _ start: TargetPageRead,
        _ action: TargetPageRead.Action,
        _ request: PageRequest?,
        on connection: PostgresConnection
    ) async throws -> TargetPage {
        var read = start
        var action = action
        while true {
            switch action {
            case .readRequest:
                action = try read.requestRead(request?.request)
            case .readDeviceTargets(let groupIDs, let scan, let since):
                action = try read.rowsRead(
                    try await Self.deviceTargets(
                        groupIDs: groupIDs,
                        scan,
                        invalidatedSince: since,
                        on: connection,
                        logger: logger
                    )
                )
            case .readTokenTargets(let seq, let app, let scan, let since):
                action = try read.rowsRead(
                    try await Self.tokenTargets(
                        requestSeq: seq,
                        app: app,
                        scan,
                        invalidatedSince: since,
                        on: connection,
                        logger: logger
                    )
                )
            case .readRemovedTargets(let seq, let after, let through):
                guard request?.hasRemovedTargets ?? true else {
                    action = read.removedRead([])
                    continue
                }
                action = read.removedRead(
                    try await Self.removedTargets(
                        requestSeq: seq,
                        after: after,
                        through: through,
                        on: connection,
                        logger: logger
                    )
                )
            case .finished(let page):
                return page
            }
        }
    }

    /// Locks the request row, then the chunk row (the lock order of every ledger transaction: request,
    /// then its chunks or retries), checks the holder and generation, and writes the batch: counters on
    /// the chunk row, failures and retries with one statement each, invalidations, the progress and the
    /// renewed lease.
    ///
    /// The request lock is shared (`FOR KEY SHARE`: progress of many chunks goes on at once, and it is
    /// what the foreign keys from `failure` and `retry` take anyway) unless the batch completes the chunk:
    /// then `finishIfDone` needs it exclusive, and taking it exclusive from the start avoids two holders
    /// of the shared lock each waiting to upgrade. `expireOverdue` (request `FOR UPDATE`, then chunks)
    /// waits for, or skips, such a transaction instead of deadlocking with it.
    public func recordProgress(_ progress: ChunkProgress, renewing lease: LeaseWindow) async throws -> ProgressResult {
        try await transaction { connection in try await recordProgress(progress, renewing: lease, on: connection) }
    }

    /// ``recordProgress(_:renewing:)`` in a transaction of the caller's.
    func recordProgress(
        _ progress: ChunkProgress,
        renewing lease: LeaseWindow,
        on connection: PostgresConnection
    ) async throws -> ProgressResult {
        let (chunk, nowMs) = (progress.chunk, lease.nowMillis)
        // `request_seq` of a chunk never changes: read it unlocked (in the statement that locks the request),
        // then lock the chunk.
        let lock: PostgresQuery =
            progress.completesChunk
            ? "SELECT seq FROM request WHERE seq = (SELECT request_seq FROM chunk WHERE id = \(chunk.id)) FOR UPDATE"
            : "SELECT seq FROM request WHERE seq = (SELECT request_seq FROM chunk WHERE id = \(chunk.id)) FOR KEY SHARE"
        guard
            try await connection.first(lock, as: Int64.self, logger: logger) != nil,
            let row = try await connection.first(
                """
                SELECT c.request_seq, c.owner, c.generation, c.state::BIGINT, c.progress, r.app
                FROM chunk c JOIN request r ON r.seq = c.request_seq WHERE c.id = \(chunk.id) FOR UPDATE OF c
                """,
                as: (Int64, String?, Int64, Int64, Int64, String).self,
                logger: logger
            )
        else { return .leaseLost }
        let (seq, app) = (row.0, row.5)
        guard let newProgress = progress.progressToStore(over: (row.1, row.2, row.3, row.4), owner: lease.owner)
        else { return .leaseLost }
        try await Self.recordFailures(progress.failures, requestSeq: seq, on: connection, logger: logger)
        if !progress.retries.isEmpty {
            try await Self.scheduleRetries(progress.retries, requestSeq: seq, on: connection, logger: logger)
            try await notifyWork(on: connection)
        }
        for invalidation in progress.invalidations {
            _ = try await Self.invalidate(app: app, invalidation, at: lease.now, on: connection, logger: logger)
        }
        // A completing record reads its request's completion in the same statement. The chunk's own UPDATE
        // is not visible to it (one snapshot), so the chunk is left out of the open ones: it is done now.
        let completion = try await connection.first(
            """
            WITH u AS (
                UPDATE chunk SET progress = \(newProgress), lease_expires_at = \(lease.expiresAtMillis),
                    state = \(Int16(progress.chunkState.rawValue)),
                    accepted = accepted + \(Int64(progress.accepted)), skipped = skipped + \(Int64(progress.skipped)),
                    fcm_accepted = fcm_accepted + \(Int64(progress.acceptedByService.fcm)),
                    webpush_accepted = webpush_accepted + \(Int64(progress.acceptedByService.webpush)),
                    fcm_skipped = fcm_skipped + \(Int64(progress.skippedByService.fcm)),
                    webpush_skipped = webpush_skipped + \(Int64(progress.skippedByService.webpush)),
                    last_apns_id = COALESCE(\(progress.lastAPNsID), last_apns_id),
                    last_apns_at = CASE WHEN \(progress.lastAPNsID)::TEXT IS NULL THEN last_apns_at ELSE \(nowMs) END
                WHERE id = \(chunk.id)
            )
            \(unescaped: Self.completionColumns(excludingChunk: chunk.id))
            FROM request r WHERE r.seq = \(seq) AND \(progress.completesChunk)::BOOLEAN
            """,
            as: CompletionRow.self,
            logger: logger
        )
        if progress.completesChunk {
            // Locked `FOR UPDATE` above; nothing of the request changed since the read.
            try await Self.finishIfDone(
                requestSeq: seq,
                nowMs: nowMs,
                locked: true,
                completion: .some(completion),
                on: connection,
                logger: logger
            )
            return .chunkCompleted
        }
        return .recorded(leaseExpiresAt: lease.expiresAt)
    }
}
