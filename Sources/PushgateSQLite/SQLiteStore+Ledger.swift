public import Foundation
import GRDB
public import PushgateCore

extension SQLiteStore {
    typealias Code = StoredForm.RequestStateCode
    typealias ChunkCode = StoredForm.ChunkStateCode

    // MARK: - Requests

    public func enqueue(_ request: NotificationRequest) async throws -> EnqueueResult {
        let plan: TargetPlan
        switch try await planEnqueue(request) {
        case .answered(let earlier): return earlier
        case .store(let planned): plan = planned
        }
        return try await write { db in
            if let earlier = try Self.earlierRequest(answering: request, in: db) { return earlier }
            return try Self.insert(request, plan, in: db)
        }
    }

    public func enqueue(
        _ request: NotificationRequest,
        claiming lease: LeaseWindow,
        chunkSize: Int,
        pageLimit: Int
    ) async throws -> (stored: EnqueueResult, claimed: ClaimedWork?) {
        let chunkSize = try StoreError.positive(chunkSize, "chunk size")
        let pageLimit = try StoreError.positive(pageLimit)
        let (groups, tokens) = try Self.checkedTargets(request)
        // A request of few targets (the latency case) is planned in the write transaction itself: one
        // transaction in all. A larger one is counted in a read snapshot first, as by `enqueue(_:)`, so
        // that counting a broadcast does not hold the write lock.
        let plannedInWriter = try await write { db -> (stored: EnqueueResult, claimed: ClaimedWork?)? in
            // A retry claims nothing: the work it would claim is the loop's to claim as usual.
            if let earlier = try Self.earlierRequest(answering: request, in: db) { return (earlier, nil) }
            var lookups = TargetLookups()
            guard
                try Self.targetsAtMost(
                    Self.plannedInWriterLimit,
                    app: request.app,
                    groups: groups,
                    tokens: tokens,
                    lookups: &lookups,
                    in: db
                )
            else { return nil }
            let plan = try Self.planTargets(
                app: request.app,
                groups: groups,
                tokens: tokens,
                lookups: &lookups,
                in: db
            )
            return try Self.insertAndClaim(request, plan, lease, chunkSize: chunkSize, pageLimit: pageLimit, in: db)
        }
        if let plannedInWriter { return plannedInWriter }
        let plan: TargetPlan
        switch try await planEnqueue(request) {
        case .answered(let earlier): return (earlier, nil)
        case .store(let planned): plan = planned
        }
        // One transaction, committed with fsync as any enqueue: the chunk's lease is as durable as the
        // request (a crash leaves it to expire, or to this instance's release at its next start).
        return try await write { db in
            if let earlier = try Self.earlierRequest(answering: request, in: db) { return (earlier, nil) }
            return try Self.insertAndClaim(request, plan, lease, chunkSize: chunkSize, pageLimit: pageLimit, in: db)
        }
    }

    /// The most memberships and direct tokens a request may have to be planned inside its write
    /// transaction: counting them holds the write lock for well under a millisecond.
    static let plannedInWriterLimit = 2_000

    private static func insertAndClaim(
        _ request: NotificationRequest,
        _ plan: TargetPlan,
        _ lease: LeaseWindow,
        chunkSize: Int,
        pageLimit: Int,
        in db: Database
    ) throws -> (stored: EnqueueResult, claimed: ClaimedWork?) {
        let stored = try insert(request, plan, in: db)
        guard let chunk = try claimChunk(lease, chunkSize: chunkSize, in: db) else { return (stored, nil) }
        let page = try targetPage(of: chunk, after: chunk.progress, limit: pageLimit, in: db)
        return (stored, ClaimedWork(chunk: chunk, firstPage: page))
    }

    /// True when the request's known groups have at most `limit` memberships in all, with its direct
    /// tokens counted too (an upper bound of its targets; every membership row is read at most once).
    static func targetsAtMost(
        _ limit: Int,
        app: String,
        groups: [String],
        tokens: [DeviceToken],
        in db: Database
    ) throws -> Bool {
        var lookups = TargetLookups()
        return try targetsAtMost(limit, app: app, groups: groups, tokens: tokens, lookups: &lookups, in: db)
    }

    /// ``targetsAtMost(_:app:groups:tokens:in:)`` remembering the groups it looked up in `lookups`.
    static func targetsAtMost(
        _ limit: Int,
        app: String,
        groups: [String],
        tokens: [DeviceToken],
        lookups: inout TargetLookups,
        in db: Database
    ) throws -> Bool {
        var budget = limit - tokens.count
        guard budget >= 0 else { return false }
        let members = try db.cachedStatement(
            sql: "SELECT COUNT(*) FROM (SELECT 1 FROM membership WHERE group_id = ? LIMIT ?)"
        )
        for group in groups {
            guard let groupID = try lookups.groupID(app: app, name: group, in: db) else { continue }
            // A count read for the batch is capped above any budget: the same answer as the bounded read.
            budget -=
                try lookups.membershipCount(of: groupID).map { min($0, budget + 1) }
                ?? Int.fetchOne(members, arguments: [groupID, budget + 1]) ?? 0
            if budget < 0 { return false }
        }
        return true
    }

