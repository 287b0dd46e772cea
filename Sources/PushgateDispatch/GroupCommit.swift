import Synchronization

/// Who writes next in a ``GroupCommit``, as a pure state machine: a write is under way or not, and the
/// items that arrived meanwhile wait in arrival order.
///
/// An item that arrives while nothing is written leads at once: it is written alone, exactly as fast as
/// without batching (no timer: an idle gateway never waits). Items that arrive while a write is under way
/// queue; when it ends, the oldest of them leads the next write and takes up to `maximumBatch` items
/// (itself included) with it. Leadership passes with the batch, so the caller whose write just ended is
/// answered at once instead of writing its successors' batches.
package struct GroupCommitQueue<Waiter> {
    package enum Arrival: Equatable {
        /// Write this item now, alone.
        case lead
        /// A write is under way: wait to be answered, or handed the next batch.
        case wait
    }

    package enum Next {
        /// Nothing waits: the writer is free.
        case idle
        /// `leader` writes the next batch: its own item, then `followers`' in order.
        case lead(leader: Waiter, followers: [Waiter])
    }

    package let maximumBatch: Int
    private var writing = false
    private var waiting: [Waiter] = []

    package init(maximumBatch: Int) {
        precondition(maximumBatch >= 1, "a batch holds at least one item")
        self.maximumBatch = maximumBatch
    }

    package var isWriting: Bool { writing }
    package var waitingCount: Int { waiting.count }

    package mutating func arrived(_ waiter: Waiter) -> Arrival {
        guard writing else {
            writing = true
            return .lead
        }
        waiting.append(waiter)
        return .wait
    }

    /// The write under way ended (committed or failed).
    package mutating func written() -> Next {
        precondition(writing, "written() ends a write")
        guard !waiting.isEmpty else {
            writing = false
            return .idle
        }
        let count = min(maximumBatch, waiting.count)
        let batch = Array(waiting.prefix(count))
        waiting.removeFirst(count)
        return .lead(leader: batch[0], followers: Array(batch.dropFirst()))
    }
}

/// Group commit (leader/follower): callers that arrive while a write is under way share the next write.
/// Each caller gets its own answers, and only after the write that holds its items has ended.
///
/// The batch is written in the leader's task; followers are resumed with their answers (or with the
/// next batch to lead) by the leader once its write has ended. A batch of more than one caller is written
/// in a task of its own, so that one caller's cancellation (a client that hung up) cannot interrupt the
/// store transaction that holds the others' items. A caller may bring several items (the UDP ingress's
/// batch); ``GroupCommitQueue/maximumBatch`` counts callers.
package final class GroupCommit<Item: Sendable, Answer: Sendable>: Sendable {
    private enum Role: Sendable {
        case answered([Answer])
        case lead(followers: [Waiter])
    }

    private struct Waiter: Sendable {
        var items: [Item]
        var continuation: CheckedContinuation<Role, Never>
    }

    private let state: Mutex<GroupCommitQueue<Waiter>>

    package init(maximumBatch: Int) {
        self.state = Mutex(GroupCommitQueue(maximumBatch: maximumBatch))
    }

    /// Writes `items` with whatever else waits, and answers them, in order, once that write has ended.
    /// `write` stores items together and answers each, in order; the leader's `write` writes the whole
    /// batch, so every caller must pass one that does the same.
    package func submit(_ items: [Item], write: @escaping @Sendable ([Item]) async -> [Answer]) async -> [Answer] {
        if items.isEmpty { return [] }
        let role = await withCheckedContinuation { (continuation: CheckedContinuation<Role, Never>) in
            let arrival = state.withLock { $0.arrived(Waiter(items: items, continuation: continuation)) }
            // Resumed before the await completes: the caller carries on without a suspension.
            if case .lead = arrival { continuation.resume(returning: .lead(followers: [])) }
        }
        switch role {
        case .answered(let answers):
            return answers
        case .lead(let followers):
            let batch = items + followers.flatMap(\.items)
            let answers = followers.isEmpty ? await write(batch) : await Task { await write(batch) }.value
            precondition(answers.count == batch.count, "a group commit answers every item")
            switch state.withLock({ $0.written() }) {
            case .idle: break
            case .lead(let leader, let next): leader.continuation.resume(returning: .lead(followers: next))
            }
            var start = items.count
            for follower in followers {
                let end = start + follower.items.count
                follower.continuation.resume(returning: .answered(Array(answers[start..<end])))
                start = end
            }
            return Array(answers[0..<items.count])
        }
    }
}
