import Foundation
import PushgateCore

enum FanOutChecks {
    typealias F = Fixture

    static func fanOutDedupesAcrossGroups(_ store: any PushStore) async throws {
        try await F.register(store, 1...30, in: "a")
        try await F.register(store, 20...50, in: "b")
        try await F.register(store, stride(from: 2, through: 60, by: 2), in: "c")
        let result = try await store.enqueue(
            F.request("r1", groups: ["a", "b", "c"], devices: [F.token(25), F.token(58), F.token(999)])
        )
        let expected = Set((1...50).map(F.token) + stride(from: 52, through: 60, by: 2).map(F.token) + [F.token(999)])
        try expectEqual(result.targetCount, expected.count, "target count")
        let sent = try await F.deliverAll(store, chunkSize: 7, pageSize: 3)
        try expectEqual(sent.count, Set(sent).count, "no device sent twice")
        try expectEqual(Set(sent), expected, "every target sent")
        let report = try unwrap(try await store.report(result.id), "report")
        try expectEqual(report.accepted, expected.count, "accepted")
        try expectEqual(report.state, .done, "state")
    }

    static func fanOutSkipsInvalidDevices(_ store: any PushStore) async throws {
        try await F.register(store, 1...10, in: "g")
        try await F.register(store, [20], in: "other")
        _ = try await store.invalidate(
            app: F.app,
            token: F.token(2),
            reason: .badDeviceToken,
            appleTimestamp: nil,
            at: F.at(0)
        )
        _ = try await store.invalidate(
            app: F.app,
            token: F.token(20),
            reason: .unregistered,
            appleTimestamp: F.at(0),
            at: F.at(0)
        )
        let result = try await store.enqueue(F.request("r1", groups: ["g"], devices: [F.token(20)], at: 1))
        try expectEqual(result.targetCount, 9, "target count leaves invalid devices out")
        // Invalidated after the request was stored, before fan-out reached it: skipped too.
        _ = try await store.invalidate(
            app: F.app,
            token: F.token(7),
            reason: .unregistered,
            appleTimestamp: F.at(0),
            at: F.at(2)
        )
        let sent = try await F.deliverAll(store, now: F.at(3), chunkSize: 4, pageSize: 2)
        try expectEqual(Set(sent), Set([1, 3, 4, 5, 6, 8, 9, 10].map(F.token)), "valid devices only")
        try expectEqual(sent.count, 8, "each once")
        let report = try unwrap(try await store.report(result.id), "report")
        try expectEqual(report.state, .done, "state")
        // Device 7 was a target when the request was stored; 2 and 20 never were.
        try expectEqual(report.skipped, 1, "skipped: invalidated after the request was stored, not before")
        try SkipChecks.expectBalanced(report, "skipped invalid devices")
    }

    static func fanOutSendsToUnregisteredDirectTokens(_ store: any PushStore) async throws {
        let result = try await store.enqueue(F.request("r1", devices: [F.token(1), F.token(2), F.token(1)]))
        try expectEqual(result.targetCount, 2, "target count")
        let sent = try await F.deliverAll(store, chunkSize: 1, pageSize: 1)
        try expectEqual(sent, [F.token(1), F.token(2)], "direct tokens, in the order given, once each")
        try expectEqual(try await store.device(app: F.app, token: F.token(1)), nil, "sending does not register")
        try expectEqual(try await store.report(result.id)?.state, .done, "state")
    }

    static func devicesRegisteredAfterEnqueueAreNotTargeted(_ store: any PushStore) async throws {
        try await F.register(store, 1...5, in: "g")
        let result = try await store.enqueue(F.request("r1", groups: ["g"], at: 1))
        try await F.register(store, 6...8, in: "g", at: 2)
        let sent = try await F.deliverAll(store, now: F.at(3), chunkSize: 2)
        try expectEqual(Set(sent), Set((1...5).map(F.token)), "the group as it was when the request was stored")
        try expectEqual(result.targetCount, 5, "target count")
    }

    static func devicesLeavingAGroupBeforeFanOutAreSkipped(_ store: any PushStore) async throws {
        try await F.register(store, 1...7, in: "g")
        try await F.register(store, [4], in: "h")
        let result = try await store.enqueue(F.request("r1", groups: ["g", "h"], at: 1))
        try expectEqual(result.targetCount, 7, "target count")
        _ = try await store.unassign(app: F.app, token: F.token(2), group: "g")
        _ = try await store.unassign(app: F.app, token: F.token(4), group: "g")  // still in h
        _ = try await store.removeDevice(app: F.app, token: F.token(5))
        _ = try await store.unassign(app: F.app, token: F.token(6), group: "g")
        try await F.register(store, [6], in: "g", at: 1)  // back before fan-out reaches it
        let sent = try await F.deliverAll(store, now: F.at(2), chunkSize: 2, pageSize: 2)
        try expectEqual(Set(sent), Set([1, 3, 4, 6, 7].map(F.token)), "the groups as fan-out finds them")
        try expectEqual(sent.count, 5, "each once")
        let report = try unwrap(try await store.report(result.id), "report")
        try expectEqual(report.state, .done, "state")
        try expectEqual(report.skipped, 2, "skipped: 2 (unassigned) and 5 (removed); 4 and 6 are still members")
        try SkipChecks.expectBalanced(report, "devices leaving a group")
    }