    /// Checks a request and resolves its targets in a read snapshot, so that counting a million-device
    /// broadcast does not hold the write lock (registrations and outcomes go on meanwhile). Groups are
    /// never deleted, so the ids stay valid; devices created after the snapshot are beyond its bound and
    /// not targets.
    ///
    /// A retry (its idempotency key stored in the snapshot, within its window) is answered from the
    /// snapshot without counting anything. The write transaction looks again, and that look decides: a
    /// row within its window changes only by being stored, so what the snapshot found still holds then.
    private func planEnqueue(_ request: NotificationRequest) async throws -> PlannedEnqueue {
        let (groups, tokens) = try Self.checkedTargets(request)
        return try await read { db in
            if let earlier = try Self.earlierRequest(answering: request, releasingExpired: false, in: db) {
                return .answered(earlier)
            }
            return .store(try Self.planTargets(app: request.app, groups: groups, tokens: tokens, in: db))
        }
    }

    enum PlannedEnqueue: Sendable {
        /// Store the request with these targets.
        case store(TargetPlan)
        /// Store nothing: the request is a retry of this one.
        case answered(EnqueueResult)
    }

    /// The answer to a request whose idempotency key names a request stored for the same app within
    /// ``IdempotencyKey/window`` of it: that request's enqueue result (``EnqueueResult/isReplay``) when the
    /// fingerprints match; ``StoreError/Code/idempotencyKeyReused`` when they differ. Nil when the request
    /// is to be stored: it has no key, or its key is free. A key whose window is over is cleared from the
    /// old row (with `releasingExpired`, in a write transaction) so that the new request can take it.
    ///
    /// One lookup in the partial unique index `request_by_idempotency_key`, in the transaction that
    /// stores the request: SQLite's one writer makes the look and the insert one step, so two requests
    /// with one key store one request.
    static func earlierRequest(
        answering request: NotificationRequest,
        releasingExpired: Bool = true,
        in db: Database
    ) throws -> EnqueueResult? {
        guard let idempotency = request.idempotency else { return nil }
        guard
            let row = try Row.fetchOne(
                db.cachedStatement(
                    sql: """
                        SELECT seq, id, target_count, idempotency_fingerprint, created_at
                        FROM request WHERE app = ? AND idempotency_key = ?
                        """
                ),
                arguments: [request.app, idempotency.key.value]
            )
        else { return nil }
        let seq: Int64 = row[0]
        guard IdempotencyKey.isWithinWindow(storedAt: Millis.date(row[4]), now: request.createdAt) else {
            if releasingExpired {
                try db.cachedStatement(
                    sql: "UPDATE request SET idempotency_key = NULL, idempotency_fingerprint = NULL WHERE seq = ?"
                ).execute(arguments: [seq])
            }
            return nil
        }
        let fingerprint: Data? = row[3]
        guard fingerprint.map(Array.init) == idempotency.fingerprint else {
            throw StoreError.idempotencyKeyReused(app: request.app)
        }
        let id: String = row[1]
        let unknownGroups = try String.fetchAll(
            db.cachedStatement(sql: "SELECT name FROM request_unknown_group WHERE request_seq = ? ORDER BY position"),
            arguments: [seq]
        )
        return EnqueueResult(
            id: try StoredForm.requestID(id),
            targetCount: row[2],
            unknownGroups: unknownGroups,
            isReplay: true
        )
    }

    /// The request's distinct groups and tokens; throws if it has no app or no target at all.
    static func checkedTargets(_ request: NotificationRequest) throws -> ([String], [DeviceToken]) {
        guard !request.app.isEmpty else { throw StoreError.invalidArgument("app name must not be empty") }
        let groups = StoredForm.distinct(request.groups)
        let tokens = StoredForm.distinct(request.devices)
        guard !groups.isEmpty || !tokens.isEmpty else { throw StoreError.noTargets() }
        return (groups, tokens)
    }

    /// Writes a planned request: its row (with its idempotency key, which the caller looked up in the
    /// same transaction: ``earlierRequest(answering:releasingExpired:in:)``), its groups (known and
    /// unknown) and its direct tokens.
    static func insert(
        _ request: NotificationRequest,
        _ plan: TargetPlan,
        in db: Database
    ) throws
        -> EnqueueResult
    {
        try insertRequest(request, plan, in: db).stored
    }

