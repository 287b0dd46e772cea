public import Foundation
import Synchronization

/// Turns a storm of identical failures into one log line per interval with a count: the first failure
/// of a kind is logged at once; the same kind again within `interval` of the last line is only counted,
/// and the first one after is logged with how many there were since that line. Pure: the time is passed
/// in, so tests drive it with a manual clock.
///
/// (A full disk made the UDP ingress write tens of thousands of identical warnings a second.)
public struct FailureStorm<Kind: Hashable & Sendable>: Sendable {
    public enum Decision: Hashable, Sendable {
        /// Write a line: `count` failures of this kind since the last line, this one included.
        case log(count: Int)
        /// Count it; a later line reports it.
        case suppress
    }

    public let interval: TimeInterval
    private var windows: [Kind: (lastLine: Date, suppressed: Int)] = [:]

    public init(interval: TimeInterval = 1) {
        self.interval = interval
    }

    /// A failure of `kind` happened at `now`.
    public mutating func record(_ kind: Kind, now: Date) -> Decision {
        if let window = windows[kind], now.timeIntervalSince(window.lastLine) < interval {
            windows[kind] = (window.lastLine, window.suppressed + 1)
            return .suppress
        }
        let count = (windows[kind]?.suppressed ?? 0) + 1
        windows[kind] = (now, 0)
        return .log(count: count)
    }
}

/// A ``FailureStorm`` behind a lock, on an injected clock: for a log shared by concurrent tasks.
public final class SharedFailureStorm<Kind: Hashable & Sendable>: Sendable {
    private let storm: Mutex<FailureStorm<Kind>>
    private let clock: any WallClock

    public init(clock: any WallClock, interval: TimeInterval = 1) {
        self.storm = Mutex(FailureStorm(interval: interval))
        self.clock = clock
    }

    /// A failure of `kind` now: the count to report on a line, or nil to only count it.
    public func record(_ kind: Kind) -> Int? {
        let now = clock.now()
        guard case .log(let count) = storm.withLock({ $0.record(kind, now: now) }) else { return nil }
        return count
    }
}
