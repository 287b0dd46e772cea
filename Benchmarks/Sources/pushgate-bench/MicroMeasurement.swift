import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One micro-benchmark: the real code, with its fixtures built once.
struct MicroCase: Sendable {
    /// What `--cases` names it.
    let name: String
    /// What one operation is, and which code it runs.
    let operation: String
    /// Builds the fixtures, runs the workload once and checks what it produced; throws if it is wrong.
    let prepare: @Sendable () throws -> MicroWorkload

    /// Every case, in the order they run.
    static var all: [MicroCase] { apns + ingress + codecs + webPush }
}

/// What is timed: each call runs a few operations and returns how many (a batch of 100 requests counts
/// 100). A round should take microseconds at least, so that reading the clock between rounds is noise.
struct MicroWorkload {
    let round: () throws -> Int
}

/// Raised by a case whose check fails: the code did not do what the case says it measures.
struct MicroCheckFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }

    /// Throws unless `condition` holds.
    static func require(_ condition: Bool, _ description: @autoclosure () -> String) throws {
        if !condition { throw MicroCheckFailure(description()) }
    }
}

/// What one case measured.
struct MicroResult: Equatable {
    var operations: Int
    var wallSeconds: Double
    /// CPU time of the measuring thread.
    var cpuSeconds: Double

    var operationsPerSecond: Double { wallSeconds > 0 ? Double(operations) / wallSeconds : 0 }
    var cpuNanosecondsPerOperation: Double { operations > 0 ? cpuSeconds * 1e9 / Double(operations) : 0 }
    /// Below 1: the thread waited for the CPU (another process had it) part of the time.
    var cpuShareOfWall: Double { wallSeconds > 0 ? cpuSeconds / wallSeconds : 0 }
}

enum MicroMeasurement {
    /// Warms the workload up for a tenth of `seconds`, then runs it for `seconds` of wall time.
    static func run(_ workload: MicroWorkload, seconds: Double) throws -> MicroResult {
        _ = try measure(workload, seconds: seconds / 10)
        return try measure(workload, seconds: seconds)
    }

    /// Whole rounds until `seconds` have passed (at least one round).
    static func measure(_ workload: MicroWorkload, seconds: Double) throws -> MicroResult {
        let clock = ContinuousClock()
        let budget = Duration.nanoseconds(Int64(seconds * 1e9))
        let cpuStart = threadCPUSeconds()
        let start = clock.now
        var operations = 0
        var elapsed = Duration.zero
        repeat {
            operations += try workload.round()
            elapsed = clock.now - start
        } while elapsed < budget
        let cpu = threadCPUSeconds() - cpuStart
        return MicroResult(operations: operations, wallSeconds: elapsed.seconds, cpuSeconds: cpu)
    }

    /// This thread's CPU time (user + system), to the nanosecond.
    static func threadCPUSeconds() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }
}

/// The lines `micro` prints.
enum MicroReport {
    static func header(seconds: Double) -> String {
        var text =
            "pushgate-bench micro: \(seconds) s per case after a warm-up of \(seconds / 10) s; CPU of this thread; "
            + "what one operation is: pushgate-bench micro --list"
        #if DEBUG
        text += "\n  caveat: a debug build; figures mean something only in release (swift build -c release)"
        #endif
        return text
    }

    static func listing(_ benchmark: MicroCase) -> String {
        "\(benchmark.name.padding(toLength: 18, withPad: " ", startingAt: 0)) \(benchmark.operation)"
    }

    static func line(_ benchmark: MicroCase, _ result: MicroResult) -> String {
        let name = benchmark.name.padding(toLength: 18, withPad: " ", startingAt: 0)
        let rate = Format.integer(result.operationsPerSecond).leftPadded(to: 12)
        let cpu = nanoseconds(result.cpuNanosecondsPerOperation).leftPadded(to: 10)
        return
            "\(name) \(rate) ops/s \(cpu) CPU/op   (\(Format.integer(result.operations)) ops in "
            + "\(Format.seconds(result.wallSeconds)) s, CPU/wall \(Format.ratio(result.cpuShareOfWall)))"
    }

    /// `812 ns`, `4.31 µs`, `1.20 ms`.
    static func nanoseconds(_ value: Double) -> String {
        switch value {
        case ..<1_000: String(format: "%.0f ns", value)
        case ..<1_000_000: String(format: "%.2f µs", value / 1_000)
        default: String(format: "%.2f ms", value / 1_000_000)
        }
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: " ", count: width - count) + self
    }
}
