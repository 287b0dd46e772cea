import Foundation
import PushgateCore

/// Group commit: ``DeliveryLedger/enqueue(batch:claiming:)`` answers every request of a batch as
/// ``DeliveryLedger/enqueue(_:)`` alone would (a refusal writes nothing of that request and nothing is
/// lost of the others), claims at most one chunk per new request with their first pages; and
/// ``DeliveryLedger/recordProgress(batch:)`` checks each chunk's lease on its own.
enum BatchChecks {
    typealias F = Fixture

    static func batchAnswersEachRequestAsAloneWould(_ store: any PushStore) async throws {
        try await F.register(store, 1...3, in: "g")
        try await F.register(store, 4...4, in: "h")
        _ = try await store.enqueue(F.request("taken", groups: ["g"], at: 1))
        _ = try await store.enqueue(IdempotencyChecks.keyed("keyed", groups: ["g"], at: 1))
        var conflicting = IdempotencyChecks.keyed("conflicting", groups: ["g"], at: 2)
        conflicting.idempotency = Idempotency(key: IdempotencyChecks.key, requestBytes: IdempotencyChecks.otherBody)
        let batch = [
            F.request("ok1", groups: ["g"], at: 2),
            F.request("allUnknown", groups: ["missing"], at: 2),
            F.request("taken", groups: ["g"], at: 2),
            IdempotencyChecks.keyed("replay", groups: ["g"], at: 2),
            conflicting,
            F.request("noTargets", at: 2),
            F.request("ok2", groups: ["h", "missing"], at: 2),
            F.request("ok1", groups: ["h"], at: 2),
        ]
        let outcome = try await store.enqueue(batch: batch, claiming: nil)
        try expectEqual(outcome.results.count, batch.count, "one answer per request")
        try expectEqual(outcome.claimed.isEmpty, true, "no claim asked, none made")
        func answer(_ index: Int) -> EnqueueResult? { try? outcome.results[index].get() }
        func code(_ index: Int) -> StoreError.Code? {
            guard case .failure(let error) = outcome.results[index] else { return nil }
            return error.code
        }
        try expectEqual(answer(0), EnqueueResult(id: F.requestID("ok1"), targetCount: 3), "ok1 is stored")
        try expectEqual(code(1), .unknownGroup, "every group unknown")
        try expectEqual(code(2), .duplicateRequestID, "an id stored before the batch")
        try expectEqual(
            answer(3),
            EnqueueResult(id: F.requestID("keyed"), targetCount: 3, isReplay: true),
            "a retry answers the stored request"
        )
        try expectEqual(code(4), .idempotencyKeyReused, "the key with another body")
        try expectEqual(code(5), .noTargets, "no group and no device")
        try expectEqual(
            answer(6),
            EnqueueResult(id: F.requestID("ok2"), targetCount: 1, unknownGroups: ["missing"]),
            "ok2 is stored, its unknown group listed"
        )
        try expectEqual(code(7), .duplicateRequestID, "an id stored earlier in the same batch")
        for name in ["allUnknown", "replay", "conflicting", "noTargets"] {
            try expectEqual(try await store.report(F.requestID(name)) == nil, true, "\(name) wrote nothing")
        }
        let ok1 = try unwrap(try await store.request(F.requestID("ok1")), "ok1 is stored")
        try expectEqual(ok1.groups, ["g"], "ok1 is the batch's first request with that id, not the last")
        let sent = try await F.deliverAll(store, now: F.at(3))
        try expectEqual(sent.count, 3 + 3 + 3 + 1, "taken, keyed, ok1 and ok2 reach their devices once each")
        for name in ["taken", "keyed", "ok1", "ok2"] {
            try expectEqual(try await store.report(F.requestID(name))?.state, .done, "\(name) is done")
        }
    }

