import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// CPU time in seconds, split as the kernel accounts it.
struct CPUTime: Sendable, Codable {
    var user: Double
    var system: Double

    static let zero = CPUTime(user: 0, system: 0)

    var total: Double { user + system }

    static func - (lhs: CPUTime, rhs: CPUTime) -> CPUTime {
        CPUTime(user: lhs.user - rhs.user, system: lhs.system - rhs.system)
    }

    static func + (lhs: CPUTime, rhs: CPUTime) -> CPUTime {
        CPUTime(user: lhs.user + rhs.user, system: lhs.system + rhs.system)
    }
}

/// Readings of this process, its threads, its children and the whole machine, from
/// `getrusage(2)` and `/proc` (Linux). Every reading is optional where `/proc` may be missing.
enum ProcessMetrics {
    static let ticksPerSecond: Double = {
        let ticks = sysconf(Int32(_SC_CLK_TCK))
        return ticks > 0 ? Double(ticks) : 100
    }()

    /// User and system CPU of this process (all threads), microsecond resolution.
    static func selfCPU() -> CPUTime {
        rusageCPU(who: RUSAGE_SELF)
    }

    /// User and system CPU of the children that have exited and been waited for.
    static func childrenCPU() -> CPUTime {
        rusageCPU(who: RUSAGE_CHILDREN)
    }

    private static func rusageCPU(who: __rusage_who) -> CPUTime {
        var usage = rusage()
        guard getrusage(__rusage_who_t(truncatingIfNeeded: who.rawValue), &usage) == 0 else { return .zero }
        return CPUTime(
            user: Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6,
            system: Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
        )
    }

    /// Peak resident set size (`VmHWM`) of a process, in bytes.
    static func peakRSS(pid: String = "self") -> Int? {
        statusBytes(pid: pid, field: "VmHWM")
    }

    /// Resident set size now (`VmRSS`) of a process, in bytes.
    static func currentRSS(pid: String) -> Int? {
        statusBytes(pid: pid, field: "VmRSS")
    }

    /// A `kB` field of `/proc/PID/status`, in bytes.
    private static func statusBytes(pid: String, field: String) -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        for line in status.split(separator: "\n") where line.hasPrefix(field + ":") {
            let kilobytes = line.dropFirst(field.count + 1).split(whereSeparator: { $0 == " " || $0 == "\t" }).first
                .flatMap { Int($0) }
            return kilobytes.map { $0 * 1024 }
        }
        return nil
    }

    /// Context switches (voluntary and not) of every thread of a process, summed from
    /// `/proc/PID/task/*/status` (threads that have exited no longer count).
    static func contextSwitches(pid: Int32) -> Int? {
        guard let tasks = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task") else { return nil }
        var total = 0
        for task in tasks {
            guard let status = try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/status", encoding: .utf8)
            else { continue }
            for line in status.split(separator: "\n") {
                guard line.hasPrefix("voluntary_ctxt_switches:") || line.hasPrefix("nonvoluntary_ctxt_switches:")
                else { continue }
                total += line.split(separator: ":").last.flatMap { Int($0.trimmingCharacters(in: .whitespaces)) } ?? 0
            }
        }
        return total
    }

    /// Entries of a `/proc/PID/` directory (`fd`: open file descriptors, `task`: threads).
    static func entries(pid: Int32, directory: String) -> Int? {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/\(directory)"))?.count
    }

    /// Resets this process's `VmHWM` to its current RSS (Linux 4.0+: `5` to `clear_refs`), so that
    /// each run reports its own peak. Returns false when the kernel refused.
    @discardableResult
    static func resetPeakRSS() -> Bool {
        let fd = open("/proc/self/clear_refs", O_WRONLY)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        return write(fd, "5", 1) == 1
    }

    /// CPU of one process or thread from a `/proc/.../stat` file (clock-tick resolution).
    static func statCPU(path: String) -> CPUTime? {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8),
            let close = text.lastIndex(of: ")")
        else { return nil }
        // Fields after "pid (comm) ": state is field 3, utime field 14, stime field 15.
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        return CPUTime(user: user / ticksPerSecond, system: system / ticksPerSecond)
    }

    /// CPU of another process (a simulator we started).
    static func processCPU(pid: Int32) -> CPUTime? {
        statCPU(path: "/proc/\(pid)/stat")
    }

    /// The ids of this process's threads.
    static func threadIDs() -> Set<Int> {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        return Set(names.compactMap { Int($0) })
    }

    /// Summed CPU of some of this process's threads (threads that have exited count as zero).
    static func threadsCPU(_ ids: Set<Int>) -> CPUTime {
        ids.reduce(CPUTime.zero) { sum, id in
            sum + (statCPU(path: "/proc/self/task/\(id)/stat") ?? .zero)
        }
    }

    /// Busy and total CPU seconds of the whole machine since boot (first line of `/proc/stat`).
    static func machineCPU() -> (busy: Double, total: Double)? {
        guard let text = try? String(contentsOfFile: "/proc/stat", encoding: .utf8),
            let line = text.split(separator: "\n").first, line.hasPrefix("cpu ")
        else { return nil }
        let values = line.split(separator: " ").dropFirst().compactMap { Double($0) }
        guard values.count >= 5 else { return nil }
        // user nice system idle iowait irq softirq steal [guest guest_nice, already in user]
        let counted = values.prefix(8)
        let total = counted.reduce(0, +)
        let idle = values[3] + values[4]
        return ((total - idle) / ticksPerSecond, total / ticksPerSecond)
    }

    /// Waits until the machine has been at most `threshold` busy (0...1, across all cores) over
    /// one second, for at most `limit` seconds. Returns the last busy fraction seen.
    /// `RcvbufErrors` of the `Udp:` lines of /proc/net/snmp: datagrams the kernel dropped, machine-wide,
    /// because a socket's receive buffer was full.
    static func udpReceiveBufferErrors() -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/net/snmp", encoding: .utf8) else { return nil }
        let lines = text.split(separator: "\n").filter { $0.hasPrefix("Udp: ") }
        guard lines.count >= 2 else { return nil }
        let names = lines[0].split(separator: " ")
        let values = lines[1].split(separator: " ")
        guard let column = names.firstIndex(of: "RcvbufErrors"), column < values.count else { return nil }
        return Int(values[column])
    }

    static func waitForQuietMachine(threshold: Double, limit: Double) async -> Double? {
        guard limit > 0 else { return nil }
        let deadline = Date().addingTimeInterval(limit)
        var last: Double? = nil
        repeat {
            guard let before = machineCPU() else { return nil }
            try? await Task.sleep(for: .seconds(1))
            guard let after = machineCPU(), after.total > before.total else { return nil }
            let busy = (after.busy - before.busy) / (after.total - before.total)
            last = busy
            if busy <= threshold { return busy }
        } while Date() < deadline && !Task.isCancelled
        return last
    }
}
