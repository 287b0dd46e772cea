import Foundation
import Logging
import PushgateCore
import PushgateSQLite
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The run-time parts of `transactional` and `hol`: the stand-in's receipts, the paced senders
/// (on their own threads, so that a busy Swift concurrency pool cannot delay a send) and the
/// HTTP/1.1 client.

/// A tally shared by the sending threads and the receipt listener.
final class TrafficRecorder: Sendable {
    private let tally: Mutex<TrafficTally>

    init(capacity: Int) { tally = Mutex(TrafficTally(capacity: capacity)) }

    func sent(_ sequence: Int) {
        let now = WallClock.micros()
        tally.withLock { $0.sent(sequence, atMicros: now) }
    }

    func received(_ sequence: Int, atMicros micros: Int64) {
        tally.withLock { $0.received(sequence, atMicros: micros) }
    }

    var snapshot: TrafficTally { tally.withLock { $0 } }
    var answered: Int { tally.withLock { $0.answered } }
}

/// A UDP socket on 127.0.0.1 that the haproxy stand-in logs its receipts to (one raw syslog
/// datagram per marked request), read on a thread of its own into a ``TrafficRecorder``.
final class ReceiptListener: @unchecked Sendable {
    let port: Int
    private let fd: Int32
    private let stopped = Atomic<Bool>(false)
    private let finished = DispatchSemaphore(value: 0)
    private let recorder = Mutex<TrafficRecorder?>(nil)
    /// Datagrams that were no receipt line.
    let unreadable = Atomic<Int>(0)

    init() throws {
        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        guard fd >= 0 else { throw BenchError("socket(): \(String(cString: strerror(errno)))") }
        // Receipts come in bursts (a held answer releases many at once): a deep buffer, forced past
        // rmem_max where we may.
        var size: Int32 = 32 << 20
        if setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, socklen_t(MemoryLayout<Int32>.size)) != 0 {
            _ = setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        var timeout = timeval(tv_sec: 0, tv_usec: 100_000)
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard bound == 0, named == 0 else {
            close(fd)
            throw BenchError("receipt listener: bind: \(String(cString: strerror(errno)))")
        }
        self.fd = fd
        port = Int(UInt16(bigEndian: address.sin_port))
        let thread = Thread { [self] in readLoop() }
        thread.name = "bench-receipts"
        thread.start()
    }

    var address: String { "127.0.0.1:\(port)" }

    /// Where the receipts from now on are counted.
    func record(into recorder: TrafficRecorder?) { self.recorder.withLock { $0 = recorder } }

    private func readLoop() {
        var buffer = [UInt8](repeating: 0, count: 8_192)
        while !stopped.load(ordering: .relaxed) {
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { continue }
            if let receipt = BenchSequence.receipt(in: buffer[0..<count]) {
                recorder.withLock { $0 }?.received(receipt.sequence, atMicros: receipt.receivedMicros)
            } else {
                unreadable.add(1, ordering: .relaxed)
            }
        }
        finished.signal()
    }

    func stop() {
        guard !stopped.exchange(true, ordering: .relaxed) else { return }
        finished.wait()
        close(fd)
    }
}

/// Runs `body(index)` on `count` threads of their own and returns when all have returned.
func onThreads(_ count: Int, name: String, _ body: @escaping @Sendable (Int) -> Void) async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        let remaining = Atomic<Int>(count)
        let resume = Mutex<CheckedContinuation<Void, Never>?>(continuation)
        for index in 0..<count {
            let thread = Thread {
                body(index)
                if remaining.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 {
                    resume.withLock { $0.take() }?.resume()
                }
            }
            thread.name = "\(name)-\(index)"
            thread.start()
        }
    }
}

/// CPU time of the calling thread, in seconds.
func threadCPUSeconds() -> Double {
    var now = timespec()
    guard clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now) == 0 else { return 0 }
    return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
}

/// Sleeps this thread until `instant` (no-op when it has passed).
func sleepUntil(_ instant: ContinuousClock.Instant) {
    let wait = (instant - ContinuousClock.now).seconds
    guard wait > 0 else { return }
    var request = timespec(tv_sec: Int(wait), tv_nsec: Int((wait - Double(Int(wait))) * 1e9))
    var remaining = timespec()
    while nanosleep(&request, &remaining) != 0 && errno == EINTR { request = remaining }
}

