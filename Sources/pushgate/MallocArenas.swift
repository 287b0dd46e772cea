#if canImport(Glibc)
import Glibc
#endif

/// glibc gives each thread that allocates its own malloc arena (up to eight per core), and memory freed
/// in one arena is not reused by the others. The gateway allocates on its event loops, the cooperative
/// pool and the store's threads, so a broadcast's peak RSS grew with the arenas rather than with the
/// work: at 16,000 notifications in flight, 92-95 MiB with glibc's default, 79-81 MiB with two arenas,
/// for the same CPU per notification (docs/benchmarks.md). An operator's own `MALLOC_ARENA_MAX` wins.
enum MallocArenas {
    static let limit: Int32 = 2
    /// `M_ARENA_MAX` in glibc's `malloc.h`, which the Glibc module does not import (nor `mallopt`).
    static let mArenaMax: Int32 = -8

    static func limitUnlessConfigured(environment: [String: String]) {
        #if canImport(Glibc)
        guard environment["MALLOC_ARENA_MAX"] == nil,
            let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "mallopt")  // RTLD_DEFAULT
        else { return }
        typealias Mallopt = @convention(c) (Int32, Int32) -> Int32
        _ = unsafeBitCast(symbol, to: Mallopt.self)(mArenaMax, limit)
        #endif
    }
}