    /// ``insert(_:_:in:)``, answering the new row's seq too. Without `groupRows`, the request's known
    /// groups are the caller's to write (a group commit writes those of its batch in one statement).
    static func insertRequest(
        _ request: NotificationRequest,
        _ plan: TargetPlan,
        groupRows: Bool = true,
        in db: Database
    ) throws
        -> (stored: EnqueueResult, seq: Int64)
    {
        let tokens = StoredForm.distinct(request.devices)
        let created = Millis.from(request.createdAt)
        let done = plan.targetCount == 0
        // The request's first write: a duplicate id is refused by `id UNIQUE` (the failed statement is
        // rolled back alone, so nothing of the request is written), without a lookup before it.
        do {
            try insertRow(request, plan, tokenCount: tokens.count, created: created, done: done, in: db)
        } catch let error as DatabaseError
            where error.extendedResultCode == .SQLITE_CONSTRAINT_UNIQUE
            && error.message?.hasSuffix("request.id") == true
        {
            throw StoreError.duplicateRequestID(request.id)
        }
        let seq = db.lastInsertedRowID
        for groupID in plan.groupIDs where groupRows {
            try db.cachedStatement(
                sql: "INSERT INTO request_group (request_seq, group_id) VALUES (?, ?)"
            ).execute(arguments: [seq, groupID])
        }
        for (index, name) in plan.unknownGroups.enumerated() {
            try db.cachedStatement(
                sql: "INSERT INTO request_unknown_group (request_seq, position, name) VALUES (?, ?, ?)"
            ).execute(arguments: [seq, index + 1, name])
        }
        let insertToken = try db.cachedStatement(
            sql: "INSERT INTO request_token (request_seq, position, token, covered) VALUES (?, ?, ?, ?)"
        )
        for (index, token) in tokens.enumerated() {
            try insertToken.execute(arguments: [seq, index + 1, token.storageKey, plan.covered[index]])
        }
        return (EnqueueResult(id: request.id, targetCount: plan.targetCount, unknownGroups: plan.unknownGroups), seq)
    }

    private static func insertRow(
        _ request: NotificationRequest,
        _ plan: TargetPlan,
        tokenCount: Int,
        created: Int64,
        done: Bool,
        in db: Database
    ) throws {
        try db.cachedStatement(
            sql: """
                INSERT INTO request (id, app, push_type, priority, expiration, collapse_id, payload, fcm, created_at,
                                     device_bound, token_count, target_count, state, finished_at, cut_done,
                                     idempotency_key, idempotency_fingerprint, webpush, fcm_targets, webpush_targets)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """
        ).bindAndExecute { row in
            row.bind(request.id.value)
            row.bind(request.app)
            row.bind(request.pushType.rawValue)
            row.bind(request.priority.rawValue)
            row.bind(StoredForm.expiration(request.expiration))
            row.bind(request.collapseID?.value)
            row.bind(Data(request.payload.bytes))
            row.bind(request.fcm.map { Data($0.bytes) })
            row.bind(created)
            row.bind(plan.bound)
            row.bind(tokenCount)
            row.bind(plan.targetCount)
            row.bind((done ? Code.done : Code.queued).rawValue)
            row.bind(done ? created : nil)
            row.bind(done)
            row.bind(request.idempotency?.key.value)
            row.bind(request.idempotency.map { Data($0.fingerprint) })
            row.bind(request.webPush.map { Data($0.bytes) })
            row.bind(plan.targets.fcm)
            row.bind(plan.targets.webpush)
        }
    }

    /// What the enqueues of one write transaction read of the registry, for the requests after the first:
    /// group ids by name and the newest device id. Valid for that transaction only: an enqueue writes
    /// neither groups nor devices, and SQLite's one writer lets nothing else write them meanwhile.
    struct TargetLookups {
        private var groups: [GroupName: Int64?] = [:]
        private var bound: Int64?
        /// Per group id: its memberships, counted up to ``plannedInWriterLimit`` + 1 (``read(batch:in:)``).
        private var memberships: [Int64: Int] = [:]
        /// Per group id: its devices within the bound that count as targets, for the groups that are a
        /// request's only known group (what ``countDeviceTargets(groupIDs:after:through:invalidatedSince:in:)``
        /// answers for one group).
        private var deviceTargets: [Int64: ServiceCounts] = [:]

        private struct GroupName: Hashable {
            var app: String
            var name: String
        }

        mutating func groupID(app: String, name: String, in db: Database) throws -> Int64? {
            let key = GroupName(app: app, name: name)
            if let known = groups[key] { return known }
            let id = try SQLiteStore.groupID(app: app, name: name, in: db)
            groups[key] = .some(id)
            return id
        }

        /// The memberships of `groupID` if ``read(batch:in:)`` counted them: at most
        /// ``plannedInWriterLimit`` + 1.
        func membershipCount(of groupID: Int64) -> Int? { memberships[groupID] }

        /// The targets of a request whose only known group is `groupID`, if ``read(batch:in:)`` counted them.
        func deviceTargets(ofOnly groupID: Int64) -> ServiceCounts? { deviceTargets[groupID] }

