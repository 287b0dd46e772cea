import Foundation
import PushgateCore
import Testing

@Suite("Ledger rules both stores apply to the rows they read: leases, progress, invalidation, retry outcomes")
struct LedgerRulesTests {
    static let owner = InstanceID("instance-a")
    static let at = Date(timeIntervalSince1970: 1_000)

    static func token(_ byte: String) throws -> DeviceToken { try DeviceToken(hex: String(repeating: byte, count: 32)) }

    static func chunk(generation: Int64 = 3) throws -> WorkChunk {
        WorkChunk(
            id: 7,
            requestID: try RequestID("r"),
            kind: .deviceRange,
            after: 10,
            through: 20,
            progress: 12,
            leaseGeneration: generation,
            leaseExpiresAt: at,
            isTakeover: false
        )
    }

    @Test("a lease window stores whole milliseconds: now, and now plus the duration")
    func leaseWindow() {
        let lease = LeaseWindow(owner: Self.owner, now: Date(timeIntervalSince1970: 12.3456), duration: .seconds(30))
        #expect(lease.nowMillis == 12_345)
        #expect(lease.expiresAtMillis == 42_345)
        #expect(lease.expiresAt == Date(timeIntervalSince1970: 42.345))
        let short = LeaseWindow(owner: Self.owner, now: Self.at, duration: .microseconds(1_999))
        #expect(short.expiresAtMillis == 1_000_001)
    }

    @Test("a count below one is refused with its name; a positive one passes")
    func positiveCounts() throws {
        #expect(try StoreError.positive(3, "chunk size") == 3)
        do {
            _ = try StoreError.positive(0, "chunk size")
            Issue.record("a chunk size of 0 passed")
        } catch {
            #expect(error.code == .invalidArgument && error.message == "chunk size must be positive (got 0)")
        }
    }

    @Test("progress is written only by the lease's holder in its generation while the chunk is open")
    func progressHolder() throws {
        let progress = ChunkProgress(chunk: try Self.chunk(), through: 15)
        let held: StoredForm.ChunkLease = (Self.owner.value, 3, 0, 12)
        #expect(progress.progressToStore(over: held, owner: Self.owner) == 15)
        #expect(progress.progressToStore(over: ("instance-b", 3, 0, 12), owner: Self.owner) == nil)
        #expect(progress.progressToStore(over: (nil, 3, 0, 12), owner: Self.owner) == nil)
        #expect(progress.progressToStore(over: (Self.owner.value, 4, 0, 12), owner: Self.owner) == nil)
        #expect(progress.progressToStore(over: (Self.owner.value, 3, 1, 12), owner: Self.owner) == nil)
        #expect(progress.chunkState == .open)
    }

    @Test("progress never moves back, never passes the chunk's end, and jumps to the end when the chunk completes")
    func progressBounds() throws {
        let chunk = try Self.chunk()
        let held: StoredForm.ChunkLease = (Self.owner.value, 3, 0, 16)
        #expect(ChunkProgress(chunk: chunk, through: 14).progressToStore(over: held, owner: Self.owner) == 16)
        #expect(ChunkProgress(chunk: chunk, through: 99).progressToStore(over: held, owner: Self.owner) == 20)
        let completing = ChunkProgress(chunk: chunk, through: 11, completesChunk: true)
        #expect(completing.progressToStore(over: held, owner: Self.owner) == 20)
        #expect(completing.chunkState == .done)
    }

    @Test("a taken-over chunk keeps its progress, takes the new generation and the lease's end")
    func takenOverChunk() throws {
        let lease = LeaseWindow(owner: Self.owner, now: Self.at, duration: .seconds(10))
        let chunk = try StoredForm.chunk(takenOver: (7, "r", 1, 10, 20, 14, 5), lease)
        #expect(chunk.isTakeover && chunk.kind == .directTokens && chunk.progress == 14)
        #expect(chunk.leaseGeneration == 5 && chunk.leaseExpiresAt == Date(timeIntervalSince1970: 1_010))
        #expect(throws: StoreError.self) { try StoredForm.chunk(takenOver: (7, "", 1, 10, 20, 14, 5), lease) }
    }

