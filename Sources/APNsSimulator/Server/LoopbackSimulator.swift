public import ServiceLifecycle

/// A simulator that also runs as a `Service` (the APNs one, and the FCM one in its own module): made
/// from a configuration and an `onStarted` callback, started and stopped by its own `withRunning`.
public protocol LoopbackSimulator: Service {
    associatedtype Configuration: SimulatorConfiguration
    associatedtype Running: Sendable

    init(setup: SimulatorSetup<Configuration, Running>)
    var setup: SimulatorSetup<Configuration, Running> { get }

    /// Starts a simulator, runs `body` with it, and stops it when `body` returns or throws.
    static func withRunning<Result: Sendable>(
        _ configuration: Configuration,
        _ body: (Running) async throws -> Result
    ) async throws -> Result
}

/// A simulator's configuration: every setting has a default.
public protocol SimulatorConfiguration: Sendable {
    init()
}

/// What a simulator service is made of: its configuration and what to do once it listens.
public struct SimulatorSetup<Configuration: SimulatorConfiguration, Running: Sendable>: Sendable {
    public var configuration: Configuration
    let onStarted: @Sendable (Running) async throws -> Void
}

extension LoopbackSimulator {
    /// - Parameter onStarted: called once the listeners are bound (for example to print the ports).
    public init(
        configuration: Configuration = .init(),
        onStarted: @escaping @Sendable (Running) async throws -> Void = { _ in }
    ) {
        self.init(setup: SimulatorSetup(configuration: configuration, onStarted: onStarted))
    }

    public var configuration: Configuration { setup.configuration }

    /// Runs until the task is cancelled or a graceful shutdown is triggered, then closes the
    /// listeners and every connection.
    public func run() async throws {
        let setup = self.setup
        try await Self.withRunning(setup.configuration) { running in
            try await setup.onStarted(running)
            do {
                try await gracefulShutdown()
            } catch is CancellationError {
                // Cancelled: stop like a graceful shutdown.
            }
        }
    }
}
