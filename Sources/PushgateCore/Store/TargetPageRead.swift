/// Reading one page of a chunk's targets (``DeliveryLedger/targets(of:after:limit:)``) as a state
/// machine, the same for every store: where the page starts (``TargetScan``), what is read for each kind
/// of chunk, and how the rows become a ``TargetPage``. Pure: the store runs each ``Action`` with its SQL,
/// all in one snapshot (so that a removal committed meanwhile is either in the page or in its removed
/// targets), and reports the answer with the next event.
package struct TargetPageRead: Sendable {
    /// The chunk's request, as a page reads it.
    package struct Request: Sendable, Hashable {
        package var seq: Int64
        package var app: String
        /// `created_at`, stored milliseconds: devices invalidated from then on are counted as targets,
        /// so a page reports leaving them out.
        package var createdAt: Int64
        /// The request's target groups (read only for a chunk of group members).
        package var groupIDs: [Int64]

        package init(seq: Int64, app: String, createdAt: Int64, groupIDs: [Int64]) {
            self.seq = seq
            self.app = app
            self.createdAt = createdAt
            self.groupIDs = groupIDs
        }
    }

    package enum Action: Sendable, Hashable {
        /// Read the request of chunk `chunkID` (with `groups`, its groups too); then ``requestRead(_:)``,
        /// with nil when there is no such chunk.
        case readRequest(chunkID: Int64, groups: Bool)
        /// Read the distinct devices of the groups in the scan's range, ascending, at most `scan.limit`:
        /// valid ones, and (skipped) those invalidated at or after `invalidatedSince`; then ``rowsRead(_:)``.
        case readDeviceTargets(groupIDs: [Int64], TargetScan, invalidatedSince: Int64)
        /// Read the request's direct tokens in the scan's positions that no target group covers, not known
        /// as invalid, or (skipped) invalidated at or after `invalidatedSince`; then ``rowsRead(_:)``.
        case readTokenTargets(seq: Int64, app: String, TargetScan, invalidatedSince: Int64)
        /// Read the device ids in `(after, through]` recorded as removed from the request's groups and not
        /// members of them now, ascending, each with its service as recorded (`request_removed.platform`;
        /// APNs when not recorded); then ``removedRead(_:)``.
        case readRemovedTargets(seq: Int64, after: Int64, through: Int64)
        /// The page.
        case finished(TargetPage)
    }

    private enum State: Sendable {
        case idle
        case readingRequest
        case readingTargets(Request)
        case readingRemoved(TargetPage)
        case finished
    }

    package let chunk: WorkChunk
    package let scan: TargetScan
    private var state = State.idle

    /// Throws ``StoreError/Code/invalidArgument`` for a limit below one.
    package init(chunk: WorkChunk, after cursor: Int64, limit: Int) throws(StoreError) {
        self.chunk = chunk
        self.scan = try TargetScan(chunk: chunk, after: cursor, limit: limit)
    }

    /// The first step: ``Action/finished(_:)`` at once, without a read, when nothing of the chunk is left.
    package mutating func start() throws -> Action {
        guard case .idle = state else { preconditionFailure("a page read starts once") }
        if scan.isDone { return try finish(scan.page(found: [])) }
        state = .readingRequest
        return .readRequest(chunkID: chunk.id, groups: chunk.kind == .deviceRange)
    }

    /// The answer to ``Action/readRequest(chunkID:groups:)``. Throws for an unknown chunk.
    package mutating func requestRead(_ request: Request?) throws -> Action {
        guard case .readingRequest = state else { preconditionFailure("request read unasked") }
        guard let request else { throw StoreError.invalidArgument("unknown chunk \(chunk.id)") }
        state = .readingTargets(request)
        switch chunk.kind {
        case .deviceRange:
            return .readDeviceTargets(groupIDs: request.groupIDs, scan, invalidatedSince: request.createdAt)
        case .directTokens:
            return .readTokenTargets(seq: request.seq, app: request.app, scan, invalidatedSince: request.createdAt)
        }
    }

    /// The answer to ``Action/readDeviceTargets(groupIDs:_:invalidatedSince:)`` or
    /// ``Action/readTokenTargets(seq:app:_:invalidatedSince:)``.
    package mutating func rowsRead(_ rows: [TargetScan.Row]) throws -> Action {
        guard case .readingTargets(let request) = state else { preconditionFailure("rows read unasked") }
        let page = try scan.page(rows: rows)
        switch chunk.kind {
        case .deviceRange:
            // Members removed from the groups since the request was stored: no page can read them.
            state = .readingRemoved(page)
            return .readRemovedTargets(seq: request.seq, after: scan.after, through: page.scannedThrough)
        case .directTokens:
            return finish(page)
        }
    }

    /// The answer to ``Action/readRemovedTargets(seq:after:through:)``: added to the page's skipped ones.
    package mutating func removedRead(_ removed: [(device: Int64, platform: PushPlatform)]) -> Action {
        guard case .readingRemoved(var page) = state else { preconditionFailure("removed read unasked") }
        if !removed.isEmpty {
            let merged = (zip(page.skipped, page.skippedPlatforms).map { (device: $0, platform: $1) } + removed)
                .sorted { $0.device < $1.device }
            page.skipped = merged.map(\.device)
            page.skippedPlatforms = merged.map(\.platform)
        }
        return finish(page)
    }

    private mutating func finish(_ page: TargetPage) -> Action {
        state = .finished
        return .finished(page)
    }
}
