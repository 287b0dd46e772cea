import Synchronization

/// The streams open on a simulator, per connection and in total, with their high-water marks.
/// Exact: every change and every read takes one lock, so no peak between two reads is missed.
///
/// A stream counts from the request's first HEADERS until its answer is written, the client resets
/// it, or its connection closes. Streams beyond a GOAWAY's last stream ID never count.
final class StreamGauge: Sendable {
    struct Reading: Sendable, Equatable {
        var current = 0
        var peak = 0
        /// The peak of each connection that had a stream open since the last reset, by connection ID.
        var peakByConnection: [Int: Int] = [:]
    }

    private struct Level: Sendable {
        var current = 0
        var peak = 0
    }

    private struct State: Sendable {
        var total = Level()
        var connections: [Int: Level] = [:]
    }

    private let state = Mutex(State())

    init() {}

    func opened(connectionID: Int) {
        self.state.withLock { state in
            state.total.current += 1
            state.total.peak = max(state.total.peak, state.total.current)
            var level = state.connections[connectionID, default: Level()]
            level.current += 1
            level.peak = max(level.peak, level.current)
            state.connections[connectionID] = level
        }
    }

    /// `count` streams of the connection closed (answered, reset, or lost with the connection).
    func closed(connectionID: Int, count: Int = 1) {
        guard count > 0 else { return }
        self.state.withLock { state in
            state.total.current -= count
            state.connections[connectionID]?.current -= count
        }
    }

    func read() -> Reading {
        self.state.withLock { state in
            Reading(
                current: state.total.current,
                peak: state.total.peak,
                peakByConnection: state.connections.mapValues(\.peak)
            )
        }
    }

    /// Peaks restart from what is open now; connections with nothing open are forgotten.
    func resetPeaks() {
        self.state.withLock { state in
            state.total.peak = state.total.current
            state.connections = state.connections.filter { $0.value.current > 0 }
                .mapValues { Level(current: $0.current, peak: $0.current) }
        }
    }
}
