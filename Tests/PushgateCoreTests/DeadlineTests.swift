import PushgateCore
import Synchronization
import Testing

@Suite("withDeadline: an answer, or an error once the time is up, even when the work cannot be cancelled")
struct DeadlineTests {
    /// Work that ignores cancellation and ends only when released (as a query to a silent server does).
    final class Stuck: Sendable {
        private let waiting = Mutex<CheckedContinuation<Void, Never>?>(nil)
        private let released = Mutex(false)

        func wait() async {
            await withCheckedContinuation { continuation in
                let resumeNow = released.withLock { released in
                    if !released { waiting.withLock { $0 = continuation } }
                    return released
                }
                if resumeNow { continuation.resume() }
            }
        }

        func release() {
            released.withLock { $0 = true }
            waiting.withLock { $0.take() }?.resume()
        }
    }

    @Test("work that finishes in time gives its value; work that throws, its error")
    func answers() async throws {
        #expect(try await withDeadline(.seconds(60)) { 42 } == 42)
        struct Failed: Error {}
        await #expect(throws: Failed.self) { try await withDeadline(.seconds(60)) { () -> Int in throw Failed() } }
    }

    @Test("work stuck beyond the deadline: DeadlineExceeded, without waiting for the work")
    func stuck() async throws {
        let stuck = Stuck()
        defer { stuck.release() }
        await #expect(throws: DeadlineExceeded.self) {
            try await withDeadline(.milliseconds(50)) { await stuck.wait() }
        }
    }
}
