import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The pure parts of `transactional` and `hol` (docs/benchmarks.md, "Mixed traffic"): when each
/// request is due, which request a stand-in's receipt names, and what the run adds up to.

/// An open-loop schedule: request `i` is due `i / rate` seconds after the start, whatever happened
/// to the ones before it. A sender that falls behind sends what is due at once and reports how
/// late it was; it never stretches the schedule.
struct PacingSchedule: Sendable, Equatable {
    /// Requests a second.
    var rate: Double
    /// Requests in the run (`Int.max`: until told to stop).
    var total: Int

    init(rate: Double, total: Int) {
        precondition(rate > 0 && total >= 0)
        self.rate = rate
        self.total = total
    }

    /// Seconds from the start to when request `index` is due.
    func offset(of index: Int) -> Double { Double(index) / rate }

    /// The requests from `next` on that are due `elapsed` seconds after the start (empty when the
    /// next one is not due yet, or none is left).
    func due(from next: Int, elapsed: Double) -> Range<Int> {
        guard elapsed >= 0, next < total else { return next..<next }
        // Request i is due when i / rate <= elapsed; the same product as `offset`, so that a
        // request is never both not due here and overdue there.
        var end = min(total, Int(min(elapsed * rate, Double(Int.max / 2)).rounded(.down)) + 1)
        while end > next, offset(of: end - 1) > elapsed { end -= 1 }
        while end < total, offset(of: end) <= elapsed { end += 1 }
        return next..<max(next, end)
    }
}

/// The marker every timed request carries in its payload (`"bench_seq":N`), and the haproxy
/// stand-in's receipt line for it (scripts/haproxy-apns-standin.sh with LOG_ADDR).
enum BenchSequence {
    static let key = "bench_seq"
    static let marker = Array(#""bench_seq":"#.utf8)

    /// The whole number after the first `"bench_seq":` in `bytes`; nil without one.
    static func number(in bytes: some Collection<UInt8>) -> Int? {
        let bytes = Array(bytes)
        guard bytes.count > marker.count else { return nil }
        for start in 0...(bytes.count - marker.count) where bytes[start] == marker[0] {
            guard bytes[start..<(start + marker.count)].elementsEqual(marker) else { continue }
            var index = start + marker.count
            var value = 0
            var digits = 0
            while index < bytes.count, (48...57).contains(bytes[index]), digits < 18 {
                value = value * 10 + Int(bytes[index] - 48)
                index += 1
                digits += 1
            }
            return digits > 0 ? value : nil
        }
        return nil
    }

    /// A receipt line, `RECEIVED_US BODY`: the stand-in's wall clock in microseconds when the request
    /// was in, and the sequence number in its body. Nil for anything else.
    static func receipt(in line: some Collection<UInt8>) -> (receivedMicros: Int64, sequence: Int)? {
        let bytes = Array(line)
        guard let space = bytes.firstIndex(of: 32), space > 0, space <= 18 else { return nil }
        var micros: Int64 = 0
        for byte in bytes[..<space] {
            guard (48...57).contains(byte) else { return nil }
            micros = micros * 10 + Int64(byte - 48)
        }
        guard let sequence = number(in: bytes[(space + 1)...]) else { return nil }
        return (micros, sequence)
    }
}

/// Sends and receipts of one run, by sequence number (0..<capacity), both on the wall clock in
/// microseconds (the stand-in is another process: the wall clock is the one clock both read).
struct TrafficTally: Sendable {
    private(set) var sentAt: [Int64?]
    private(set) var receivedAt: [Int64?]
    private(set) var sent = 0
    private(set) var answered = 0
    /// Receipts for a sequence number already received (the stand-in saw a request twice).
    private(set) var duplicates = 0
    /// Receipts naming no request sent in this run.
    private(set) var unknown = 0
    private(set) var lastSentMicros: Int64?
    private(set) var lastReceivedMicros: Int64?

    init(capacity: Int) {
        sentAt = Array(repeating: nil, count: capacity)
        receivedAt = Array(repeating: nil, count: capacity)
    }

    mutating func sent(_ sequence: Int, atMicros micros: Int64) {
        guard sentAt.indices.contains(sequence), sentAt[sequence] == nil else { return }
        sentAt[sequence] = micros
        sent += 1
        lastSentMicros = max(lastSentMicros ?? micros, micros)
    }

    mutating func received(_ sequence: Int, atMicros micros: Int64) {
        guard receivedAt.indices.contains(sequence), sentAt[sequence] != nil else {
            unknown += 1
            return
        }
        guard receivedAt[sequence] == nil else {
            duplicates += 1
            return
        }
        receivedAt[sequence] = micros
        answered += 1
        lastReceivedMicros = max(lastReceivedMicros ?? micros, micros)
    }

    var allAnswered: Bool { answered == sent }

    /// Send → receipt of every answered request, in seconds, in sequence order.
    var latencies: [Double] {
        var values: [Double] = []
        values.reserveCapacity(answered)
        for (sent, received) in zip(sentAt, receivedAt) {
            if let sent, let received { values.append(Double(received - sent) / 1e6) }
        }
        return values
    }

    /// The last receipt after the last send, in seconds (nil before both).
    var lagOfLastAnswer: Double? {
        guard let lastSentMicros, let lastReceivedMicros else { return nil }
        return Double(lastReceivedMicros - lastSentMicros) / 1e6
    }
}

/// How far behind its schedule an open-loop sender sent (seconds per send).
struct SendLateness: Sendable {
    private(set) var values: [Double] = []

    mutating func record(_ seconds: Double) { values.append(max(0, seconds)) }

    /// Sends more than `threshold` seconds after they were due.
    func late(beyond threshold: Double) -> Int { values.reduce(0) { $0 + ($1 > threshold ? 1 : 0) } }

    var summary: String {
        let percentiles = Percentiles(values)
        guard !values.isEmpty else { return "nothing sent" }
        return "behind schedule p50 \(Format.milliseconds(percentiles.value(0.5))), "
            + "p99 \(Format.milliseconds(percentiles.value(0.99))), max \(Format.milliseconds(percentiles.maximum)); "
            + "\(Format.integer(late(beyond: 0.001))) sent more than 1 ms late, "
            + "\(Format.integer(late(beyond: 0.1))) more than 100 ms late"
    }
}

extension Percentiles {
    /// `p50 1.23 ms, p99 4.56 ms, max 7.89 ms, mean 2.00 ms (N samples)`.
    var summary: String {
        guard !sorted.isEmpty else { return "no samples" }
        return "p50 \(Format.milliseconds(value(0.5))), p99 \(Format.milliseconds(value(0.99))), "
            + "max \(Format.milliseconds(maximum)), mean \(Format.milliseconds(mean)) "
            + "(\(Format.integer(sorted.count)) samples)"
    }
}

/// The wall clock in microseconds (CLOCK_REALTIME, the clock haproxy's `date(0,us)` reads).
enum WallClock {
    static func micros() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Int64(now.tv_sec) * 1_000_000 + Int64(now.tv_nsec) / 1_000
    }
}