        /// Everything a group commit's requests look up in the registry, in two statements for the batch
        /// instead of three a request: their groups' ids with their memberships counted up to
        /// ``plannedInWriterLimit`` + 1, then, for each group that is a request's only known group and no
        /// larger than that, its targets within the device bound (both lists passed as JSON arrays, read
        /// with `json_each`, through the indexes the per-request statements use).
        mutating func read(batch requests: [(app: String, groups: [String])], in db: Database) throws {
            var names = [GroupName]()
            var seen = Set<GroupName>()
            for request in requests {
                for name in request.groups {
                    let key = GroupName(app: request.app, name: name)
                    if groups[key] == nil, seen.insert(key).inserted { names.append(key) }
                }
            }
            if names.isEmpty { return }
            let pairs = names.map {
                "[" + Payload.jsonStringLiteral($0.app) + "," + Payload.jsonStringLiteral($0.name) + "]"
            }
            for name in names { groups[name] = .some(nil) }
            let found = try Row.fetchCursor(
                db.cachedStatement(
                    sql: """
                        SELECT j.key, g.id,
                            (SELECT COUNT(*) FROM (SELECT 1 FROM membership WHERE group_id = g.id LIMIT ?2))
                        FROM json_each(?1) j JOIN device_group g ON g.app = j.value ->> 0 AND g.name = j.value ->> 1
                        """
                ),
                arguments: ["[" + pairs.joined(separator: ",") + "]", SQLiteStore.plannedInWriterLimit + 1]
            )
            while let row = try found.next() {
                let index: Int = row[0]
                let id: Int64 = row[1]
                groups[names[index]] = .some(id)
                memberships[id] = row[2]
            }
            // The groups counted whole below: each a request's only known group, small enough to be
            // planned in the writer.
            var only = Set<Int64>()
            for request in requests {
                let ids = Set(request.groups.compactMap { groups[GroupName(app: request.app, name: $0)] ?? nil })
                if ids.count == 1, let id = ids.first, deviceTargets[id] == nil,
                    let count = memberships[id], count <= SQLiteStore.plannedInWriterLimit
                {
                    only.insert(id)
                }
            }
            if only.isEmpty { return }
            let bound = try deviceBound(in: db)
            for id in only { deviceTargets[id] = .zero }
            let counted = try Row.fetchCursor(
                db.cachedStatement(
                    sql: """
                        SELECT m.group_id, COUNT(*), COALESCE(SUM(\(SQLiteStore.platformCode("d.token")) = 1), 0),
                            COALESCE(SUM(\(SQLiteStore.platformCode("d.token")) = 2), 0)
                        FROM json_each(?1) j JOIN membership m ON m.group_id = j.value JOIN device d ON d.id = m.device_id
                        WHERE m.device_id <= ?2 AND d.state = 0
                        GROUP BY m.group_id
                        """
                ),
                arguments: ["[" + only.map { String($0) }.joined(separator: ",") + "]", bound]
            )
            while let row = try counted.next() {
                deviceTargets[row[0]] = ServiceCounts(total: row[1], fcm: row[2], webpush: row[3])
            }
        }

        /// The highest device id (0 without devices): devices created later are not targets.
        mutating func deviceBound(in db: Database) throws -> Int64 {
            if let bound { return bound }
            let read = try Int64.fetchOne(db.cachedStatement(sql: "SELECT COALESCE(MAX(id), 0) FROM device")) ?? 0
            bound = read
            return read
        }
    }

    /// A request's targets as resolved when it is stored.
    struct TargetPlan: Sendable {
        var groupIDs: [Int64]
        var unknownGroups: [String]
        /// The highest device id: devices created later are not targets.
        var bound: Int64
        /// Per direct token: a member of a target group within the bound, so the group fan-out covers it.
        var covered: [Bool]
        /// The distinct targets, by service.
        var targets: ServiceCounts
        var targetCount: Int { targets.total }
    }

    static func planTargets(app: String, groups: [String], tokens: [DeviceToken], in db: Database) throws -> TargetPlan
    {
        var lookups = TargetLookups()
        return try planTargets(app: app, groups: groups, tokens: tokens, lookups: &lookups, in: db)
    }

    /// ``planTargets(app:groups:tokens:in:)`` with the groups and the bound that `lookups` already read in
    /// this transaction.
    static func planTargets(
        app: String,
        groups: [String],
        tokens: [DeviceToken],
        lookups: inout TargetLookups,
        in db: Database
    ) throws -> TargetPlan {
        var known = [String: Int64]()
        for group in groups {
            if let groupID = try lookups.groupID(app: app, name: group, in: db) { known[group] = groupID }
        }
        let resolved = try TargetGroups.resolve(app: app, groups: groups, known: known, hasDevices: !tokens.isEmpty)
        let groupIDs = resolved.ids
        let bound = try lookups.deviceBound(in: db)
        let counted = groupIDs.count == 1 ? lookups.deviceTargets(ofOnly: groupIDs[0]) : nil
        var targets = try counted ?? countDeviceTargets(groupIDs: groupIDs, after: 0, through: bound, in: db)
        var covered = [Bool]()
        covered.reserveCapacity(tokens.count)
        // Prepared only for direct tokens (one parsed for nothing was about 2 % of the gateway's CPU at 10,000 requests/s).
        let memberOfTargets: Statement? =
            groupIDs.isEmpty || tokens.isEmpty
            ? nil
            : try db.makeStatement(
                sql: "SELECT 1 FROM membership WHERE device_id = ? AND group_id IN ("
                    + groupIDs.map { String($0) }.joined(separator: ",") + ") LIMIT 1"
            )
        let lookup = try db.cachedStatement(sql: "SELECT id, state FROM device WHERE \(deviceByToken)")
        for token in tokens {
            var isCovered = false
            var counts = true
            if let row = try Row.fetchOne(lookup, arguments: deviceByTokenArguments(app: app, token: token)) {
                let deviceID: Int64 = row[0]
                if let memberOfTargets, deviceID <= bound,
                    try Int64.fetchOne(memberOfTargets, arguments: [deviceID]) != nil
                {
                    isCovered = true
                    counts = false  // counted with its group
                } else if StoredForm.deviceState(row[1]) == .invalid {
                    counts = false  // skipped at send time
                }
            }
            covered.append(isCovered)
            if counts { targets[token.platform] += 1 }
        }
        return TargetPlan(
            groupIDs: groupIDs,
            unknownGroups: resolved.unknown,
            bound: bound,
            covered: covered,
            targets: targets
        )
    }

