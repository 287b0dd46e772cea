import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The system's random numbers (the kernel's `getrandom`, as `SystemRandomNumberGenerator`'s), drawn
/// 4 KiB at a time instead of one `getrandom` call per number: every request id takes one, and at 10,000
/// requests a second the system call per id was a visible share of the gateway's CPU.
public struct PooledSystemRandomNumberGenerator: RandomNumberGenerator {
    private static let pool = Mutex(Pool())

    public init() {}

    public mutating func next() -> UInt64 {
        Self.pool.withLock { $0.next() }
    }

    private struct Pool {
        static let size = 512
        var values = [UInt64](repeating: 0, count: size)
        var used = size

        mutating func next() -> UInt64 {
            if used == values.count { refill() }
            defer { used += 1 }
            return values[used]
        }

        private mutating func refill() {
            // glibc's arc4random_buf: the kernel's getrandom, retried until filled; it never fails.
            values.withUnsafeMutableBytes { arc4random_buf($0.baseAddress!, $0.count) }
            used = 0
        }
    }
}