    @Test("invalidation writes nothing for an invalid device or one registered after the push service's timestamp")
    func invalidationRefusals() throws {
        let dead = DeviceInvalidation(token: try Self.token("ab"), reason: .unregistered, appleTimestamp: Self.at)
        #expect(dead.refusal(stateCode: 1, lastRegisteredAt: 0) == .alreadyInvalid)
        #expect(
            dead.refusal(stateCode: 0, lastRegisteredAt: 1_000_001)
                == .keptBecauseRegisteredLater(lastRegisteredAt: Date(timeIntervalSince1970: 1_000.001))
        )
        #expect(dead.refusal(stateCode: 0, lastRegisteredAt: 1_000_000) == nil)
        let bad = DeviceInvalidation(token: try Self.token("ab"), reason: .badDeviceToken, appleTimestamp: nil)
        #expect(bad.refusal(stateCode: 0, lastRegisteredAt: .max) == nil)
    }
}

@Suite("Retry outcomes: what a batch writes, worked out once for both stores")
struct RetryOutcomePlanTests {
    typealias Plan = RetryOutcomePlan
    static let owner = InstanceID("instance-a")
    static let at = Date(timeIntervalSince1970: 1_000)

    static func claim(_ request: String, _ byte: String, generation: Int64 = 2) throws -> RetryClaim {
        RetryClaim(
            requestID: try RequestID(request),
            token: try LedgerRulesTests.token(byte),
            attempt: 1,
            lastReason: "TooManyRequests",
            leaseGeneration: generation,
            leaseExpiresAt: at
        )
    }

    static func key(_ seq: Int64, _ byte: String) -> Plan.Key {
        Plan.Key(seq: seq, token: String(repeating: byte, count: 32))
    }

    static func requests() throws -> [RequestID: Plan.Request] {
        [try RequestID("r1"): (1, "app"), try RequestID("r2"): (2, "app")]
    }

    @Test("each result goes to its list; counts and failures are per request in seq order; touched requests ascend")
    func sortsResults() throws {
        let outcomes = [
            RetryOutcome(claim: try Self.claim("r2", "aa"), result: .accepted(apnsID: "id-1")),
            RetryOutcome(claim: try Self.claim("r2", "bb"), result: .accepted(apnsID: nil)),
            RetryOutcome(claim: try Self.claim("r1", "cc"), result: .failed(reason: "BadDeviceToken", status: 400)),
            RetryOutcome(
                claim: try Self.claim("r1", "dd"),
                result: .retry(nextAttemptAt: Date(timeIntervalSince1970: 1_002), reason: "ServiceUnavailable")
            ),
        ]
        let holders: [Plan.Key: Plan.Holder] = [
            Self.key(2, "aa"): (Self.owner.value, 2), Self.key(2, "bb"): (Self.owner.value, 2),
            Self.key(1, "cc"): (Self.owner.value, 2), Self.key(1, "dd"): (Self.owner.value, 2),
        ]
        let batch = RetryOutcomeBatch(outcomes, owner: Self.owner, now: Self.at)
        let plan = Plan(batch, requests: try Self.requests(), holders: holders)
        #expect(plan.removed == [Self.key(2, "aa"), Self.key(2, "bb"), Self.key(1, "cc")])
        #expect(plan.rescheduled.map(\.key) == [Self.key(1, "dd")])
        #expect(plan.rescheduled.first?.attempt == 2 && plan.rescheduled.first?.nextAttemptAt == 1_002_000)
        #expect(plan.accepted.map(\.seq) == [2] && plan.accepted.first?.1.count == 2)
        #expect(plan.accepted.first?.1.apnsID == "id-1")
        #expect(plan.failures.map(\.seq) == [1] && plan.failures.first?.1.first?.status == 400)
        #expect(plan.touchedRequests == [1, 2])
        #expect(plan.result == RetryRecordResult(applied: 4, leaseLost: []))
    }