    static func batchClaimsAtMostOneChunkPerNewRequest(_ store: any PushStore) async throws {
        for number in 1...4 { try await F.register(store, number...number, in: "u\(number)") }
        _ = try await store.enqueue(F.request("stored", groups: ["u4"], at: 1))
        let lease = LeaseWindow(owner: F.instanceA, now: F.at(2), duration: F.lease)
        let batch = (1...3).map { F.request("r\($0)", groups: ["u\($0)"], at: 2) }
        let outcome = try await store.enqueue(
            batch: batch + [F.request("refused", groups: ["missing"], at: 2)],
            claiming: BatchClaim(lease: lease, chunkSize: 10, pageLimit: 10, maximumChunks: 8)
        )
        for (index, name) in ["r1", "r2", "r3"].enumerated() {
            try expectEqual(try? outcome.results[index].get().targetCount, 1, "\(name) is stored")
        }
        // A store may claim nothing; what it claims is leased as a claim, and at most one chunk per new request.
        try expect(outcome.claimed.count <= 3, "at most one chunk per new request (\(outcome.claimed.count))")
        var sent = [RequestID: [DeviceToken]]()
        for claimed in outcome.claimed {
            try expectEqual(claimed.chunk.leaseExpiresAt, F.at(32), "leased as a claim")
            try expectEqual(claimed.chunk.isTakeover, false, "a fresh chunk")
            let page = try await store.targets(of: claimed.chunk, after: claimed.chunk.progress, limit: 10)
            try expectEqual(claimed.firstPage, page, "its first page, as read afterwards")
            sent[claimed.chunk.requestID, default: []] += try await F.deliver(
                claimed.chunk,
                store: store,
                now: F.at(3)
            )
        }
        try expectEqual(
            Set(outcome.claimed.map(\.chunk.requestID)).count,
            outcome.claimed.count,
            "one chunk each of different requests"
        )
        while let chunk = try await store.claimChunk(
            owner: F.instanceB,
            now: F.at(3),
            leaseDuration: F.lease,
            chunkSize: 10
        ) {
            sent[chunk.requestID, default: []] += try await F.deliver(
                chunk,
                store: store,
                owner: F.instanceB,
                now: F.at(3)
            )
        }
        for number in 1...3 {
            try expectEqual(sent[F.requestID("r\(number)")], [F.token(number)], "r\(number): its device, once")
        }
        try expectEqual(sent[F.requestID("stored")], [F.token(4)], "the request stored before: its device, once")

        let limited = try await store.enqueue(
            batch: (5...7).map { F.request("s\($0)", groups: ["u1"], at: 4) },
            claiming: BatchClaim(
                lease: LeaseWindow(owner: F.instanceA, now: F.at(4), duration: F.lease),
                chunkSize: 10,
                pageLimit: 10,
                maximumChunks: 1
            )
        )
        try expect(limited.claimed.count <= 1, "at most maximumChunks claimed (\(limited.claimed.count))")
    }

    static func batchOfProgressChecksEachLease(_ store: any PushStore) async throws {
        // B's lease runs out and another instance takes its chunk over: A's records of it are refused.
        let (chunkA, chunkB) = try await chunksOfRaAndRb(store, expiring: "rb")
        let lease = LeaseWindow(owner: F.instanceA, now: F.at(41), duration: F.lease)
        let results = await store.recordProgress(batch: [
            completing(chunkB, lease),
            completing(chunkA, lease),
        ])
        try expectEqual(results.count, 2, "one answer per record")
        try expectEqual(try? results[0].get(), .leaseLost, "rb's chunk is another holder's now")
        try expectEqual(try? results[1].get(), .chunkCompleted, "ra's chunk is recorded and completed")
        try expectEqual(try await store.report(F.requestID("ra"))?.state, .done, "ra is done")
        try expectEqual(try await store.report(F.requestID("ra"))?.accepted, 1, "ra's device counted")
        let rb = try unwrap(try await store.report(F.requestID("rb")), "rb's report")
        try expectEqual(rb.accepted, 0, "nothing of the refused record was written")
        try expectEqual(rb.state == .done, false, "rb is not done")
        try expectEqual(await store.recordProgress(batch: []).isEmpty, true, "an empty batch answers nothing")
    }

