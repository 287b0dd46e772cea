import Testing

@testable import PushgateSQLite

@Suite("The WAL's bound")
struct WALBoundTests {
    static let mebibyte: Int64 = 1 << 20
    let bound = WALBound(limitBytes: 64 << 20)

    func measure(main: Int64, wal: Int64, free: Int64) -> WALBound.Measure {
        .init(mainBytes: main * Self.mebibyte, walBytes: wal * Self.mebibyte, freeBytes: free * Self.mebibyte)
    }

    @Test("on a roomy volume: the limit, or half of a database larger than twice the limit")
    func roomyVolume() {
        #expect(bound.bytes(for: measure(main: 0, wal: 0, free: 100_000)) == 64 * Self.mebibyte)
        #expect(bound.bytes(for: measure(main: 100, wal: 10, free: 100_000)) == 64 * Self.mebibyte)
        #expect(bound.bytes(for: measure(main: 1_000, wal: 10, free: 100_000)) == 500 * Self.mebibyte)
    }

    @Test("on a small volume: a quarter of the room the WAL could still use, never below 1 MiB")
    func smallVolume() {
        // 64 MB volume, 16 MB database: 48 MiB of room, a bound of 12 MiB.
        #expect(bound.bytes(for: measure(main: 16, wal: 0, free: 48)) == 12 * Self.mebibyte)
        // The WAL's own size counts as room: the same bound as it grows.
        #expect(bound.bytes(for: measure(main: 16, wal: 8, free: 40)) == 12 * Self.mebibyte)
        #expect(bound.bytes(for: measure(main: 16, wal: 0, free: 0)) == WALBound.smallestBytes)
        // statvfs failed (-1): the WAL alone is the room.
        #expect(bound.bytes(for: .init(mainBytes: 0, walBytes: 8 * Self.mebibyte, freeBytes: -1)) == 2 * Self.mebibyte)
    }

    @Test("a commit that brings the WAL to its bound checkpoints; one below it does not")
    func afterCommit() {
        #expect(!bound.checkpointsAfterCommit(measure(main: 16, wal: 11, free: 37)))
        #expect(bound.checkpointsAfterCommit(measure(main: 16, wal: 12, free: 36)))
        #expect(bound.checkpointsAfterCommit(measure(main: 0, wal: 64, free: 100_000)))
    }

    @Test("a round checkpoints a WAL that has not grown since the last round, and not an empty one")
    func idle() {
        let wal = measure(main: 16, wal: 3, free: 40)
        #expect(WALBound.checkpointsWhenIdle(wal, walBytesAtLastRound: wal.walBytes))
        #expect(!WALBound.checkpointsWhenIdle(wal, walBytesAtLastRound: wal.walBytes - 4096))
        #expect(!WALBound.checkpointsWhenIdle(measure(main: 16, wal: 0, free: 40), walBytesAtLastRound: 0))
    }
}