    public func request(_ id: RequestID) async throws -> NotificationRequest? {
        try await read { db in
            guard
                let row = try Row.fetchOne(
                    db.cachedStatement(
                        sql: """
                            SELECT seq, app, push_type, priority, expiration, collapse_id, payload, created_at, fcm,
                                   idempotency_key, idempotency_fingerprint, webpush
                            FROM request WHERE id = ?
                            """
                    ),
                    arguments: [id.value]
                )
            else { return nil }
            let seq: Int64 = row[0]
            let groups = try String.fetchAll(
                db.cachedStatement(
                    sql: """
                        SELECT g.name FROM request_group rg JOIN device_group g ON g.id = rg.group_id
                        WHERE rg.request_seq = ? ORDER BY g.name
                        """
                ),
                arguments: [seq]
            )
            let tokens = try String.fetchAll(
                db.cachedStatement(
                    sql: "SELECT token FROM request_token WHERE request_seq = ? ORDER BY position"
                ),
                arguments: [seq]
            )
            do throws(ValidationError) {
                let pushTypeRaw: String = row[2]
                let collapse: String? = row[5]
                let payload: Data = row[6]
                let fcm: Data? = row[8]
                let key: String? = row[9]
                let fingerprint: Data? = row[10]
                let webPush: Data? = row[11]
                return NotificationRequest(
                    id: id,
                    app: row[1],
                    groups: groups,
                    devices: try tokens.map { key throws(ValidationError) in try DeviceToken(storageKey: key) },
                    pushType: try PushType(validating: pushTypeRaw),
                    priority: try Priority(validating: row[3]),
                    expiration: StoredForm.expiration(stored: row[4]),
                    collapseID: try collapse.map { value throws(ValidationError) in try CollapseID(value) },
                    payload: try Payload(jsonBytes: Array(payload)),
                    fcm: try fcm.map { bytes throws(ValidationError) in try FCMOverride(jsonBytes: Array(bytes)) },
                    webPush: try webPush.map { bytes throws(ValidationError) in
                        try WebPushOverride(jsonBytes: Array(bytes))
                    },
                    createdAt: Millis.date(row[7]),
                    idempotency: try key.map { value throws(ValidationError) in
                        Idempotency(key: try IdempotencyKey(value), fingerprint: Array(fingerprint ?? Data()))
                    }
                )
            } catch {
                throw StoreError.backend("stored request \(id) is malformed: \(error)")
            }
        }
    }

    public func report(_ id: RequestID) async throws -> DeliveryReport? {
        try await read { db in try Self.reports([id], in: db).first }
    }

    /// One read (one trip to a reader connection) for all of them.
    public func reports(_ ids: [RequestID]) async throws -> [DeliveryReport] {
        if ids.isEmpty { return [] }
        return try await read { db in try Self.reports(ids, in: db) }
    }

