public import Logging
import ServiceLifecycle
import Synchronization
import UnixSignals

/// What the gateway re-reads when asked to (SIGHUP): each part that can pick up changed files without a
/// restart registers a reloader under a name. The HTTP API's certificate is one; the log file, APNs and FCM
/// credentials are the kind of thing that can join later, each with one ``register(_:_:)`` call.
///
/// A reloader handles its own failure: it logs what went wrong and keeps what it had, so one bad file
/// does not stop the others from reloading and never stops the gateway.
public final class ReloadHook: Sendable {
    public typealias Reloader = @Sendable (Logger) async -> Void

    private let reloaders = Mutex<[(name: String, reload: Reloader)]>([])

    public init() {}

    /// Adds a reloader; they run in the order they were registered.
    public func register(_ name: String, _ reload: @escaping Reloader) {
        reloaders.withLock { $0.append((name, reload)) }
    }

    /// Runs every reloader once, one after the other; returns when all are done. What SIGHUP calls.
    public func reload(logger: Logger) async {
        let all = reloaders.withLock { $0 }
        logger.info("reloading", metadata: ["push.reloaders": "\(all.map(\.name).joined(separator: ","))"])
        for reloader in all {
            var scoped = logger
            scoped[metadataKey: "push.reloader"] = "\(reloader.name)"
            await reloader.reload(scoped)
        }
    }

    /// A service that runs ``reload(logger:)`` on each of `signals` until graceful shutdown. Signals that
    /// arrive while a reload runs are handled after it, one reload each.
    func service(signals: [UnixSignal], logger: Logger) -> some Service {
        ReloadOnSignal(hook: self, signals: signals, logger: logger)
    }
}

private struct ReloadOnSignal: Service {
    let hook: ReloadHook
    let signals: [UnixSignal]
    let logger: Logger

    func run() async throws {
        for await signal in await UnixSignalsSequence(trapping: signals).cancelOnGracefulShutdown() {
            logger.info("signal received", metadata: ["push.signal": "\(signal)"])
            await hook.reload(logger: logger)
        }
    }
}
