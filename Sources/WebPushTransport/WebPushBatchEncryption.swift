import Dispatch
import NIOCore
import PushTransport
import PushgateCore
import WebPush

/// Encrypts a batch of Web Push messages on every core at once: the batch is cut into slices, one per
/// core at most (and at least ``minimumSliceSize`` devices each), which Dispatch runs in parallel with the
/// calling thread taking one. Returns when every slice is done, so the results come back in the batch's
/// order and the caller hands them to the client as before.
///
/// Why here and not on the connections' event loops: the encryption (a fresh key, an ECDH, HKDF and
/// AES-GCM, about 85 µs) is most of a message's CPU; on the caller's thread alone it capped a broadcast
/// at one core's worth (~11,000 messages/s), and on a connection's event loop it would hold back that
/// connection's reads and writes. Trade-off: the caller (the dispatcher's chunk) waits for its batch,
/// `count / cores` encryptions long; it has nothing else to do for that chunk meanwhile.
enum WebPushBatchEncryption {
    /// Below this many devices a slice is not worth a thread hand-off (~2 µs) and a wake-up.
    static let minimumSliceSize = 8

    /// The cores to spread over (at least 1).
    static let cores = max(1, System.coreCount)

    /// `transform` applied to each of `items`, in order, spread over `slices(for:cores:)` threads.
    static func map<Item: Sendable, Result: Sendable>(
        _ items: [Item],
        _ transform: @Sendable (Item) -> Result
    ) -> [Result] {
        let sliceCount = slices(for: items.count, cores: cores)
        guard sliceCount > 1 else { return items.map(transform) }
        return [Result](unsafeUninitializedCapacity: items.count) { buffer, initialized in
            items.withUnsafeBufferPointer { source in
                let shared = SharedBuffers(source: source, target: buffer.baseAddress!)
                DispatchQueue.concurrentPerform(iterations: sliceCount) { slice in
                    for index in bounds(of: slice, slices: sliceCount, count: shared.source.count) {
                        (shared.target + index).initialize(to: transform(shared.source[index]))
                    }
                }
            }
            initialized = items.count
        }
    }

    /// The batch and the results, shared by the slices. `@unchecked Sendable`: the source is only read;
    /// each target index is written by exactly one slice, and every slice ends before `concurrentPerform`
    /// returns (which orders their writes before the array is read); neither outlives the call.
    private struct SharedBuffers<Item, Result>: @unchecked Sendable {
        let source: UnsafeBufferPointer<Item>
        let target: UnsafeMutablePointer<Result>
    }

    /// How many slices `count` items are cut into: one per core at most, each ``minimumSliceSize`` or more.
    static func slices(for count: Int, cores: Int) -> Int {
        max(1, min(cores, count / minimumSliceSize))
    }

    /// The indices of slice `slice` of `slices` over `count` items: contiguous, sizes differing by one at most.
    static func bounds(of slice: Int, slices: Int, count: Int) -> Range<Int> {
        let base = count / slices
        let extra = count % slices
        let start = slice * base + min(slice, extra)
        return start..<(start + base + (slice < extra ? 1 : 0))
    }
}