    /// The reports of `ids` (in their order, unknown ones left out) in four statements whatever their
    /// number: the requests, then their failure counts, pending retries and unknown groups, each for all
    /// of them at once (the lists passed as JSON arrays, read with `json_each`, through the same indexes a
    /// lookup of one uses). A request's chunk sums are one pass over its chunks (a join), not one
    /// subquery per sum.
    static func reports(_ ids: [RequestID], in db: Database) throws -> [DeliveryReport] {
        // Request ids are letters, digits, '.', '_' and '-' (``RequestID``): nothing to escape in JSON.
        let idList = "[" + ids.map { "\"\($0.value)\"" }.joined(separator: ",") + "]"
        // Read through cursors: each row's values are decoded from the statement as it steps, instead of
        // copied into a `Row` (with its column names) first; the "request done" lines read these at the
        // rate requests finish.
        var requestRows: [ReportRow] = []
        requestRows.reserveCapacity(ids.count)
        let requestCursor = try Row.fetchCursor(
            db.cachedStatement(
                sql: """
                    SELECT r.seq, r.id, r.app, r.state, r.target_count,
                        r.accepted + COALESCE(SUM(c.accepted), 0),
                        r.created_at, r.finished_at, r.last_apns_id,
                        COALESCE(SUM(c.skipped), 0),
                        r.fcm_targets, r.webpush_targets,
                        r.fcm_accepted + COALESCE(SUM(c.fcm_accepted), 0),
                        r.webpush_accepted + COALESCE(SUM(c.webpush_accepted), 0),
                        COALESCE(SUM(c.fcm_skipped), 0),
                        COALESCE(SUM(c.webpush_skipped), 0)
                    FROM request r LEFT JOIN chunk c ON c.request_seq = r.seq
                    WHERE r.id IN (SELECT value FROM json_each(?))
                    GROUP BY r.seq
                    """
            ),
            arguments: [idList]
        )
        while let row = try requestCursor.next() { requestRows.append(ReportRow(row)) }
        if requestRows.isEmpty { return [] }
        let seqList = "[" + requestRows.map { String($0.seq) }.joined(separator: ",") + "]"
        var failedByReason = [Int64: [String: Int]]()
        let failureCursor = try Row.fetchCursor(
            db.cachedStatement(
                sql: """
                    SELECT request_seq, reason, count FROM failure_count
                    WHERE request_seq IN (SELECT value FROM json_each(?))
                    """
            ),
            arguments: [seqList]
        )
        while let row = try failureCursor.next() { failedByReason[row[0], default: [:]][row[1]] = row[2] }
        var pending = [Int64: Int]()
        let retryCursor = try Row.fetchCursor(
            db.cachedStatement(
                sql: """
                    SELECT request_seq, COUNT(*) FROM retry
                    WHERE request_seq IN (SELECT value FROM json_each(?)) GROUP BY request_seq
                    """
            ),
            arguments: [seqList]
        )
        while let row = try retryCursor.next() { pending[row[0]] = row[1] }
        var unknownGroups = [Int64: [String]]()
        let unknownCursor = try Row.fetchCursor(
            db.cachedStatement(
                sql: """
                    SELECT request_seq, name FROM request_unknown_group
                    WHERE request_seq IN (SELECT value FROM json_each(?)) ORDER BY request_seq, position
                    """
            ),
            arguments: [seqList]
        )
        while let row = try unknownCursor.next() { unknownGroups[row[0], default: []].append(row[1]) }
        var byID = [String: DeliveryReport]()
        byID.reserveCapacity(requestRows.count)
        for row in requestRows {
            let seq = row.seq
            let state = StoredForm.requestState(row.state)
            let failed = failedByReason[seq] ?? [:]
            let byService = try ServiceSplit.read(
                finished: state.isFinished,
                totals: (row.targets, row.accepted, failed.values.reduce(0, +), row.skipped),
                targets: row.fcmTargets.map { ($0, row.webPushTargets ?? 0) },
                accepted: (row.fcmAccepted, row.webPushAccepted),
                skipped: (row.fcmSkipped, row.webPushSkipped),
                failedRows: state.isFinished || row.fcmTargets == nil ? (0, 0) : failedRows(requestSeq: seq, in: db)
            )
            byID[row.id] = DeliveryReport(
                id: try StoredForm.requestID(row.id),
                app: row.app,
                state: state,
                targets: row.targets,
                accepted: row.accepted,
                failedByReason: failed,
                pendingRetries: pending[seq] ?? 0,
                createdAt: Millis.date(row.createdAt),
                finishedAt: row.finishedAt.map(Millis.date),
                lastAPNsID: row.lastAPNsID,
                unknownGroups: unknownGroups[seq] ?? [],
                skipped: row.skipped,
                byService: byService
            )
        }
        return ids.compactMap { byID[$0.value] }
    }

    /// One row of ``reports(_:in:)``'s first statement, decoded as its cursor steps.
    private struct ReportRow {
        var seq: Int64
        var id: String
        var app: String
        var state: Int64
        var targets: Int
        var accepted: Int
        var createdAt: Int64
        var finishedAt: Int64?
        var lastAPNsID: String?
        var skipped: Int
        var fcmTargets: Int?
        var webPushTargets: Int?
        var fcmAccepted: Int
        var webPushAccepted: Int
        var fcmSkipped: Int
        var webPushSkipped: Int

        init(_ row: Row) {
            seq = row[0]
            id = row[1]
            app = row[2]
            state = row[3]
            targets = row[4]
            accepted = row[5]
            createdAt = row[6]
            finishedAt = row[7]
            lastAPNsID = row[8]
            skipped = row[9]
            fcmTargets = row[10]
            webPushTargets = row[11]
            fcmAccepted = row[12]
            webPushAccepted = row[13]
            fcmSkipped = row[14]
            webPushSkipped = row[15]
        }
    }

    /// An unfinished request's failure rows of FCM and of Web Push devices: ranges of the primary key
    /// (`failure (request_seq, token)`, storage keys in byte order).
    static func failedRows(requestSeq: Int64, in db: Database) throws -> (fcm: Int, webpush: Int) {
        let row = try Row.fetchOne(
            db.cachedStatement(
                sql: """
                    SELECT (SELECT COUNT(*) FROM failure WHERE request_seq = ?1 AND token >= ?2 AND token < ?3),
                        (SELECT COUNT(*) FROM failure WHERE request_seq = ?1 AND token >= ?4 AND token < ?5)
                    """
            ),
            arguments: [
                requestSeq, DeviceToken.fcmStoragePrefix, DeviceToken.storagePrefixEnd(DeviceToken.fcmStoragePrefix),
                DeviceToken.webPushStoragePrefix, DeviceToken.storagePrefixEnd(DeviceToken.webPushStoragePrefix),
            ]
        )
        return (row?[0] ?? 0, row?[1] ?? 0)
    }