    static func targetPagesRespectTheLimitAndTheChunk(_ store: any PushStore) async throws {
        try await F.register(store, 1...20, in: "g")
        for number in [3, 4, 5, 6, 7] {
            _ = try await store.invalidate(
                app: F.app,
                token: F.token(number),
                reason: .badDeviceToken,
                appleTimestamp: nil,
                at: F.at(0)
            )
        }
        _ = try await store.enqueue(F.request("r1", groups: ["g"], at: 1))
        let chunk = try unwrap(
            try await store.claimChunk(owner: F.instanceA, now: F.at(2), leaseDuration: F.lease, chunkSize: 10),
            "chunk"
        )
        try expectEqual(chunk.kind, .deviceRange, "kind")
        try expectEqual(chunk.progress, chunk.after, "a fresh chunk starts at its beginning")
        try expectEqual(chunk.isTakeover, false, "a fresh chunk is no takeover")
        var cursor = chunk.progress
        var tokens = [DeviceToken]()
        var pages = 0
        while true {
            let page = try await store.targets(of: chunk, after: cursor, limit: 2)
            try expect(page.targets.count <= 2, "limit")
            try expect(page.scannedThrough > cursor || page.isEnd, "each page moves on")
            try expect(page.scannedThrough <= chunk.through, "within the chunk")
            tokens += page.targets.map(\.token)
            cursor = page.scannedThrough
            pages += 1
            if page.isEnd { break }
            try expect(pages < 20, "paging terminates")
        }
        try expectEqual(cursor, chunk.through, "the last page ends at the chunk's end")
        // Chunk of 10 member ids: 1...10, of which 3...7 are invalid.
        try expectEqual(tokens, [1, 2, 8, 9, 10].map(F.token), "valid members of the chunk, in order")
        let past = try await store.targets(of: chunk, after: chunk.through, limit: 5)
        try expectEqual(
            past,
            TargetPage(targets: [], scannedThrough: chunk.through, isEnd: true),
            "nothing after the end"
        )
    }

    /// 50,000 devices in three overlapping groups (0..<30k, 20k..<50k, every third one): every device
    /// exactly once, page by page, chunk by chunk.
    static func fanOutStreamsLargeGroupInPages(_ store: any PushStore) async throws {
        let total = 50_000
        for start in stride(from: 0, to: total, by: 10_000) {
            var batch = [Registration]()
            for number in start..<(start + 10_000) {
                if number < 30_000 { batch.append(F.registration(number, "a")) }
                if number >= 20_000 { batch.append(F.registration(number, "b")) }
                if number % 3 == 0 { batch.append(F.registration(number, "c")) }
            }
            _ = try await store.register(batch: batch)
        }
        let result = try await store.enqueue(F.request("big", groups: ["a", "b", "c"], at: 1))
        try expectEqual(result.targetCount, total, "target count")
        var seen = Set<DeviceToken>()
        var duplicates = 0
        var chunks = 0
        while let chunk = try await store.claimChunk(
            owner: F.instanceA,
            now: F.at(2),
            leaseDuration: F.lease,
            chunkSize: 5_000
        ) {
            chunks += 1
            var cursor = chunk.progress
            while true {
                let page = try await store.targets(of: chunk, after: cursor, limit: 1_000)
                try expect(page.targets.count <= 1_000, "page limit")
                for target in page.targets where !seen.insert(target.token).inserted { duplicates += 1 }
                let outcome = try await store.recordProgress(
                    ChunkProgress(
                        chunk: chunk,
                        through: page.scannedThrough,
                        accepted: page.targets.count,
                        completesChunk: page.isEnd
                    ),
                    owner: F.instanceA,
                    now: F.at(2),
                    leaseDuration: F.lease
                )
                try expect(outcome != .leaseLost, "lease held")
                cursor = page.scannedThrough
                if page.isEnd { break }
            }
        }
        try expectEqual(duplicates, 0, "devices sent twice")
        try expectEqual(seen.count, total, "devices sent")
        try expect(chunks >= total / 5_000, "cut into chunks of at most 5,000 (\(chunks) chunks)")
        let report = try unwrap(try await store.report(result.id), "report")
        try expectEqual(report.accepted, total, "accepted")
        try expectEqual(report.state, .done, "state")
    }
}
