import HummingbirdCore
import Logging
import NIOCore

/// A server child channel whose connection task runs on the connection's own event loop.
///
/// Hummingbird reads each connection's requests, runs the router and writes the answers in one task per
/// connection, on the global concurrent executor: every request then crosses from the event loop that read
/// it to a pool thread (a futex wake-up), and its answer back. With the connection's event loop as the
/// task's executor preference, the request is parsed, routed, checked and answered on the thread that read
/// it; only what really runs elsewhere (the store's writer, the group commit) hops, once each way.
///
/// What this asks of the handlers: no blocking on the event loop. They parse small bodies (bounded by
/// `maximumBodyBytes`) and await the store, which runs on its own queue; none waits synchronously.
struct EventLoopBoundChannel<Base: ServerChildChannel>: ServerChildChannel {
    typealias Value = Base.Value

    let base: Base

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        base.setup(channel: channel, logger: logger)
    }

    func handle(value: Value, logger: Logger) async {
        await withTaskExecutorPreference(EventLoopTaskExecutor(value.channel.eventLoop)) {
            await base.handle(value: value, logger: logger)
        }
    }
}

/// Runs a task's jobs on one NIO event loop.
///
/// `Sendable` as checked by the compiler: its only state is the event loop, and a job is handed to it with
/// `execute`, which any thread may call.
final class EventLoopTaskExecutor: TaskExecutor {
    let eventLoop: any EventLoop

    init(_ eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        eventLoop.execute {
            job.runSynchronously(on: self.asUnownedTaskExecutor())
        }
    }
}
