import Testing

@testable import pushgate_bench

@Suite("ledger-write: its options")
struct LedgerWriteOptionsTests {
    @Test("--batches takes positive sizes, comma-separated, in the order given; anything else is refused")
    func batchSizes() throws {
        #expect(try LedgerWriteCommand.parse([]).batchSizes() == [1, 16, 64, 256])
        #expect(try LedgerWriteCommand.parse(["--batches", "256, 1,64"]).batchSizes() == [256, 1, 64])
        for bad in ["", "0", "16,-1", "16,,64", "x"] {
            #expect(throws: (any Error).self, "\(bad)") { try LedgerWriteCommand.parse(["--batches", bad]) }
        }
        #expect(throws: (any Error).self) { try LedgerWriteCommand.parse(["--seconds", "0"]) }
    }
}
