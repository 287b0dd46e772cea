import APNsHTTP2
import APNsSimulator
import Crypto
import Foundation
import Logging
import PushgateConfig
import PushgateCore
import PushgateDispatch
import PushgateGateway
import PushgateUDP

#if canImport(Glibc)
import Glibc
#endif

/// The whole gateway in-process, built by the function `pushgate` builds it with
/// (`Gateway.Configuration(_:)` from a `GatewayConfiguration`), on port-0 UDP sockets and a temporary
/// SQLite file, delivering to an in-process simulator. Tests differ from `main` only in the values.
struct GatewayFixture {
    static let topic = "com.example.pushgate"
    static let keyID = "KEY1234567"
    static let teamID = "TEAM123456"

    struct Context: Sendable {
        var simulator: RunningAPNsSimulator
        var gateway: Gateway.Running
        /// What the gateway runs with: what `Gateway.Configuration(_:)` built, plus ``run(_:dispatcher:_:)``'s knobs.
        var configuration: Gateway.Configuration
        var registration: UDPSender
        var notification: UDPSender
    }

    static func with<Result: Sendable>(
        simulator tweakSimulator: (inout APNsSimulator.Configuration) -> Void = { _ in },
        dispatcher tweakDispatcher: @escaping @Sendable (inout Dispatcher.Configuration) -> Void = { _ in },
        _ body: @escaping @Sendable (Context) async throws -> Result
    ) async throws -> Result {
        try await withSimulator(tweakSimulator) { simulator, configuration in
            let dispatcher: (inout Dispatcher.Configuration) -> Void = { dispatcher in
                dispatcher.retryPolicy = RetryPolicy(
                    backoff: Backoff(base: .milliseconds(20), multiplier: 2, cap: .milliseconds(200))
                )
                tweakDispatcher(&dispatcher)
            }
            return try await run(configuration, dispatcher: dispatcher) { running, built in
                let context = Context(
                    simulator: simulator,
                    gateway: running,
                    configuration: built,
                    registration: try UDPSender(port: running.udp.registrationPort),
                    notification: try UDPSender(port: running.udp.notificationPort)
                )
                return try await body(context)
            }
        }
    }

    /// An APNs simulator that accepts the fixture's token key, and the configuration that delivers to it
    /// (``configuration(directory:simulator:keyFile:)``); key file and database live in a directory removed
    /// afterwards.
    static func withSimulator<Result: Sendable>(
        _ tweakSimulator: (inout APNsSimulator.Configuration) -> Void = { _ in },
        _ body: (RunningAPNsSimulator, GatewayConfiguration) async throws -> Result
    ) async throws -> Result {
        let directory = try TemporaryDirectory()
        let key = P256.Signing.PrivateKey()
        let keyFile = directory.path("AuthKey.p8")
        try Data(key.pemRepresentation.utf8).write(to: URL(fileURLWithPath: keyFile))
        var simulatorConfiguration = APNsSimulator.Configuration()
        simulatorConfiguration.tokenKeys = [ProviderTokenKey(keyID: keyID, teamID: teamID, publicKey: key.publicKey)]
        simulatorConfiguration.logger = TestLogger.make("simulator")
        tweakSimulator(&simulatorConfiguration)
        return try await APNsSimulator.withRunning(simulatorConfiguration) { simulator in
            let result = try await body(
                simulator,
                Self.configuration(directory: directory, simulator: simulator, keyFile: keyFile)
            )
            _ = directory
            return result
        }
    }

    /// A test's values for what `pushgate` reads from flags and files: UDP on 127.0.0.1 port 0, no HTTP
    /// API, a SQLite file in `directory`, and the single app delivering to `simulator` with a token key.
    static func configuration(
        directory: TemporaryDirectory,
        simulator: RunningAPNsSimulator,
        keyFile: String
    ) -> GatewayConfiguration {
        var configuration = GatewayConfiguration()
        configuration.listen = "127.0.0.1"
        configuration.udp.registrationPort = 0
        configuration.udp.notificationPort = 0
        configuration.http.port = -1
        configuration.store.path = directory.path("gateway.db")
        configuration.instanceID = "test"
        var app = GatewayConfiguration.App(
            name: Registration.defaultApp,
            authentication: .token(keyFile: keyFile, keyID: keyID, teamID: teamID)
        )
        app.topic = topic
        app.apnsHost = "127.0.0.1:\(simulator.port)"
        app.caFile = simulator.caCertificatePath
        configuration.apps = [app]
        return configuration
    }

    /// Builds the gateway as `pushgate` does, from `configuration` (nothing from the test process's
    /// environment), and runs it until `body` returns. The only changes are knobs without a configuration
    /// key that keep tests quick: one event loop and a 1 s grace period per APNs client, 100 ms idle
    /// polling, no signal handlers (tests stop by cancelling), and whatever `dispatcher` sets.
    static func run<Result: Sendable>(
        _ configuration: GatewayConfiguration,
        dispatcher tweakDispatcher: (inout Dispatcher.Configuration) -> Void = { _ in },
        clock: any WallClock = SystemWallClock(),
        reloadSource: Gateway.ReloadSource? = nil,
        _ body: @escaping @Sendable (Gateway.Running, Gateway.Configuration) async throws -> Result
    ) async throws -> Result {
        var built = try Gateway.Configuration(configuration, environment: [:])
        built.reloadSource = reloadSource
        built.shutdownSignals = []
        built.reloadSignals = []
        built.dispatcher.idleInterval = .milliseconds(100)
        for index in built.apps.indices {
            built.apps[index].client.eventLoopThreads = 1
            built.apps[index].client.shutdownGracePeriod = .seconds(1)
            built.apps[index].webPush?.eventLoopThreads = 1
            built.apps[index].webPush?.shutdownGracePeriod = .seconds(1)
        }
        tweakDispatcher(&built.dispatcher)
        let gateway = Gateway(configuration: built)
        let (ready, readyContinuation) = AsyncStream<Gateway.Running>.makeStream()
        return try await withThrowingTaskGroup(of: Result?.self) { group in
            group.addTask {
                defer { readyContinuation.finish() }
                try await gateway.run(logger: TestLogger.make("gateway"), clock: clock) { running in
                    readyContinuation.yield(running)
                }
                return nil
            }
            var iterator = ready.makeAsyncIterator()
            guard let running = await iterator.next() else {
                _ = try await group.next()  // the start-up error, if it threw one
                throw ExternalTools.ToolError("gateway did not start")
            }
            let result = try await body(running, gateway.configuration)
            group.cancelAll()
            _ = try? await group.next()
            return result
        }
    }
}

/// Sends datagrams to 127.0.0.1:port, as a backend (or `nc -u`) would.
final class UDPSender: Sendable {
    private let fd: Int32
    private let port: Int

    init(port: Int) throws {
        fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        guard fd >= 0 else { throw ExternalTools.ToolError("socket() failed") }
        self.port = port
    }

    func send(_ text: String) {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { buffer in
            withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(fd, buffer.baseAddress, buffer.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        }
    }

    deinit { close(fd) }
}

/// Waits for a condition that another process or thread makes true; polls because the condition
/// lives elsewhere (a simulator, a database). Fails the wait after `timeout`.
func eventually(
    _ what: String,
    timeout: Duration = .seconds(60),
    _ condition: @Sendable () async throws -> Bool
) async throws {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if try await condition() { return }
        try await Task.sleep(for: .milliseconds(10))
    }
    throw ExternalTools.ToolError("timed out waiting for: \(what)")
}