    public func failures(of id: RequestID, after: DeviceToken?, limit: Int) async throws -> [FailureEntry] {
        _ = try StoreError.positive(limit)
        return try await read { db in
            guard
                let seq = try Int64.fetchOne(
                    db.cachedStatement(sql: "SELECT seq FROM request WHERE id = ?"),
                    arguments: [id.value]
                )
            else { return [] }
            return try Row.fetchAll(
                db.cachedStatement(
                    sql: """
                        SELECT token, reason, status, failed_at FROM failure
                        WHERE request_seq = ? AND token > ? ORDER BY token LIMIT ?
                        """
                ),
                arguments: [seq, after?.storageKey ?? "", limit]
            ).map { row in
                FailureEntry(
                    token: try StoredForm.deviceToken(row[0]),
                    reason: row[1],
                    status: row[2],
                    at: Millis.date(row[3])
                )
            }
        }
    }

    // MARK: - Leases, expiry, wake-ups

    public func releaseLeases(owner: InstanceID, now: Date) async throws -> Int {
        let nowMs = Millis.from(now)
        return try await write { db in
            // A new generation, so that late progress from the released holder is refused.
            try db.cachedStatement(
                sql: """
                    UPDATE chunk SET lease_expires_at = min(lease_expires_at, ?), generation = generation + 1
                    WHERE owner = ? AND state = \(ChunkCode.open.rawValue)
                    """
            ).execute(arguments: [nowMs, owner.value])
            let chunks = db.changesCount
            try db.cachedStatement(
                sql: """
                    UPDATE retry SET owner = NULL, lease_expires_at = min(lease_expires_at, ?),
                        generation = generation + 1
                    WHERE owner = ?
                    """
            ).execute(arguments: [nowMs, owner.value])
            return chunks + db.changesCount
        }
    }

    public func expireOverdue(now: Date) async throws -> [RequestID] {
        let nowMs = Millis.from(now)
        return try await write { db in try Self.expireOverdue(nowMs: nowMs, in: db) }
    }

    public func nextWakeUp(after now: Date) async throws -> Date? {
        try await read { db in
            let retry = try Int64.fetchOne(
                db.cachedStatement(sql: "SELECT MIN(max(next_attempt_at, lease_expires_at)) FROM retry")
            )
            let lease = try Int64.fetchOne(
                db.cachedStatement(
                    sql: "SELECT MIN(lease_expires_at) FROM chunk WHERE state = \(ChunkCode.open.rawValue)"
                )
            )
            let expiration = try Int64.fetchOne(
                db.cachedStatement(
                    sql: """
                        SELECT MIN(expiration) FROM request
                        WHERE state < \(Code.done.rawValue) AND expiration > 0
                        """
                )
            )
            return LedgerArithmetic.nextWakeUp(retryDue: retry, leaseEnd: lease, expiration: expiration)
        }
    }

    // MARK: - Inside transactions

    /// What ``finishIfDone(requestSeq:nowMs:recording:completion:in:)`` reads of a request first.
    struct CompletionRow {
        var completion: RequestCompletion?
        /// Whether a removed target of the request is recorded at all.
        var hasRemovedTargets: Bool
    }

    /// The completion reads of many requests in one statement, by seq (a seq without a row has none: the
    /// answer of the read for an unknown request).
    static func completionRows(requestSeqs: [Int64], in db: Database) throws -> [Int64: CompletionRow] {
        var rows = [Int64: CompletionRow]()
        for seq in requestSeqs { rows[seq] = CompletionRow(completion: nil, hasRemovedTargets: true) }
        let cursor = try Row.fetchCursor(
            db.cachedStatement(
                sql: """
                    SELECT r.seq, r.state, r.cut_done,
                        EXISTS (
                            SELECT 1 FROM chunk c
                            WHERE c.request_seq = r.seq AND c.state = \(ChunkCode.open.rawValue)),
                        EXISTS (SELECT 1 FROM retry WHERE request_seq = r.seq),
                        EXISTS (SELECT 1 FROM request_removed WHERE request_seq = r.seq)
                    FROM json_each(?) j JOIN request r ON r.seq = j.value
                    """
            ),
            arguments: ["[" + requestSeqs.map { String($0) }.joined(separator: ",") + "]"]
        )
        while let row = try cursor.next() {
            rows[row[0]] = CompletionRow(
                completion: RequestCompletion(
                    state: row[1],
                    cutDone: row[2],
                    hasOpenChunks: row[3],
                    hasPendingRetries: row[4]
                ),
                hasRemovedTargets: row[5]
            )
        }
        return rows
    }

    /// `byService`: the FCM and Web Push parts of `count` (``ServiceCounts``).
    static func recordAccepted(
        _ count: Int,
        byService: ServiceCounts = .zero,
        apnsID: String?,
        requestSeq: Int64,
        in db: Database
    ) throws {
        guard count > 0 || apnsID != nil else { return }
        try db.cachedStatement(
            sql: """
                UPDATE request SET accepted = accepted + ?, last_apns_id = coalesce(?, last_apns_id),
                    fcm_accepted = fcm_accepted + ?, webpush_accepted = webpush_accepted + ?
                WHERE seq = ?
                """
        ).execute(arguments: [count, apnsID, byService.fcm, byService.webpush, requestSeq])
    }