    /// A batch of records of different requests finishes each as the records alone would: a request whose
    /// last chunk completes is done with its last apns-id, one with a retry pending or a chunk unfinished
    /// is not (group commit reads the chunks and the completions once for the batch).
    static func batchOfProgressFinishesEachRequestAsAloneWould(_ store: any PushStore) async throws {
        try await F.register(store, 1...1, in: "a")
        try await F.register(store, 2...2, in: "b")
        try await F.register(store, 3...4, in: "c")
        for (name, group) in [("ra", "a"), ("rb", "b"), ("rc", "c")] {
            _ = try await store.enqueue(F.request(name, groups: [group], at: 1))
        }
        let chunks = try await claimAll(store)
        let chunkA = try unwrap(chunks[F.requestID("ra")], "ra's chunk")
        let chunkB = try unwrap(chunks[F.requestID("rb")], "rb's chunk")
        let chunkC = try unwrap(chunks[F.requestID("rc")], "rc's chunk")
        let firstOfC = try await store.targets(of: chunkC, after: chunkC.progress, limit: 1)
        let lease = LeaseWindow(owner: F.instanceA, now: F.at(2), duration: F.lease)
        let retry = RetryEntry(token: F.token(2), attempt: 1, nextAttemptAt: F.at(5), reason: "InternalServerError")
        let results = await store.recordProgress(batch: [
            ProgressRecord(
                ChunkProgress(
                    chunk: chunkA,
                    through: chunkA.through,
                    accepted: 1,
                    lastAPNsID: "apns-a",
                    completesChunk: true
                ),
                renewing: lease
            ),
            ProgressRecord(
                ChunkProgress(chunk: chunkB, through: chunkB.through, retries: [retry], completesChunk: true),
                renewing: lease
            ),
            ProgressRecord(
                ChunkProgress(chunk: chunkC, through: firstOfC.scannedThrough, accepted: 1, lastAPNsID: "apns-c"),
                renewing: lease
            ),
        ])
        try expectEqual(try? results[0].get(), .chunkCompleted, "ra's chunk completed")
        try expectEqual(try? results[1].get(), .chunkCompleted, "rb's chunk completed")
        try expectEqual(try? results[2].get(), .recorded(leaseExpiresAt: F.at(32)), "rc's progress recorded")
        let ra = try unwrap(try await store.report(F.requestID("ra")), "ra's report")
        try expectEqual(ra.state, .done, "ra is done")
        try expectEqual(ra.lastAPNsID, "apns-a", "ra's last apns-id is the completing record's")
        let rb = try unwrap(try await store.report(F.requestID("rb")), "rb's report")
        try expectEqual(rb.state == .done, false, "rb waits for its retry")
        try expectEqual(rb.pendingRetries, 1, "rb's retry is pending")
        let rc = try unwrap(try await store.report(F.requestID("rc")), "rc's report")
        try expectEqual(rc.state == .done, false, "rc has a device left")
        try expectEqual(rc.accepted, 1, "rc's first device counted")
        try expectEqual(rc.lastAPNsID, "apns-c", "rc's apns-id recorded without its completion")

        let later = LeaseWindow(owner: F.instanceA, now: F.at(3), duration: F.lease)
        let rest = await store.recordProgress(batch: [
            completing(chunkC, later),
            completing(chunkA, later),
        ])
        try expectEqual(try? rest[0].get(), .chunkCompleted, "rc's chunk completed")
        let rcDone = try unwrap(try await store.report(F.requestID("rc")), "rc's report")
        try expectEqual(rcDone.state, .done, "rc is done")
        try expectEqual(rcDone.accepted, 2, "both of rc's devices counted")
        try expectEqual(rcDone.lastAPNsID, "apns-c", "an answer without an apns-id keeps the last one")
        try expectEqual(try await store.report(F.requestID("ra"))?.accepted, 1, "a done chunk counts nothing again")
    }

