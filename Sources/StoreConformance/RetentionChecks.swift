import Foundation
import PushgateCore

/// Retention (``LedgerPruning`` run by ``LedgerPruner``): a request that finished more than the retention
/// period ago is deleted with everything that is its own, and is unknown from then on; unfinished
/// requests, recent ones and the registry stay; large requests go in bounded transactions.
enum RetentionChecks {
    typealias F = Fixture

    static let day = 24 * 60 * 60
    static let week = Duration.seconds(7 * day)

    static func pruning(_ store: any PushStore) throws -> any LedgerPruning {
        try unwrap(store as? any LedgerPruning, "the store implements LedgerPruning")
    }

    static func finishedRequestsAreDeletedAfterTheRetentionPeriod(_ store: any PushStore) async throws {
        let pruner = LedgerPruner(store: try pruning(store), configuration: .init(retention: week))
        try await F.register(store, 1...6, in: "g")
        // r1: a group, an unknown group, a direct token, an idempotency key, failures; done at 10 s.
        var first = F.request("r1", groups: ["g", "missing"], devices: [F.token(9)], expiration: .storagePolicy)
        first.idempotency = IdempotencyChecks.keyed("r1").idempotency
        _ = try await store.enqueue(first)
        try await F.deliverAll(store, now: F.at(10)) { token in
            token == F.token(2) || token == F.token(9) ? .reject("BadDeviceToken", status: 400) : .accept
        }
        // r2: stored at 20 s, still unfinished (never claimed, no expiration).
        _ = try await store.enqueue(F.request("r2", groups: ["g"], expiration: .storagePolicy, at: 20))
        try expectEqual(try await store.report(F.requestID("r1"))?.state, .done, "r1 is done")

        let early = try await pruner.prune(now: F.at(10 + 7 * day))
        try expectEqual(early.summary.requests, 0, "nothing finished more than a week before")
        try expect(try await store.report(F.requestID("r1")) != nil, "r1 is kept for its retention period")

        let pass = try await pruner.prune(now: F.at(11 + 7 * day))
        try expectEqual(pass.summary.requests, 1, "one request deleted")
        try expect(pass.summary.rows > 1, "with its rows (\(pass.summary.rows))")
        try expectEqual(try await store.report(F.requestID("r1")), nil, "r1's report is unknown")
        try expectEqual(try await store.request(F.requestID("r1")), nil, "r1 is unknown")
        try expectEqual(try await store.failures(of: F.requestID("r1"), after: nil, limit: 10), [], "its failures")
        let unfinished = try unwrap(try await store.report(F.requestID("r2")), "r2, unfinished, is kept")
        try expectEqual(unfinished.state, .queued, "r2's state")
        try expectEqual(
            try await store.device(app: F.app, token: F.token(1))?.state,
            .valid,
            "the registry is not the ledger's to delete"
        )
        // The key went with its request: the same key later stores a new request.
        var again = F.request("r3", groups: ["g"], at: 12 + 7 * day)
        again.idempotency = first.idempotency
        try expectEqual(try await store.enqueue(again).isReplay, false, "r1's key is free")
        // A second pass finds nothing more to do.
        try expectEqual(try await pruner.prune(now: F.at(12 + 7 * day)).summary.requests, 0, "nothing left to delete")
    }

    static func unfinishedRequestsAreNeverDeleted(_ store: any PushStore) async throws {
        let pruning = try pruning(store)
        try await F.register(store, 1...3, in: "g")
        _ = try await store.enqueue(F.request("r1", groups: ["g"], expiration: .storagePolicy))
        _ = try await store.enqueue(F.request("r2", groups: ["g"], expiration: .storagePolicy))
        try await F.deliverAll(store, now: F.at(1)) { _ in .retry("TooManyRequests", nextAttemptAt: F.at(2)) }
        let seqs = try await pruning.retentionScan(after: 0, limit: 10).map(\.seq)
        try expectEqual(seqs.count, 2, "two requests scanned")
        try expectEqual(try await pruning.deleteRetainedDetails(of: seqs, limit: 100), 0, "no row of theirs")
        try expectEqual(try await pruning.deleteRetainedRequests(seqs), PrunedRows(requests: 0, rows: 0), "nor them")
        let pass = try await LedgerPruner(store: pruning, configuration: .init(retention: .seconds(1)))
            .prune(now: F.at(100 * day))
        try expectEqual(pass.summary.requests, 0, "a pass deletes no unfinished request")
        try expectEqual(try await store.report(F.requestID("r1"))?.pendingRetries, 3, "r1's retries are kept")
    }

    static func largeRequestsAreDeletedInBoundedTransactions(_ store: any PushStore) async throws {
        let pruning = try pruning(store)
        try await F.register(store, 1...40, in: "g")
        _ = try await store.enqueue(F.request("big", groups: ["g"], devices: (41...45).map(F.token)))
        _ = try await store.enqueue(F.request("small", devices: [F.token(1)]))
        try await F.deliverAll(store, now: F.at(1), chunkSize: 10) { token in
            token == F.token(1) ? .accept : .reject("Unregistered", status: 410)
        }
        let big = try unwrap(try await store.report(F.requestID("big")), "big's report")
        try expectEqual(big.failed, 44, "big has 44 failures")

        // The primitive: never more than its limit a transaction, and the report stays whole meanwhile.
        let seqs = try await pruning.retentionScan(after: 0, limit: 10).map(\.seq)
        try expectEqual(try await pruning.deleteRetainedDetails(of: seqs, limit: 7), 7, "seven rows, no more")
        try expectEqual(try await store.report(F.requestID("big")), big, "the report is whole while rows go")

        var configuration = LedgerRetention.Configuration(retention: .seconds(60))
        configuration.rowsPerBatch = 7
        configuration.requestsPerBatch = 1
        configuration.scanLimit = 1
        let pass = try await LedgerPruner(store: pruning, configuration: configuration).prune(now: F.at(62))
        try expectEqual(pass.summary.requests, 2, "both requests")
        // 42 rows left of big (37 failures, 5 direct tokens): six full transactions of details, one that
        // finds none, one for the request; small: one of details (its direct token), one for itself.
        try expectEqual(pass.summary.transactions, 10, "bounded transactions")
        try expectEqual(try await store.report(F.requestID("big")), nil, "big is gone")
        try expectEqual(try await store.report(F.requestID("small")), nil, "small is gone")
        try expectEqual(try await pruning.retentionScan(after: 0, limit: 10), [], "no request is left")
    }
}
