import Foundation
import Logging
import PushgateCore
import PushgateSQLite

#if canImport(Glibc)
import Glibc
#endif

/// The device tokens the gateway benchmarks register: 32 bytes, distinct, derived from an index
/// (so a run can name any of them without keeping a million strings).
enum BenchDevices {
    static func tokenHex(_ index: Int) -> String {
        let digits = String(index, radix: 16)
        return "be" + String(repeating: "0", count: 62 - digits.count) + digits
    }

    /// 64 hex digits that look random (SplitMix64 of the index, four words) but are the same in
    /// every run: real tokens arrive in no order, so they land all over the token index.
    static func randomLookingHex(_ index: Int) -> String {
        var state = UInt64(truncatingIfNeeded: index) &* 0x9E37_79B9_7F4A_7C15
        var hex = ""
        hex.reserveCapacity(64)
        for _ in 0..<4 {
            state = state &+ 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            z ^= z >> 31
            let digits = String(z, radix: 16)
            hex += String(repeating: "0", count: 16 - digits.count) + digits
        }
        return hex
    }

    /// An FCM registration token of 152 URL-safe characters (the length of Google's), distinct per index.
    static func fcmTokenValue(_ index: Int) -> String {
        let digits = String(index)
        return "bench-fcm-" + String(repeating: "0", count: 142 - digits.count) + digits
    }

    static func fcmToken(_ index: Int) throws -> DeviceToken {
        do {
            return try DeviceToken(fcm: fcmTokenValue(index))
        } catch {
            throw BenchError("FCM device token \(index): \(error)")
        }
    }

    static func token(_ index: Int) throws -> DeviceToken {
        do {
            return try DeviceToken(hex: tokenHex(index))
        } catch {
            throw BenchError("device token \(index): \(error)")
        }
    }
}

/// Fills a SQLite store directly (not through UDP): `register(batch:)` in large batches, one
/// transaction each, with `synchronous = NORMAL` (the fill is set-up, not what is measured).
enum StoreFill {
    struct Result: Sendable {
        var devices: Int
        var created: Int
        var seconds: Double
    }

    /// `devices` APNs devices (``BenchDevices/token(_:)``), then `fcmDevices` FCM ones
    /// (``BenchDevices/fcmToken(_:)``), all in `group`.
    static func fill(
        path: String,
        devices: Int,
        group: String,
        fcmDevices: Int = 0,
        batchSize: Int = 20_000
    ) async throws -> Result {
        var configuration = SQLiteStore.Configuration()
        configuration.synchronous = .normal
        var logger = Logger(label: "pushgate.bench.fill")
        logger.logLevel = .warning
        let store = try SQLiteStore(path: path, configuration: configuration, logger: logger)
        let start = ContinuousClock.now
        let now = Date()
        var created = 0
        var next = 0
        let total = devices + fcmDevices
        while next < total {
            let end = min(total, next + batchSize)
            var batch: [Registration] = []
            batch.reserveCapacity(end - next)
            for index in next..<end {
                let token = index < devices ? try BenchDevices.token(index) : try BenchDevices.fcmToken(index - devices)
                batch.append(Registration(token: token, group: group, at: now))
            }
            let results = try await store.register(batch: batch)
            created += results.filter { $0 == .created }.count
            next = end
        }
        try store.close()
        return Result(devices: total, created: created, seconds: (ContinuousClock.now - start).seconds)
    }

    /// Each group's devices (any service), in order, as ``fill(path:devices:group:fcmDevices:batchSize:)``.
    static func fill(
        path: String,
        groups: [(group: String, tokens: [DeviceToken])],
        batchSize: Int = 20_000
    ) async throws -> Result {
        var configuration = SQLiteStore.Configuration()
        configuration.synchronous = .normal
        var logger = Logger(label: "pushgate.bench.fill")
        logger.logLevel = .warning
        let store = try SQLiteStore(path: path, configuration: configuration, logger: logger)
        let start = ContinuousClock.now
        let now = Date()
        var created = 0
        let registrations = groups.flatMap { entry in
            entry.tokens.map { Registration(token: $0, group: entry.group, at: now) }
        }
        for first in stride(from: 0, to: registrations.count, by: batchSize) {
            let batch = Array(registrations[first..<min(registrations.count, first + batchSize)])
            created += try await store.register(batch: batch).filter { $0 == .created }.count
        }
        try store.close()
        return Result(devices: registrations.count, created: created, seconds: (ContinuousClock.now - start).seconds)
    }

    /// `devices` random-token devices in `group` by direct SQL (``SQLiteStore/prefillForBenchmark``):
    /// seconds for millions, where `fill` would take minutes.
    static func prefill(
        path: String,
        app: String = Registration.defaultApp,
        devices: Int,
        group: String
    ) async throws
        -> (created: Int, seconds: Double, bytes: Int?)
    {
        var logger = Logger(label: "pushgate.bench.fill")
        logger.logLevel = .warning
        let store = try SQLiteStore(path: path, logger: logger)
        let start = ContinuousClock.now
        let created = try await store.prefillForBenchmark(app: app, group: group, count: devices, at: Date())
        try store.close()
        let bytes = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? nil
        return (created, (ContinuousClock.now - start).seconds, bytes)
    }

    /// Copies a filled database (and its WAL, if SQLite left one) to `destination`.
    static func copy(_ source: String, to destination: String) throws {
        let files = FileManager.default
        for suffix in ["", "-wal"] where files.fileExists(atPath: source + suffix) {
            try? files.removeItem(atPath: destination + suffix)
            try files.copyItem(atPath: source + suffix, toPath: destination + suffix)
        }
    }
}

