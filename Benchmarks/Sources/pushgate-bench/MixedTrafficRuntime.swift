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
/// Deliberately thin (no parsing beyond the status line, Content-Length and Connection, all on bytes; one
/// read buffer kept for the connection's life; the request written with one `write`), so that the client
/// costs about what a C client would: `transactional --http` prints its CPU per request, and `--h2load`
/// puts h2load's beside it.
final class HTTPConnection {
    private let port: Int
    private var fd: Int32 = -1
    /// Bytes read and not yet consumed: `pending[consumed...]`.
    private var pending: [UInt8] = []
    private var consumed = 0
    private var readBuffer = [UInt8](repeating: 0, count: 16_384)
    private let headPrefix: [UInt8]

    init(port: Int) throws {
        self.port = port
        self.headPrefix = Array("Host: 127.0.0.1:\(port)\r\nContent-Type: application/json\r\nContent-Length: ".utf8)
        try connectSocket()
    }

    private func connectSocket() throws {
        if fd >= 0 { close(fd) }
        pending = []
        consumed = 0
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
        var request: [UInt8] = []
        request.reserveCapacity(headPrefix.count + path.utf8.count + body.count + 40)
        request.append(contentsOf: "POST ".utf8)
        request.append(contentsOf: path.utf8)
        request.append(contentsOf: " HTTP/1.1\r\n".utf8)
        request.append(contentsOf: headPrefix)
        request.append(contentsOf: String(body.count).utf8)
        request.append(contentsOf: "\r\n\r\n".utf8)
        request.append(contentsOf: body)
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
        var headEnd: Int? = nil
        var searched = consumed
        while headEnd == nil {
            headEnd = Self.headEnd(in: pending, from: searched)
            if headEnd == nil {
                searched = max(consumed, pending.count - 3)
                try fill()
            }
        }
        let head = HTTPAnswerHead(pending[consumed..<headEnd!])
        guard let status = head.status else {
            throw BenchError(
                "HTTP API: no status line in \(String(decoding: pending[consumed..<headEnd!].prefix(80), as: UTF8.self))"
            )
        }
        if head.chunked { throw BenchError("HTTP API: a chunked answer; this client reads Content-Length only") }
        let end = headEnd! + 4 + head.contentLength
        while pending.count < end { try fill() }
        consumed = end
        if consumed == pending.count {
            pending.removeAll(keepingCapacity: true)
            consumed = 0
        }
        return (status, head.close)
    }

    private func fill() throws {
        let count = readBuffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        guard count > 0 else {
            throw BenchError(
                count == 0 ? "HTTP API: connection closed" : "HTTP API: read: \(String(cString: strerror(errno)))"
            )
        }
        pending.append(contentsOf: readBuffer[0..<count])
    }

    /// Where `\r\n\r\n` starts in `bytes` at or after `start`.
    private static func headEnd(in bytes: [UInt8], from start: Int) -> Int? {
        guard bytes.count >= 4, start <= bytes.count - 4 else { return nil }
        for index in start...(bytes.count - 4)
        where bytes[index] == 13 && bytes[index + 1] == 10 && bytes[index + 2] == 13 && bytes[index + 3] == 10 {
            return index
        }
        return nil
    }

    deinit { if fd >= 0 { close(fd) } }
}

/// What the bench's HTTP client reads of an answer's head (status line and header lines, without the blank
/// line), on bytes: the status, `Content-Length`, `Connection: close` and whether it is chunked.
struct HTTPAnswerHead: Equatable {
    var status: Int?
    var contentLength = 0
    var close = false
    var chunked = false

    init(_ head: ArraySlice<UInt8>) {
        var lines = head.split(separator: 10, omittingEmptySubsequences: true).makeIterator()
        guard let statusLine = lines.next() else { return }
        // "HTTP/1.1 202 Accepted": the three digits after the first space.
        if let space = statusLine.firstIndex(of: 32), statusLine.endIndex - space > 3 {
            let digits = statusLine[(space + 1)...(space + 3)]
            if digits.allSatisfy({ (48...57).contains($0) }) {
                status = digits.reduce(0) { $0 * 10 + Int($1 - 48) }
            }
        }
        while let line = lines.next() {
            guard let colon = line.firstIndex(of: 58) else { continue }
            let name = line[line.startIndex..<colon]
            let value = line[(colon + 1)...].drop { $0 == 32 || $0 == 9 }
            if Self.equalsIgnoringCase(name, "content-length") {
                contentLength = value.prefix { (48...57).contains($0) }.reduce(0) { $0 * 10 + Int($1 - 48) }
            } else if Self.equalsIgnoringCase(name, "transfer-encoding") {
                chunked = true
            } else if Self.equalsIgnoringCase(name, "connection") {
                close = Self.contains(value, "close")
            }
        }
    }

    private static func lowered(_ byte: UInt8) -> UInt8 { (65...90).contains(byte) ? byte + 32 : byte }

    private static func equalsIgnoringCase(_ bytes: ArraySlice<UInt8>, _ name: String) -> Bool {
        bytes.count == name.utf8.count && zip(bytes, name.utf8).allSatisfy { lowered($0) == $1 }
    }

    private static func contains(_ bytes: ArraySlice<UInt8>, _ word: String) -> Bool {
        let needle = Array(word.utf8)
        guard bytes.count >= needle.count else { return false }
        let lower = bytes.map(lowered)
        for start in 0...(lower.count - needle.count) where lower[start..<(start + needle.count)].elementsEqual(needle)
        {
            return true
        }
        return false
    }
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
        /// Seconds from each request's first byte written to its whole answer read.
        var roundTrips: [Double] = []
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
                    var written = ContinuousClock.now
                    let status = try connection.post("/v1/notifications", body: body(index)) {
                        written = ContinuousClock.now
                        result.lateness.record((written - due).seconds)
                        sent(index)
                    }
                    result.roundTrips.append((ContinuousClock.now - written).seconds)
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
            total.roundTrips += result.roundTrips
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
