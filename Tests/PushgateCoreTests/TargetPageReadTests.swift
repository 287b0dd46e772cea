import Foundation
import PushgateCore
import Testing

@Suite("Target page steps: a chunk's request, its rows, and the removed members of its range")
struct TargetPageReadTests {
    static func chunk(_ kind: WorkChunk.Kind, after: Int64 = 10, through: Int64 = 20) -> WorkChunk {
        WorkChunk(
            id: 4,
            requestID: try! RequestID("r"),
            kind: kind,
            after: after,
            through: through,
            progress: after,
            leaseGeneration: 1,
            leaseExpiresAt: Date(timeIntervalSince1970: 1_800_000_000),
            isTakeover: false
        )
    }

    static let token = String(repeating: "ab", count: 32)
    static let request = TargetPageRead.Request(seq: 3, app: "app", createdAt: 500, groupIDs: [7, 8])

    @Test("a chunk read to its end answers an empty last page without a read")
    func readToItsEnd() throws {
        var read = try TargetPageRead(chunk: Self.chunk(.deviceRange), after: 20, limit: 5)
        #expect(try read.start() == .finished(TargetPage(targets: [], scannedThrough: 20, isEnd: true)))
    }

    @Test("group members: the removed members of the range read add to the skipped ones, in order, with their services")
    func members() throws {
        var read = try TargetPageRead(chunk: Self.chunk(.deviceRange), after: 12, limit: 3)
        #expect(try read.start() == .readRequest(chunkID: 4, groups: true))
        let scan = try TargetScan(chunk: Self.chunk(.deviceRange), after: 12, limit: 3)
        #expect(
            try read.requestRead(Self.request) == .readDeviceTargets(groupIDs: [7, 8], scan, invalidatedSince: 500)
        )
        // A full page ends at its last row: the removed members are read up to it.
        #expect(
            try read.rowsRead([(13, Self.token, false), (15, Self.token, true), (17, Self.token, false)])
                == .readRemovedTargets(seq: 3, after: 12, through: 17)
        )
        let target = DeliveryTarget(cursor: 13, token: try StoredForm.deviceToken(Self.token))
        let last = DeliveryTarget(cursor: 17, token: try StoredForm.deviceToken(Self.token))
        #expect(
            read.removedRead([(14, .fcm), (16, .webpush)])
                == .finished(
                    TargetPage(
                        targets: [target, last],
                        scannedThrough: 17,
                        isEnd: false,
                        skipped: [14, 15, 16],
                        skippedPlatforms: [.fcm, .apns, .webpush]
                    )
                )
        )
    }

    @Test("direct tokens: the request's positions, no removed targets to read")
    func tokens() throws {
        var read = try TargetPageRead(chunk: Self.chunk(.directTokens, after: 0, through: 2), after: 0, limit: 5)
        #expect(try read.start() == .readRequest(chunkID: 4, groups: false))
        let scan = try TargetScan(chunk: Self.chunk(.directTokens, after: 0, through: 2), after: 0, limit: 5)
        #expect(
            try read.requestRead(Self.request)
                == .readTokenTargets(seq: 3, app: "app", scan, invalidatedSince: 500)
        )
        #expect(try read.rowsRead([]) == .finished(TargetPage(targets: [], scannedThrough: 2, isEnd: true)))
    }

    @Test("an unknown chunk is an invalid argument")
    func unknownChunk() throws {
        var read = try TargetPageRead(chunk: Self.chunk(.deviceRange), after: 0, limit: 5)
        _ = try read.start()
        #expect(throws: StoreError.invalidArgument("unknown chunk 4")) { try read.requestRead(nil) }
    }

    @Test("the next wake-up: the earliest retry, lease end or expiration (1 ms after it); nil with none")
    func nextWakeUp() {
        #expect(LedgerArithmetic.nextWakeUp(retryDue: nil, leaseEnd: nil, expiration: nil) == nil)
        #expect(
            LedgerArithmetic.nextWakeUp(retryDue: 5_000, leaseEnd: 4_000, expiration: 3)
                == Date(timeIntervalSince1970: 3.001)
        )
        #expect(
            LedgerArithmetic.nextWakeUp(retryDue: 2_000, leaseEnd: nil, expiration: 3)
                == Date(timeIntervalSince1970: 2)
        )
    }
}