/// One paced, open-loop sender on a thread of its own: every request goes when the schedule says,
/// however the gateway keeps up; when the thread itself is late, it sends what is due at once and
/// records how late (``SendLateness``).
enum PacedSender {
    struct Result: Sendable {
        var sent: Int
        var failedSends: Int
        var lateness: SendLateness
        var seconds: Double
    }

    /// `send(index)` for each request of `schedule` (false: the send failed); stops early once
    /// `shouldStop()` is true.
    static func run(
        _ schedule: PacingSchedule,
        start: ContinuousClock.Instant,
        shouldStop: @escaping @Sendable () -> Bool = { false },
        send: @escaping @Sendable (Int) -> Bool
    ) async -> Result {
        let result = Mutex(Result(sent: 0, failedSends: 0, lateness: SendLateness(), seconds: 0))
        await onThreads(1, name: "bench-sender") { _ in
            var next = 0
            var outcome = Result(sent: 0, failedSends: 0, lateness: SendLateness(), seconds: 0)
            while next < schedule.total, !shouldStop() {
                sleepUntil(start + .seconds(schedule.offset(of: next)))
                let now = ContinuousClock.now
                let due = schedule.due(from: next, elapsed: (now - start).seconds)
                for index in due {
                    let lateBy = (ContinuousClock.now - start).seconds - schedule.offset(of: index)
                    if send(index) { outcome.sent += 1 } else { outcome.failedSends += 1 }
                    outcome.lateness.record(lateBy)
                }
                next = max(next, due.upperBound)
            }
            outcome.seconds = (ContinuousClock.now - start).seconds
            result.withLock { $0 = outcome }
        }
        return result.withLock { $0 }
    }
}

/// One HTTP/1.1 keep-alive connection over a blocking socket: a request, then its whole answer.
/// Deliberately thin (no parsing beyond the status line and Content-Length), so that the client
/// costs about what a C client would.
final class HTTPConnection {
    private let port: Int
    private var fd: Int32 = -1
    private var pending: [UInt8] = []

    init(port: Int) throws {
        self.port = port
        try connectSocket()
    }

    private func connectSocket() throws {
        if fd >= 0 { close(fd) }
        pending = []
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw BenchError("socket(): \(String(cString: strerror(errno)))") }
        var one: Int32 = 1
        _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        var timeout = timeval(tv_sec: 30, tv_usec: 0)
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            throw BenchError("HTTP API on port \(port): connect: \(String(cString: strerror(errno)))")
        }
    }

    /// `POST path` with a JSON body; the answer's status. `beforeWrite` runs just before the request's
    /// first byte is written (the send time).
    func post(_ path: String, body: [UInt8], beforeWrite: () -> Void) throws -> Int {
        let head =
            "POST \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nContent-Type: application/json\r\n"
            + "Content-Length: \(body.count)\r\n\r\n"
        let request = Array(head.utf8) + body
        beforeWrite()
        var written = 0
        while written < request.count {
            let count = request.withUnsafeBytes { write(fd, $0.baseAddress! + written, $0.count - written) }
            guard count > 0 else { throw BenchError("HTTP API: write: \(String(cString: strerror(errno)))") }
            written += count
        }
        let (status, close) = try readAnswer()
        if close { try connectSocket() }
        return status
    }

    /// Reads one answer: its status and whether the server closes the connection after it.
    private func readAnswer() throws -> (status: Int, close: Bool) {
        let separator: [UInt8] = [13, 10, 13, 10]
        var headEnd: Int? = nil
        while headEnd == nil {
            headEnd = Self.find(separator, in: pending)
            if headEnd == nil { try fill() }
        }
        let head = String(decoding: pending[0..<headEnd!], as: UTF8.self).lowercased()
        let lines = head.split(separator: "\r\n")
        guard let statusLine = lines.first,
            let status = statusLine.split(separator: " ").dropFirst().first.flatMap({ Int($0) })
        else { throw BenchError("HTTP API: no status line in \(head.prefix(80))") }
        var length = 0
        var close = false
        for line in lines.dropFirst() {
            if line.hasPrefix("content-length:") {
                length = Int(line.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) ?? 0
            } else if line.hasPrefix("transfer-encoding:") {
                throw BenchError("HTTP API: a chunked answer; this client reads Content-Length only")
            } else if line.hasPrefix("connection:") && line.contains("close") {
                close = true
            }
        }
        let end = headEnd! + separator.count + length
        while pending.count < end { try fill() }
        pending.removeFirst(end)
        return (status, close)
    }

    private func fill() throws {
        var buffer = [UInt8](repeating: 0, count: 16_384)
        let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        guard count > 0 else {
            throw BenchError(
                count == 0 ? "HTTP API: connection closed" : "HTTP API: read: \(String(cString: strerror(errno)))"
            )
        }
        pending += buffer[0..<count]
    }

    private static func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        for start in 0...(haystack.count - needle.count) where haystack[start] == needle[0] {
            if haystack[start..<(start + needle.count)].elementsEqual(needle) { return start }
        }
        return nil
    }

    deinit { if fd >= 0 { close(fd) } }
}

