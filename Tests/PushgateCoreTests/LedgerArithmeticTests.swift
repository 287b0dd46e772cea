import PushgateCore
import Testing

@Suite("Ledger arithmetic: chunk cutting, unknown groups, expiry")
struct LedgerArithmeticTests {
    typealias L = LedgerArithmetic

    static func cursor(
        tokenCut: Int64 = 0,
        tokenCount: Int64 = 0,
        groupCut: Int64 = 0,
        bound: Int64 = 0,
        hasGroups: Bool = true
    )
        -> L.CutCursor
    {
        L.CutCursor(tokenCut: tokenCut, tokenCount: tokenCount, groupCut: groupCut, bound: bound, hasGroups: hasGroups)
    }

    @Test("direct tokens are cut first, a chunk size at a time; the last token chunk ends the cut only without groups")
    func tokensFirst() {
        #expect(
            L.nextCut(Self.cursor(tokenCount: 5, bound: 100), chunkSize: 2)
                == .tokens(.init(.directTokens, after: 0, through: 2, cutDone: false))
        )
        #expect(
            L.nextCut(Self.cursor(tokenCut: 4, tokenCount: 5, bound: 100), chunkSize: 2)
                == .tokens(.init(.directTokens, after: 4, through: 5, cutDone: false))
        )
        #expect(
            L.nextCut(Self.cursor(tokenCut: 4, tokenCount: 5, hasGroups: false), chunkSize: 2)
                == .tokens(.init(.directTokens, after: 4, through: 5, cutDone: true))
        )
        #expect(
            L.nextCut(Self.cursor(tokenCut: 5, tokenCount: 5, groupCut: 7, bound: 100), chunkSize: 2)
                == .members(.init(after: 7, bound: 100, limit: 2))
        )
    }

    static func range(_ after: Int64, _ through: Int64, _ cutDone: Bool) -> L.Cut {
        L.Cut(.deviceRange, after: after, through: through, cutDone: cutDone)
    }

    @Test("a full page of members ends the chunk at its last id; a short page covers the rest up to the bound")
    func deviceRanges() {
        #expect(
            L.MemberScan(after: 10, bound: 100, limit: 3).cut(found: (3, 40))
                == Self.range(10, 40, false)
        )
        #expect(
            L.MemberScan(after: 10, bound: 100, limit: 3).cut(found: (2, 40))
                == Self.range(10, 100, true)
        )
        #expect(
            L.MemberScan(after: 10, bound: 100, limit: 3).cut(found: (3, 100))
                == Self.range(10, 100, true)
        )
        #expect(L.MemberScan(after: 10, bound: 100, limit: 3).cut(found: (0, nil)) == nil)
    }

    @Test("an expiring request never sent the rest of its open chunks, and what was not cut yet")
    func unsentRanges() {
        let open: [(kind: WorkChunk.Kind, progress: Int64, through: Int64)] = [
            (.deviceRange, 20, 30), (.directTokens, 2, 2), (.directTokens, 1, 3),
        ]
        let cursor = Self.cursor(tokenCut: 3, tokenCount: 4, groupCut: 30, bound: 50)
        #expect(
            L.unsentRanges(openChunks: open, cursor: cursor, cutDone: false) == [
                .init(kind: .deviceRange, after: 20, through: 30), .init(kind: .directTokens, after: 1, through: 3),
                .init(kind: .directTokens, after: 3, through: 4), .init(kind: .deviceRange, after: 30, through: 50),
            ]
        )
        #expect(
            L.unsentRanges(openChunks: open, cursor: cursor, cutDone: true).count == 2,
            "nothing uncut once the cut is done"
        )
    }

    @Test("unknown groups target nothing; only all-unknown groups without devices are refused")
    func unknownGroups() throws {
        let split = try TargetGroups.resolve(app: "a", groups: ["x", "b", "y"], known: ["b": 7], hasDevices: false)
        #expect(split == TargetGroups(ids: [7], unknown: ["x", "y"]))
        let direct = try TargetGroups.resolve(app: "a", groups: ["x"], known: [:], hasDevices: true)
        #expect(direct == TargetGroups(ids: [], unknown: ["x"]))
        #expect(throws: StoreError.unknownGroup(app: "a", group: "x")) {
            _ = try TargetGroups.resolve(app: "a", groups: ["x", "y"], known: [:], hasDevices: false)
        }
    }
}

@Suite("Default instance ids")
struct InstanceIDTests {
    struct Fixed: RandomNumberGenerator {
        var value: UInt64
        mutating func next() -> UInt64 { value }
    }

    @Test("a default id names the host and the process and ends in a random suffix, so two processes differ")
    func uniquePerProcess() {
        var one = Fixed(value: 0x1234_abcd)
        var two = Fixed(value: 0x0000_0042)
        #expect(InstanceID.unique(hostName: "push-1", processID: 4242, using: &one).value == "push-1-4242-1234abcd")
        #expect(InstanceID.unique(hostName: "push-1", processID: 4242, using: &two).value == "push-1-4242-00000042")
        #expect(InstanceID.unique() != InstanceID.unique())
    }
}
