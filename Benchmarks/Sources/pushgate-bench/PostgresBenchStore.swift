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
        components.queryItems =
            (components.queryItems ?? []).filter { $0.name != "schema" }
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

    /// CPU of the server at `port` now: its postmaster (the `postgres` process started with `-p PORT`)
    /// with what its exited children used (it reaps the backends, so a connection closed during the run
    /// still counts), and its live children. Other PostgreSQL servers on the machine are left out.
    static func serverCPU(port: Int) -> CPUTime? {
        let pids = ((try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []).compactMap { Int($0) }
        // Fields after "pid (comm) ", the state dropped: ppid is [0], utime [10], stime [11], cutime [12], cstime [13].
        func stat(_ pid: Int) -> [Double]? {
            guard let comm = try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8),
                comm.trimmingCharacters(in: .whitespacesAndNewlines) == "postgres",
                let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                let close = text.lastIndex(of: ")")
            else { return nil }
            let fields = text[text.index(after: close)...].split(separator: " ").dropFirst().compactMap { Double($0) }
            return fields.count > 14 ? fields : nil
        }
        let postmaster = pids.first { pid in
            guard stat(pid) != nil, let data = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") else {
                return false
            }
            let arguments = data.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
            return zip(arguments, arguments.dropFirst()).contains { $0 == "-p" && $1 == String(port) }
        }
        guard let postmaster, let own = stat(postmaster) else { return nil }
        let ticks = ProcessMetrics.ticksPerSecond
        var total = CPUTime(user: (own[10] + own[12]) / ticks, system: (own[11] + own[13]) / ticks)
        for pid in pids where pid != postmaster {
            guard let fields = stat(pid), Int(fields[0]) == postmaster else { continue }
            total = total + CPUTime(user: fields[10] / ticks, system: fields[11] / ticks)
        }
        return total
    }

    /// The server's port, from the URL.
    var port: Int { URLComponents(string: url)?.port ?? 5432 }
}
