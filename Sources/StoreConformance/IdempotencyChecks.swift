import Foundation
import PushgateCore

/// Requests with an idempotency key (``NotificationRequest/idempotency``): a retry within
/// ``IdempotencyKey/window`` (same app, key and fingerprint) stores nothing and answers the stored
/// request; the key with another fingerprint is refused; keys are per app; the key is stored with the
/// request, and the look-up and the insert are one transaction, so concurrent retries store one request.
enum IdempotencyChecks {
    typealias F = Fixture

    static let key = try! IdempotencyKey("order-4711 retry")
    static let body = Array(#"{"groups": ["g"], "payload": {"aps": {"alert": "hello"}}}"#.utf8)
    static let otherBody = Array(#"{"groups": ["g"], "payload": {"aps": {"alert": "HELLO"}}}"#.utf8)

    /// `F.request(name, …)` with `key` over `body`.
    static func keyed(
        _ name: String,
        groups: [String] = ["g"],
        body: [UInt8] = body,
        app: String = F.app,
        at seconds: Int = 0
    ) -> NotificationRequest {
        var request = F.request(name, groups: groups, at: seconds)
        request.app = app
        request.idempotency = Idempotency(key: key, requestBytes: body)
        return request
    }

    static let window = Int(IdempotencyKey.window.components.seconds)

    static func retryWithTheSameKeyAnswersTheStoredRequest(_ store: any PushStore) async throws {
        try await F.register(store, 1...3, in: "g")
        let first = try await store.enqueue(keyed("r1", groups: ["g", "missing"]))
        try expectEqual(first.isReplay, false, "the first request is stored")
        try expectEqual(first.targetCount, 3, "its targets")

        let retry = try await store.enqueue(keyed("r2", groups: ["g", "missing"], at: window - 1))
        try expectEqual(
            retry,
            EnqueueResult(id: F.requestID("r1"), targetCount: 3, unknownGroups: ["missing"], isReplay: true),
            "a retry within the window answers the first request as its enqueue did"
        )
        try expectEqual(try await store.request(F.requestID("r2")), nil, "the retry is not stored")
        try expectEqual(try await store.report(F.requestID("r2")), nil, "no report for it")

        let lease = LeaseWindow(owner: F.instanceA, now: F.at(2), duration: F.lease)
        let (claimedRetry, claimed) = try await store.enqueue(
            keyed("r3", groups: ["g", "missing"], at: 2),
            claiming: lease,
            chunkSize: 10,
            pageLimit: 10
        )
        try expectEqual(claimedRetry.id, F.requestID("r1"), "a retry with a claim answers the first request")
        try expectEqual(claimedRetry.isReplay, true, "as a retry")
        try expectEqual(claimed, nil, "and claims nothing")
        try expectEqual(try await store.request(F.requestID("r3")), nil, "not stored either")

        let sent = try await F.deliverAll(store, now: F.at(3))
        try expectEqual(sent, (1...3).map(F.token), "each device once: one request was stored")
        try expectEqual(try await store.report(F.requestID("r1"))?.state, .done, "the first request is done")
        let afterDone = try await store.enqueue(keyed("r4", groups: ["g", "missing"], at: 4))
        try expectEqual(afterDone.id, F.requestID("r1"), "a retry after delivery still answers the first request")
        try expectEqual(try await F.deliverAll(store, now: F.at(5)), [], "and sends nothing again")
    }

    static func theKeyWithAnotherBodyIsRefused(_ store: any PushStore) async throws {
        try await F.register(store, 1...3, in: "g")
        _ = try await store.enqueue(keyed("r1"))
        try await expectStoreError(.idempotencyKeyReused, "the key with another body") {
            _ = try await store.enqueue(keyed("r2", body: otherBody, at: 1))
        }
        try await expectStoreError(.idempotencyKeyReused, "the same body with other targets is another body too") {
            _ = try await store.enqueue(keyed("r3", groups: ["other"], body: otherBody, at: 1))
        }
        let lease = LeaseWindow(owner: F.instanceA, now: F.at(2), duration: F.lease)
        try await expectStoreError(.idempotencyKeyReused, "the key with another body, with a claim") {
            _ = try await store.enqueue(
                keyed("r4", body: otherBody, at: 2),
                claiming: lease,
                chunkSize: 10,
                pageLimit: 10
            )
        }
        for name in ["r2", "r3", "r4"] {
            try expectEqual(try await store.request(F.requestID(name)), nil, "\(name) is not stored")
        }
        let chunk = try unwrap(
            try await store.claimChunk(owner: F.instanceB, now: F.at(3), leaseDuration: F.lease, chunkSize: 10),
            "the first request's work is free: the refused enqueue leased nothing"
        )
        try expectEqual(chunk.requestID, F.requestID("r1"), "r1's chunk")
        try expectEqual(chunk.isTakeover, false, "never leased before")
    }

    static func keysArePerApp(_ store: any PushStore) async throws {
        try await F.register(store, 1...2, in: "g")
        _ = try await store.register(Registration(app: "other", token: F.token(9), group: "g", at: F.at(0)))
        let mine = try await store.enqueue(keyed("r1"))
        let theirs = try await store.enqueue(keyed("r2", app: "other", at: 1))
        try expectEqual(mine.isReplay, false, "stored for the first app")
        try expectEqual(theirs.isReplay, false, "the same key and body for another app is another request")
        try expectEqual(theirs.id, F.requestID("r2"), "stored under its own id")
        try expectEqual(theirs.targetCount, 1, "with its app's targets")
        try expectEqual(try await store.enqueue(keyed("r3", app: "other", at: 2)).id, F.requestID("r2"), "retried")
        try expectEqual(try await store.enqueue(keyed("r4", at: 2)).id, F.requestID("r1"), "retried")
        let sent = try await F.deliverAll(store, now: F.at(3))
        try expectEqual(Set(sent), Set([1, 2, 9].map(F.token)), "both requests delivered, once each")
        try expectEqual(sent.count, 3, "no device twice")
    }

    static func theKeyAndFingerprintAreStoredWithTheRequest(_ store: any PushStore) async throws {
        try await F.register(store, 1...2, in: "g")
        let request = keyed("r1")
        _ = try await store.enqueue(request)
        let stored = try unwrap(try await store.request(request.id), "the request")
        try expectEqual(stored.idempotency, request.idempotency, "its key and fingerprint read back")
        try expectEqual(stored, request, "the whole request reads back unchanged")
        _ = try await store.enqueue(F.request("plain", groups: ["g"], at: 1))
        try expectEqual(try await store.request(F.requestID("plain"))?.idempotency, nil, "a request without a key")
    }

    static func theKeyIsFreeAfterItsWindow(_ store: any PushStore) async throws {
        try await F.register(store, 1...2, in: "g")
        _ = try await store.enqueue(keyed("r1"))
        let late = try await store.enqueue(keyed("r2", body: otherBody, at: window))
        try expectEqual(late.isReplay, false, "24 h after the first request its key names nothing: a new request")
        try expectEqual(late.id, F.requestID("r2"), "stored under its own id")
        try expectEqual(
            try await store.request(F.requestID("r1"))?.idempotency,
            nil,
            "the old request gave up its key to the new one"
        )
        try expectEqual(
            try await store.request(F.requestID("r2"))?.idempotency,
            Idempotency(key: key, requestBytes: otherBody),
            "the new request holds it"
        )
        try expectEqual(
            try await store.enqueue(keyed("r3", body: otherBody, at: window + 1)).id,
            F.requestID("r2"),
            "a retry now answers the new request"
        )
        try await expectStoreError(.idempotencyKeyReused, "and the old body is another body") {
            _ = try await store.enqueue(keyed("r4", at: window + 1))
        }
        let sent = try await F.deliverAll(store, now: F.at(window + 2))
        try expectEqual(sent, [1, 2, 1, 2].map(F.token), "two requests, each device once per request")
    }

    /// Many requests with one key at once (half with a claim): one is stored, every other answers it.
    static func concurrentRequestsWithOneKeyStoreOne(_ store: any PushStore) async throws {
        try await F.register(store, 1...3, in: "g")
        let count = 12
        let results = try await withThrowingTaskGroup(of: EnqueueResult.self) { group in
            for index in 0..<count {
                group.addTask {
                    let request = keyed("c\(index)", at: 1)
                    if index.isMultiple(of: 2) { return try await store.enqueue(request) }
                    let lease = LeaseWindow(owner: F.instanceA, now: F.at(1), duration: F.lease)
                    return try await store.enqueue(request, claiming: lease, chunkSize: 10, pageLimit: 10).stored
                }
            }
            var results = [EnqueueResult]()
            for try await result in group { results.append(result) }
            return results
        }
        let stored = results.filter { !$0.isReplay }
        try expectEqual(stored.count, 1, "exactly one request is stored")
        try expectEqual(Set(results.map(\.id)), [stored[0].id], "every request answers with its id")
        try expectEqual(Set(results.map(\.targetCount)), [3], "and its target count")
        var found = [RequestID]()
        for index in 0..<count where try await store.request(F.requestID("c\(index)")) != nil {
            found.append(F.requestID("c\(index)"))
        }
        try expectEqual(found, [stored[0].id], "the store holds that one request and no other")
        // Whatever was claimed with the enqueue is released by the owner, then everything is delivered.
        try await store.releaseLeases(owner: F.instanceA, now: F.at(2))
        let sent = try await F.deliverAll(store, now: F.at(2))
        try expectEqual(sent, (1...3).map(F.token), "each device once")
    }
}
