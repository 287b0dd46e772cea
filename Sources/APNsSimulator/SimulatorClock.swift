public import Foundation
import Synchronization

/// The wall clock the simulator reads for provider-token ages, arrival times and 410 timestamps.
///
/// Injected so tests can move time instead of sleeping (an `iat` two hours old, a token replaced
/// after 19 minutes). Latency faults are not wall-clock driven: they run on the event loop's timers.
public protocol SimulatorClock: Sendable {
    /// The current time.
    func now() -> Date
}

/// The system's wall clock.
public struct SystemSimulatorClock: SimulatorClock {
    public init() {}

    public func now() -> Date { Date() }
}

/// A clock that only moves when told to; for tests.
public final class ManualSimulatorClock: SimulatorClock {
    private let current: Mutex<Date>

    /// - Parameter start: the initial time (default: the system time at creation).
    public init(start: Date = Date()) {
        self.current = Mutex(start)
    }

    public func now() -> Date {
        self.current.withLock { $0 }
    }

    /// Moves the clock forward (or backward, for a negative interval).
    public func advance(by seconds: TimeInterval) {
        self.current.withLock { $0 = $0.addingTimeInterval(seconds) }
    }

    /// Sets the clock to `date`.
    public func set(_ date: Date) {
        self.current.withLock { $0 = date }
    }
}

extension Date {
    /// Milliseconds since the UNIX epoch, as APNs writes its 410 `timestamp`.
    var millisecondsSince1970: Int64 {
        Int64((self.timeIntervalSince1970 * 1000).rounded(.down))
    }
}