    /// A failure row per device (the first failure of a device in a request wins) and the counts by reason.
    static func recordFailures(_ failures: [FailureEntry], requestSeq: Int64, in db: Database) throws {
        guard !failures.isEmpty else { return }
        let insert = try db.cachedStatement(
            sql: """
                INSERT INTO failure (request_seq, token, reason, status, failed_at) VALUES (?, ?, ?, ?, ?)
                ON CONFLICT (request_seq, token) DO NOTHING
                """
        )
        var byReason = [String: Int]()
        for failure in failures {
            try insert.execute(arguments: [
                requestSeq, failure.token.storageKey, failure.reason, failure.status, Millis.from(failure.at),
            ])
            if db.changesCount > 0 { byReason[failure.reason, default: 0] += 1 }
        }
        for (reason, count) in byReason { try addFailureCount(count, reason: reason, requestSeq: requestSeq, in: db) }
    }

    static func addFailureCount(_ count: Int, reason: String, requestSeq: Int64, in db: Database) throws {
        guard count > 0 else { return }
        try db.cachedStatement(
            sql: """
                INSERT INTO failure_count (request_seq, reason, count) VALUES (?, ?, ?)
                ON CONFLICT (request_seq, reason) DO UPDATE SET count = count + excluded.count
                """
        ).execute(arguments: [requestSeq, reason, count])
    }

    /// Marks done the requests of `rows` (as ``finishIfDone(requestSeq:nowMs:recording:completion:deferringMark:in:)``
    /// builds them) in one statement, as each one's own `UPDATE` would.
    static func markFinished(_ rows: [String], in db: Database) throws {
        if rows.isEmpty { return }
        try db.cachedStatement(
            sql: """
                UPDATE request SET state = j.value ->> 1, finished_at = j.value ->> 2,
                    last_apns_id = coalesce(j.value ->> 3, last_apns_id)
                FROM json_each(?) j
                WHERE request.seq = j.value ->> 0
                """
        ).execute(arguments: ["[" + rows.joined(separator: ",") + "]"])
    }

    /// Marks the request done if all its targets are cut, all its chunks done and no retry pending: the
    /// steps of ``RequestFinish``, each with its statements. With `apnsID`, the request's last apns-id is
    /// set in the statement that marks it done; answers whether it was (false: not done, nothing written).
    /// With `completion`, the completion read is the caller's, made in this transaction after the
    /// request's last write before this call (``completionRows(requestSeqs:in:)``).
    @discardableResult
    static func finishIfDone(
        requestSeq: Int64,
        nowMs: Int64,
        recording apnsID: String? = nil,
        completion: CompletionRow? = nil,
        deferringMark deferMark: ((String) -> Void)? = nil,
        in db: Database
    ) throws
        -> Bool
    {
        var finish = RequestFinish(seq: requestSeq, nowMillis: nowMs)
        var action = finish.start()
        var marked = false
        // From the completion read: whether a removed target of the request is recorded at all.
        var hasRemovedTargets = true
        while true {
            switch action {
            case .readCompletion where completion != nil:
                hasRemovedTargets = completion?.hasRemovedTargets ?? true
                action = finish.completionRead(completion?.completion)
            case .readCompletion(let seq):
                let row = try Row.fetchOne(
                    try db.cachedStatement(
                        sql: """
                            SELECT r.state, r.cut_done,
                                EXISTS (
                                    SELECT 1 FROM chunk c
                                    WHERE c.request_seq = r.seq AND c.state = \(ChunkCode.open.rawValue)),
                                EXISTS (SELECT 1 FROM retry WHERE request_seq = r.seq),
                                EXISTS (SELECT 1 FROM request_removed WHERE request_seq = r.seq)
                            FROM request r WHERE r.seq = ?
                            """
                    ),
                    arguments: [seq]
                )
                hasRemovedTargets = row.map { $0[4] } ?? true
                action = finish.completionRead(
                    row.map {
                        RequestCompletion(state: $0[0], cutDone: $0[1], hasOpenChunks: $0[2], hasPendingRetries: $0[3])
                    }
                )
            case .markFinished(let seq, let final, let nowMs) where deferMark != nil:
                // [seq, state, finished at, last apns-id or null]: ``markFinished(_:in:)`` writes it.
                deferMark?("[\(seq),\(final.rawValue),\(nowMs),\(apnsID.map(Payload.jsonStringLiteral) ?? "null")]")
                marked = true
                action = finish.marked()
            case .markFinished(let seq, let final, let nowMs):
                try db.cachedStatement(
                    sql: """
                        UPDATE request SET state = ?, finished_at = ?, last_apns_id = coalesce(?, last_apns_id)
                        WHERE seq = ?
                        """
                )
                .bindAndExecute { row in
                    row.bind(final.rawValue)
                    row.bind(nowMs)
                    row.bind(apnsID)
                    row.bind(seq)
                }
                marked = true
                action = finish.marked()
            case .forgetRemovedTargets(let seq):
                // The read above is in this transaction, and nothing between wrote removed targets.
                if hasRemovedTargets { try forgetRemovedTargets(requestSeq: seq, in: db) }
                action = finish.forgotten()
            case .finished:
                return marked
            }
        }
    }
}