    /// One group commit of progress records and new requests (``DeliveryLedger/write(_:)``) answers each
    /// half as its own call would: the records (one completing its request, one refused for a lost lease)
    /// and then the requests (one stored and claimed, one refused for its unknown group), and the claim
    /// comes after the records (the request they finish is not claimed again).
    static func writeOfRecordsAndRequestsAnswersEachAsAloneWould(_ store: any PushStore) async throws {
        try await F.register(store, 3...3, in: "c")
        // rb's lease is renewed; ra's runs out and another instance takes its chunk over.
        let (chunkA, chunkB) = try await chunksOfRaAndRb(store, expiring: "ra")
        let lease = LeaseWindow(owner: F.instanceA, now: F.at(41), duration: F.lease)
        let written = await store.write(
            LedgerWrite(
                requests: [F.request("rc", groups: ["c"], at: 41), F.request("rx", groups: ["nobody"], at: 41)],
                claiming: BatchClaim(lease: lease, chunkSize: 10, pageLimit: 10, maximumChunks: 2),
                records: [completing(chunkA, lease), completing(chunkB, lease)]
            )
        )
        try expectEqual(written.recorded.count, 2, "one answer per record")
        try expectEqual(try? written.recorded[0].get(), .leaseLost, "ra's chunk is B's now")
        try expectEqual(try? written.recorded[1].get(), .chunkCompleted, "rb's chunk is recorded and completed")
        let enqueued = try written.enqueued.get()
        try expectEqual(enqueued.results.count, 2, "one answer per request")
        try expectEqual((try? enqueued.results[0].get())?.targetCount, 1, "rc is stored")
        let refusal: StoreError.Code? = {
            guard case .failure(let error) = enqueued.results[1] else { return nil }
            return error.code
        }()
        try expectEqual(refusal, .unknownGroup, "rx is refused: its group is unknown")
        try expectEqual(enqueued.claimed.map(\.chunk.requestID), [F.requestID("rc")], "only rc's chunk is claimed")
        try expectEqual(try await store.report(F.requestID("rb"))?.state, .done, "rb is done")
        try expectEqual(try await store.report(F.requestID("ra"))?.accepted, 0, "nothing of ra's refused record")
        try expectEqual(try await store.request(F.requestID("rx")) == nil, true, "rx is not stored")

        let recordsOnly = await store.write(LedgerWrite(records: [completing(chunkB, lease)]))
        try expectEqual((try? recordsOnly.enqueued.get())?.results.isEmpty, true, "no requests, no answers")
        try expectEqual(recordsOnly.recorded.count, 1, "the record alone is answered")
        let empty = await store.write(LedgerWrite())
        try expectEqual(empty.recorded.isEmpty && (try? empty.enqueued.get())?.results.isEmpty == true, true, "empty")
    }

    /// Requests ra (group a, one device) and rb (group b, one device), each chunk claimed by instance A at
    /// second 1; the other's lease renewed at 20, `expiring`'s runs out and instance B takes it over at 40.
    private static func chunksOfRaAndRb(
        _ store: any PushStore,
        expiring: String
    ) async throws -> (ra: WorkChunk, rb: WorkChunk) {
        try await F.register(store, 1...1, in: "a")
        try await F.register(store, 2...2, in: "b")
        _ = try await store.enqueue(F.request("ra", groups: ["a"], at: 1))
        _ = try await store.enqueue(F.request("rb", groups: ["b"], at: 1))
        let chunks = try await claimAll(store)
        let chunkA = try unwrap(chunks[F.requestID("ra")], "ra's chunk")
        let chunkB = try unwrap(chunks[F.requestID("rb")], "rb's chunk")
        let (kept, lost) = expiring == "ra" ? (chunkB, chunkA) : (chunkA, chunkB)
        _ = try await store.recordProgress(
            ChunkProgress(chunk: kept, through: kept.progress),
            owner: F.instanceA,
            now: F.at(20),
            leaseDuration: F.lease
        )
        let takenOver = try unwrap(
            try await store.claimChunk(owner: F.instanceB, now: F.at(40), leaseDuration: F.lease, chunkSize: 10),
            "\(expiring)'s expired chunk is taken over"
        )
        try expectEqual(takenOver.id, lost.id, "the expired chunk is \(expiring)'s")
        return (chunkA, chunkB)
    }

    /// Every chunk there is to claim, claimed by instance A at second 1, by request.
    private static func claimAll(_ store: any PushStore) async throws -> [RequestID: WorkChunk] {
        var chunks = [RequestID: WorkChunk]()
        while let chunk = try await store.claimChunk(
            owner: F.instanceA,
            now: F.at(1),
            leaseDuration: F.lease,
            chunkSize: 10
        ) {
            chunks[chunk.requestID] = chunk
        }
        return chunks
    }

    /// A record of `chunk` sent whole to its one device, completing it.
    private static func completing(_ chunk: WorkChunk, _ lease: LeaseWindow) -> ProgressRecord {
        ProgressRecord(
            ChunkProgress(chunk: chunk, through: chunk.through, accepted: 1, completesChunk: true),
            renewing: lease
        )
    }
}
