package import NIOCore
import NIOHTTP1
package import NIOPosix

/// The start/stop scaffold of every simulator (this module's APNs, and the FCM simulator, which
/// already borrows this module's test CA): listeners bound on a fresh event loop group, the body, and a
/// stop that always runs in the same order: live connections, then the listeners, then the threads.
///
/// It lives here rather than in the gateway's transport layer so that the simulators stay independent
/// of the client code they test (neither imports PushgateCore or PushTransport).
package final class SimulatorListeners {
    package let group: MultiThreadedEventLoopGroup
    /// The control API's own thread: it answers (a benchmark's polls, a test's fault switches) while the
    /// server's loops are saturated. Made only for a simulator with a control port: a test process runs
    /// hundreds of simulators at once, and each idle thread holds three descriptors.
    private var controlGroup: MultiThreadedEventLoopGroup?
    private var channels: [any Channel] = []

    private init(threads: Int) {
        group = MultiThreadedEventLoopGroup(numberOfThreads: threads)
    }

    /// Starts a simulator with `start` (which binds its listeners through `keep`), runs `body` with it,
    /// and stops it whether `body` returns or throws: `dropConnections`, then every kept listener, then
    /// the event loop group.
    package static func withRunning<Running, Result: Sendable>(
        threads: Int,
        start: (SimulatorListeners) async throws -> Running,
        dropConnections: (Running) -> Void = { _ in },
        _ body: (Running) async throws -> Result
    ) async throws -> Result {
        let listeners = SimulatorListeners(threads: threads)
        let result: Swift.Result<Result, any Error>
        do {
            let running = try await start(listeners)
            do {
                result = .success(try await body(running))
            } catch {
                result = .failure(error)
            }
            // Close live connections before the listeners so that nothing lingers.
            dropConnections(running)
        } catch {
            result = .failure(error)
        }
        for channel in listeners.channels { try? await channel.close() }
        try? await listeners.group.shutdownGracefully()
        try? await listeners.controlGroup?.shutdownGracefully()
        return try result.get()
    }

    /// Keeps a bound listener, to be closed when the simulator stops; returns it.
    @discardableResult
    package func keep(_ listener: any Channel) -> any Channel {
        channels.append(listener)
        return listener
    }

    /// Binds and keeps the HTTP/1.1 listener of a control API when `port` is set (0: any free port);
    /// each connection gets `makeHandler()`. Returns the bound port, or nil when there is none.
    package func bindControl(
        host: String,
        port: Int?,
        makeHandler: @escaping @Sendable () -> any ChannelHandler
    ) async throws -> Int? {
        guard let port else { return nil }
        let controlGroup = self.controlGroup ?? MultiThreadedEventLoopGroup(numberOfThreads: 1)
        self.controlGroup = controlGroup
        let listener = try await ServerBootstrap(group: controlGroup)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try sync.configureHTTPServerPipeline(withErrorHandling: true)
                    try sync.addHandler(makeHandler())
                }
            }
            .bind(host: host, port: port)
            .get()
        return keep(listener).localAddress?.port
    }
}
