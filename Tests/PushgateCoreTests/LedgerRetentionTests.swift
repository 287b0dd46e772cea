import Foundation
import PushgateCore
import Testing

@Suite("Ledger retention: which requests go, in which batches")
struct LedgerRetentionTests {
    let now = Date(timeIntervalSince1970: 1_800_000_000)
    let hour: TimeInterval = 3600

    func configuration(scan: Int = 4, requests: Int = 2, rows: Int = 10) -> LedgerRetention.Configuration {
        var configuration = LedgerRetention.Configuration(retention: .seconds(24 * 3600))
        configuration.scanLimit = scan
        configuration.requestsPerBatch = requests
        configuration.rowsPerBatch = rows
        return configuration
    }

    /// A request created `age` hours ago, finished `finished` hours ago (nil: unfinished).
    func candidate(_ seq: Int64, age: Double, finished: Double?) -> RetentionCandidate {
        RetentionCandidate(
            seq: seq,
            createdAt: now.addingTimeInterval(-age * hour),
            finishedAt: finished.map { now.addingTimeInterval(-$0 * hour) }
        )
    }

    @Test("the cutoff is the retention period before now; a request finished exactly then is kept")
    func cutoff() {
        let machine = LedgerRetention(configuration: configuration(), now: now)
        #expect(machine.cutoff == now.addingTimeInterval(-24 * hour))
        #expect(LedgerRetention.isDue(candidate(1, age: 30, finished: 24.01), cutoff: machine.cutoff))
        #expect(!LedgerRetention.isDue(candidate(1, age: 30, finished: 24), cutoff: machine.cutoff))
        #expect(!LedgerRetention.isDue(candidate(1, age: 300, finished: nil), cutoff: machine.cutoff))
    }

    @Test("unfinished and recent requests are skipped; the walk stops at the first request created after the cutoff")
    func walk() {
        var machine = LedgerRetention(configuration: configuration(), now: now)
        #expect(machine.start() == .scan(after: 0, limit: 4))
        // 1 due, 2 unfinished, 3 finished recently, 5 due: a full page, so the walk goes on.
        let first = machine.scanned([
            candidate(1, age: 50, finished: 49), candidate(2, age: 48, finished: nil),
            candidate(3, age: 40, finished: 1), candidate(5, age: 30, finished: 29),
        ])
        #expect(first == .deleteDetails([1, 5], limit: 10))
        #expect(machine.detailsDeleted(3) == .deleteRequests([1, 5]))
        #expect(machine.requestsDeleted(PrunedRows(requests: 2, rows: 8)) == .scan(after: 5, limit: 4))
        // 6 is due, 7 was created after the cutoff: 8 (due, by a skewed clock) waits for the next pass.
        let second = machine.scanned([
            candidate(6, age: 26, finished: 25), candidate(7, age: 20, finished: 19),
            candidate(8, age: 30, finished: 29),
        ])
        #expect(second == .deleteDetails([6], limit: 10))
        #expect(machine.detailsDeleted(0) == .deleteRequests([6]))
        var summary = LedgerRetention.Summary()
        summary.requests = 3
        summary.rows = 3 + 8 + 4
        summary.transactions = 4
        summary.scanned = 7
        #expect(machine.requestsDeleted(PrunedRows(requests: 1, rows: 4)) == .finished(summary))
    }

    @Test("details are deleted a bounded batch at a time until one comes back short")
    func boundedDetails() {
        var machine = LedgerRetention(configuration: configuration(rows: 10), now: now)
        _ = machine.start()
        #expect(machine.scanned([candidate(1, age: 50, finished: 49)]) == .deleteDetails([1], limit: 10))
        #expect(machine.detailsDeleted(10) == .deleteDetails([1], limit: 10))
        #expect(machine.detailsDeleted(10) == .deleteDetails([1], limit: 10))
        #expect(machine.detailsDeleted(4) == .deleteRequests([1]))
    }

    @Test("at most requestsPerBatch requests a batch; a short scan ends the walk after the last batch")
    func batches() {
        var machine = LedgerRetention(configuration: configuration(scan: 10, requests: 2), now: now)
        _ = machine.start()
        let action = machine.scanned((1...5).map { candidate($0, age: 50, finished: 49) })
        #expect(action == .deleteDetails([1, 2], limit: 10))
        #expect(machine.detailsDeleted(0) == .deleteRequests([1, 2]))
        #expect(machine.requestsDeleted(PrunedRows(requests: 2, rows: 2)) == .deleteDetails([3, 4], limit: 10))
        #expect(machine.detailsDeleted(0) == .deleteRequests([3, 4]))
        #expect(machine.requestsDeleted(PrunedRows(requests: 2, rows: 2)) == .deleteDetails([5], limit: 10))
        #expect(machine.detailsDeleted(0) == .deleteRequests([5]))
        guard case .finished(let summary) = machine.requestsDeleted(PrunedRows(requests: 1, rows: 1)) else {
            Issue.record("the pass ends")
            return
        }
        #expect(summary.requests == 5)
        #expect(summary.transactions == 6)
    }

    @Test("an empty ledger is one scan")
    func empty() {
        var machine = LedgerRetention(configuration: configuration(), now: now)
        #expect(machine.start() == .scan(after: 0, limit: 4))
        #expect(machine.scanned([]) == .finished(LedgerRetention.Summary()))
    }
}