    @Test("an outcome whose request or row is gone, held by another owner or generation, or repeated, lost its lease")
    func lostLeases() throws {
        let kept = RetryOutcome(claim: try Self.claim("r1", "aa"), result: .accepted(apnsID: nil))
        let outcomes = [
            kept,
            RetryOutcome(claim: try Self.claim("r9", "aa"), result: .accepted(apnsID: nil)),
            RetryOutcome(claim: try Self.claim("r1", "bb"), result: .accepted(apnsID: nil)),
            RetryOutcome(claim: try Self.claim("r1", "cc"), result: .accepted(apnsID: nil)),
            RetryOutcome(claim: try Self.claim("r1", "dd", generation: 1), result: .accepted(apnsID: nil)),
            kept,
        ]
        let holders: [Plan.Key: Plan.Holder] = [
            Self.key(1, "aa"): (Self.owner.value, 2), Self.key(1, "cc"): ("instance-b", 2),
            Self.key(1, "dd"): (Self.owner.value, 2),
        ]
        let token = try LedgerRulesTests.token("aa")
        let invalidation = DeviceInvalidation(token: token, reason: .unregistered, appleTimestamp: nil)
        var withInvalidation = outcomes
        withInvalidation[0].invalidation = invalidation
        let plan = Plan(
            RetryOutcomeBatch(withInvalidation, owner: Self.owner, now: Self.at),
            requests: try Self.requests(),
            holders: holders
        )
        #expect(plan.result.applied == 1)
        #expect(plan.lost == Array(outcomes.dropFirst().map(\.claim)))
        #expect(plan.removed == [Self.key(1, "aa")] && plan.touchedRequests == [1])
        #expect(plan.invalidations.map(\.app) == ["app"] && plan.invalidations.first?.1 == invalidation)
    }
}

@Suite("The shared schema, rendered in each store's dialect")
struct LedgerSchemaTests {
    /// A statement with the dialects' spellings replaced by one word each.
    static func neutral(_ statement: String) -> String {
        var text = statement
        for (spelling, word) in [
            ("BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY", "KEY"), ("INTEGER PRIMARY KEY", "KEY"),
            (" WITHOUT ROWID", ""), ("SMALLINT", "INT"), ("BIGINT", "INT"), ("INTEGER", "INT"), ("BOOLEAN", "INT"),
            ("DEFAULT FALSE", "DEFAULT 0"), ("BYTEA", "BYTES"), ("BLOB", "BYTES"),
        ] {
            text = text.replacingOccurrences(of: spelling, with: word)
        }
        return text
    }

    @Test("both dialects create the same tables, columns, keys and indexes, in the same order")
    func sameTables() {
        let postgres =
            LedgerSchema.registryAndLedger(.postgres) + [
                LedgerSchema.unknownGroups(.postgres), LedgerSchema.instances(.postgres),
            ]
        let sqlite =
            LedgerSchema.registryAndLedger(.sqlite) + [
                LedgerSchema.unknownGroups(.sqlite), LedgerSchema.instances(.sqlite),
            ]
        #expect(postgres.map(Self.neutral) == sqlite.map(Self.neutral))
        #expect(postgres.count == 17)
        #expect(postgres != sqlite)
    }

    @Test("SQLite keys generated ids by rowid and keeps composite-key tables without one; PostgreSQL has identities")
    func dialects() throws {
        let sqlite = LedgerSchema.registryAndLedger(.sqlite)
        let postgres = LedgerSchema.registryAndLedger(.postgres)
        let device = try #require(sqlite.first { $0.hasPrefix("CREATE TABLE device (") })
        #expect(device.contains("id INTEGER PRIMARY KEY,"))
        #expect(try #require(postgres.first).contains("id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"))
        let membership = try #require(sqlite.first { $0.hasPrefix("CREATE TABLE membership") })
        #expect(membership.hasSuffix(") WITHOUT ROWID"))
        #expect(!sqlite.contains { $0.hasPrefix("CREATE TABLE chunk") && $0.contains("WITHOUT ROWID") })
        #expect(!postgres.contains { $0.contains("WITHOUT ROWID") || $0.contains(" INTEGER PRIMARY KEY") })
    }
}
