import Foundation
import PushgateCore
import Testing

@Suite("Store paging shared by both stores: a chunk's target pages, a group's device pages")
struct StorePagingTests {
    static let apns = String(repeating: "ab", count: 32)
    static var chunk: WorkChunk {
        get throws {
            .cut(
                id: 1,
                of: try RequestID("r"),
                .init(.deviceRange, after: 10, through: 20, cutDone: false),
                leaseExpiresAt: Date()
            )
        }
    }

    @Test("a scan starts at the later of the cursor and the chunk's start; a limit below one is refused")
    func scanStart() throws {
        #expect(try TargetScan(chunk: Self.chunk, after: 3, limit: 5).after == 10)
        #expect(try TargetScan(chunk: Self.chunk, after: 14, limit: 5).after == 14)
        #expect(try TargetScan(chunk: Self.chunk, after: 20, limit: 5).isDone)
        #expect(try !TargetScan(chunk: try Self.chunk, after: 19, limit: 5).isDone)
        #expect(throws: StoreError.self) { try TargetScan(chunk: Self.chunk, after: 0, limit: 0) }
    }

    @Test("a full page ends at its last target; a short one scanned through the chunk's end")
    func scanPage() throws {
        let scan = try TargetScan(chunk: Self.chunk, after: 0, limit: 2)
        let full = try scan.page(found: [(11, Self.apns), (13, Self.apns)])
        #expect(full.targets.map(\.cursor) == [11, 13])
        #expect(full.scannedThrough == 13 && !full.isEnd)
        let short = try scan.page(found: [(15, Self.apns)])
        #expect(short.scannedThrough == 20 && short.isEnd)
        let none = try scan.page(found: [])
        #expect(none.targets.isEmpty && none.scannedThrough == 20 && none.isEnd)
        #expect(throws: StoreError.self) { try scan.page(found: [(12, "not a key")]) }
    }

    @Test("skipped rows are left out of the targets, listed, and count towards the limit and the scanned range")
    func scanPageWithSkipped() throws {
        let scan = try TargetScan(chunk: Self.chunk, after: 0, limit: 3)
        let full = try scan.page(rows: [(11, Self.apns, false), (12, Self.apns, true), (14, "", true)])
        #expect(full.targets.map(\.cursor) == [11])
        #expect(full.skipped == [12, 14])
        #expect(full.scannedThrough == 14 && !full.isEnd)
        let short = try scan.page(rows: [(16, Self.apns, true)])
        #expect(short.targets.isEmpty && short.skipped == [16] && short.scannedThrough == 20 && short.isEnd)
    }

    @Test("a group listing starts after its cursor's device id; a malformed cursor or limit is refused")
    func groupStart() throws {
        #expect(try GroupListing.start(after: nil, limit: 1) == 0)
        #expect(try GroupListing.start(after: GroupCursor("42"), limit: 1) == 42)
        #expect(throws: StoreError.self) { try GroupListing.start(after: GroupCursor("x"), limit: 1) }
        #expect(throws: StoreError.self) { try GroupListing.start(after: GroupCursor("-1"), limit: 1) }
        #expect(throws: StoreError.self) { try GroupListing.start(after: nil, limit: 0) }
    }

    @Test("a group page keeps `limit` rows; the extra row makes the last kept id the next cursor")
    func groupPage() throws {
        let rows: [GroupListing.Row] = [(3, Self.apns, 0, 1000), (5, Self.apns, 1, 2000), (8, Self.apns, 0, 3000)]
        let page = try GroupListing.page(rows: rows, limit: 2)
        #expect(page.devices.map(\.state) == [.valid, .invalid])
        #expect(page.devices.first?.registeredAt == Date(timeIntervalSince1970: 1))
        #expect(page.next == GroupCursor("5"))
        #expect(try GroupListing.page(rows: Array(rows.prefix(2)), limit: 2).next == nil)
    }
}
