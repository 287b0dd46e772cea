import Foundation
import Logging
import PushgateCore
import PushgatePostgres

/// `--postgres URL`: the gateway stores in PostgreSQL (`--store`), in a schema of its own per run, and the
/// figures add the server's CPU (every `postgres` process of the machine: the benchmark's server should be
/// the only one).
struct PostgresBenchStore: Sendable {
    /// The URL the gateway gets: the server's, with a fresh `schema` parameter.
    let url: String
    let schema: String

    init(server: String) throws {
        guard var components = URLComponents(string: server) else {
            throw BenchError("--postgres \"\(server.prefix(80))\" is not a URL")
        }
        schema = "bench_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(16)
        components.queryItems = (components.queryItems ?? []).filter { $0.name != "schema" }
            + [URLQueryItem(name: "schema", value: schema)]
        guard let url = components.string else { throw BenchError("--postgres: cannot add the schema to the URL") }
        self.url = url
    }

    /// The URL with its password hidden, for the report.
    var redacted: String { (try? PostgresStore.Configuration(url: url).redactedURL) ?? "postgres://…" }

    /// As ``StoreFill/fillSingles(path:count:prefix:firstToken:)``, through `PostgresStore.register(batch:)`
    /// (which migrates the new schema first).
    func fillSingles(count: Int, prefix: String) async throws -> StoreFill.Result {
        var logger = Logger(label: "pushgate.bench.fill")
        logger.logLevel = .warning
        var configuration = try PostgresStore.Configuration(url: url)
        configuration.listensForWork = false
        let start = ContinuousClock.now
        let created = try await PostgresStore.withStore(configuration: configuration, logger: logger) { store in
            let now = Date()
            var created = 0
            var next = 0
            while next < count {
                let end = min(count, next + 20_000)
                let batch = try (next..<end).map { index in
                    Registration(token: try BenchDevices.token(index), group: "\(prefix)\(index)", at: now)
                }
                created += try await store.register(batch: batch).filter { $0 == .created }.count
                next = end
            }
            return created
        }
        return StoreFill.Result(devices: count, created: created, seconds: (ContinuousClock.now - start).seconds)
    }

    /// CPU of every `postgres` process now, with what their exited children used (the postmaster reaps
    /// the backends, so a connection closed during the run still counts).
    static func serverCPU() -> CPUTime {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        var total = CPUTime.zero
        for name in names where Int(name) != nil {
            guard let comm = try? String(contentsOfFile: "/proc/\(name)/comm", encoding: .utf8),
                comm.trimmingCharacters(in: .whitespacesAndNewlines) == "postgres",
                let text = try? String(contentsOfFile: "/proc/\(name)/stat", encoding: .utf8),
                let close = text.lastIndex(of: ")")
            else { continue }
            // After "pid (comm) ": utime, stime, cutime, cstime are fields 14 to 17.
            let fields = text[text.index(after: close)...].split(separator: " ").compactMap { Double($0) }
            guard fields.count > 14 else { continue }
            let ticks = ProcessMetrics.ticksPerSecond
            total = total + CPUTime(user: (fields[10] + fields[12]) / ticks, system: (fields[11] + fields[13]) / ticks)
        }
        return total
    }
}