/// `connections` HTTP/1.1 keep-alive clients posting `body(index)` to `POST /v1/notifications` on one
/// shared open-loop schedule: each takes the next request, waits until it is due, posts it and waits
/// for the answer. When every client is still waiting for an answer the next request goes late, and
/// that lateness is reported.
enum PacedHTTPClients {
    struct Result: Sendable {
        var sent = 0
        var accepted = 0
        /// Status → count, for answers other than 202.
        var otherStatuses: [Int: Int] = [:]
        var errors: [String] = []
        var lateness = SendLateness()
        var seconds = 0.0
        /// CPU the client threads used (each thread's own clock, so nothing else of this process counts).
        var cpuSeconds = 0.0
    }

    static func run(
        _ schedule: PacingSchedule,
        connections: Int,
        port: Int,
        start: ContinuousClock.Instant,
        body: @escaping @Sendable (Int) -> [UInt8],
        sent: @escaping @Sendable (Int) -> Void
    ) async -> Result {
        let next = Atomic<Int>(0)
        let results = Mutex<[Result]>([])
        await onThreads(connections, name: "bench-http") { _ in
            var result = Result()
            let cpuBefore = threadCPUSeconds()
            defer {
                result.cpuSeconds = threadCPUSeconds() - cpuBefore
                results.withLock { $0.append(result) }
            }
            let connection: HTTPConnection
            do {
                connection = try HTTPConnection(port: port)
            } catch {
                result.errors.append("\(error)")
                return
            }
            while true {
                let index = next.add(1, ordering: .relaxed).oldValue
                guard index < schedule.total else { break }
                let due = start + .seconds(schedule.offset(of: index))
                sleepUntil(due)
                do {
                    let status = try connection.post("/v1/notifications", body: body(index)) {
                        result.lateness.record((ContinuousClock.now - due).seconds)
                        sent(index)
                    }
                    result.sent += 1
                    if status == 202 { result.accepted += 1 } else { result.otherStatuses[status, default: 0] += 1 }
                } catch {
                    result.errors.append("\(error)")
                    return
                }
            }
        }
        var total = Result()
        for result in results.withLock({ $0 }) {
            total.sent += result.sent
            total.accepted += result.accepted
            total.otherStatuses.merge(result.otherStatuses, uniquingKeysWith: +)
            total.errors += result.errors
            total.cpuSeconds += result.cpuSeconds
            for value in result.lateness.values { total.lateness.record(value) }
        }
        total.seconds = (ContinuousClock.now - start).seconds
        return total
    }
}

extension StoreFill {
    /// `count` devices (``BenchDevices/token(_:)`` from `firstToken` on), device `i` alone in group
    /// `"\(prefix)\(i)"`: pushd's model of a user. `register(batch:)`, 20,000 per transaction.
    static func fillSingles(path: String, count: Int, prefix: String, firstToken: Int = 0) async throws -> Result {
        var configuration = SQLiteStore.Configuration()
        configuration.synchronous = .normal
        var logger = Logger(label: "pushgate.bench.fill")
        logger.logLevel = .warning
        let store = try SQLiteStore(path: path, configuration: configuration, logger: logger)
        let start = ContinuousClock.now
        let now = Date()
        var created = 0
        var next = 0
        while next < count {
            let end = min(count, next + 20_000)
            var batch: [Registration] = []
            batch.reserveCapacity(end - next)
            for index in next..<end {
                batch.append(
                    Registration(token: try BenchDevices.token(firstToken + index), group: "\(prefix)\(index)", at: now)
                )
            }
            created += try await store.register(batch: batch).filter { $0 == .created }.count
            next = end
        }
        try store.close()
        return Result(devices: count, created: created, seconds: (ContinuousClock.now - start).seconds)
    }
}