/// Counts a group's members in a store that another process (the gateway) writes, without
/// recounting what it already counted: new devices get higher ids, so each call counts only the
/// memberships above the highest device id it saw (one range of the membership primary key).
final class GroupCounter {
    private let store: SQLiteStore
    private let group: String
    private var lastDevice: Int64 = 0
    private var counted = 0

    init(path: String, group: String) throws {
        var logger = Logger(label: "pushgate.bench.counter")
        logger.logLevel = .warning
        store = try SQLiteStore(path: path, logger: logger)
        self.group = group
    }

    /// The group's member count now.
    func count() async throws -> Int {
        let new = try await store.countMembersForBenchmark(group: group, afterDevice: lastDevice)
        counted += new.count
        lastDevice = new.lastDevice
        return counted
    }

    func close() { try? store.close() }
}

/// Sends UDP datagrams to 127.0.0.1, as a backend (or `nc -u`) would.
/// Only a file descriptor: sendto(2) from any thread is safe.
final class DatagramSender: @unchecked Sendable {
    private let fd: Int32

    init() throws {
        fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        guard fd >= 0 else { throw BenchError("socket(): \(String(cString: strerror(errno)))") }
        // A large send buffer, so that a burst is limited by the receiver, not by us.
        var size: Int32 = 8 << 20
        _ = setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<Int32>.size))
    }

    /// Sends one datagram; returns false when the kernel refused it.
    @discardableResult
    func send(_ bytes: [UInt8], port: Int) -> Bool {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        let sent = bytes.withUnsafeBytes { buffer in
            withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(fd, buffer.baseAddress, buffer.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        }
        return sent == bytes.count
    }

    deinit { close(fd) }
}

/// `GET` on the simulator's control API (HTTP/1.1, JSON), over a plain blocking socket: the
/// answers are small and on loopback, and this keeps the benchmark free of an HTTP client stack.
enum ControlAPI {
    static func getJSON(port: Int, path: String, timeoutSeconds: Int = 5) throws -> [String: Any] {
        try requestJSON(port: port, method: "GET", path: path, timeoutSeconds: timeoutSeconds)
    }

    /// `method` on `path` with an optional JSON body; the answer's JSON object (200 only).
    static func requestJSON(
        port: Int,
        method: String,
        path: String,
        body: String = "",
        timeoutSeconds: Int = 5
    ) throws -> [String: Any] {
        let body = try requestText(port: port, method: method, path: path, body: body, timeoutSeconds: timeoutSeconds)
        guard let object = try? JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any] else {
            throw BenchError("control API \(path): not a JSON object: \(body.prefix(200))")
        }
        return object
    }

    /// `method` on `path` with an optional JSON body; the answer's body as text (200 only).
    static func requestText(
        port: Int,
        method: String,
        path: String,
        body: String = "",
        timeoutSeconds: Int = 5
    ) throws -> String {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw BenchError("socket(): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        _ = setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
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
            throw BenchError("control API on port \(port): connect: \(String(cString: strerror(errno)))")
        }
        let head = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n"
        let length = body.isEmpty ? "" : "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n"
        let request = Array((head + length + "\r\n" + body).utf8)
        let written = request.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        guard written == request.count else { throw BenchError("control API: short write") }
        var response: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16_384)
        while true {
            let read = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if read > 0 {
                response += buffer[0..<read]
            } else if read == 0 {
                break
            } else {
                throw BenchError("control API \(path): read: \(String(cString: strerror(errno)))")
            }
        }
        let text = String(decoding: response, as: UTF8.self)
        guard let split = text.range(of: "\r\n\r\n") else {
            throw BenchError("control API \(path): no HTTP header end")
        }
        let statusLine = text[..<split.lowerBound].split(separator: "\r\n").first ?? ""
        guard statusLine.split(separator: " ").dropFirst().first == "200" else {
            throw BenchError("control API \(path): \(statusLine)")
        }
        var body = String(text[split.upperBound...])
        if text[..<split.lowerBound].lowercased().contains("transfer-encoding: chunked") {
            body = Self.dechunk(body)
        }
        return body
    }

    private static func dechunk(_ body: String) -> String {
        var rest = Substring(body)
        var result = ""
        while let lineEnd = rest.range(of: "\r\n"), let size = Int(rest[..<lineEnd.lowerBound], radix: 16), size > 0 {
            let start = lineEnd.upperBound
            let bytes = Array(rest[start...].utf8)
            result += String(decoding: bytes.prefix(size), as: UTF8.self)
            rest = Substring(String(decoding: bytes.dropFirst(size), as: UTF8.self)).dropFirst(2)
        }
        return result
    }

    /// The simulator's `GET /stats` counters that the benchmarks print.
    struct Stats: Sendable {
        var accepted: Int
        var rejected: Int
        var connectionsOpened: Int
    }

    static func stats(port: Int) throws -> Stats {
        let json = try getJSON(port: port, path: "/stats")
        func integer(_ key: String) -> Int { (json[key] as? NSNumber)?.intValue ?? (json[key] as? Int) ?? -1 }
        return Stats(
            accepted: integer("accepted"),
            rejected: integer("rejected"),
            connectionsOpened: integer("connections_opened")
        )
    }
}

extension Duration {
    var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}

/// Nearest-rank percentiles over a sample.
struct Percentiles: Sendable {
    let sorted: [Double]

    init(_ values: [Double]) { sorted = values.sorted() }

    func value(_ fraction: Double) -> Double {
        guard !sorted.isEmpty else { return .nan }
        let rank = Int((fraction * Double(sorted.count)).rounded(.up))
        return sorted[min(sorted.count, max(1, rank)) - 1]
    }

    var maximum: Double { sorted.last ?? .nan }
    var mean: Double { sorted.isEmpty ? .nan : sorted.reduce(0, +) / Double(sorted.count) }
}
