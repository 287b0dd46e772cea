import APNsHTTP2
import APNsSimulator
import Crypto
import Foundation
import Logging
import PushgateCore
import PushgateDispatch
import PushgateGateway
import PushgateUDP

#if canImport(Glibc)
import Glibc
#endif

/// The whole gateway in-process (the same composition `pushgate` runs), on port-0 UDP sockets and a
/// temporary SQLite file, delivering to an in-process simulator.
struct GatewayFixture {
    static let topic = "com.example.pushgate"

    struct Context: Sendable {
        var simulator: RunningAPNsSimulator
        var gateway: Gateway.Running
        var registration: UDPSender
        var notification: UDPSender
    }

    static func with<Result: Sendable>(
        simulator tweakSimulator: (inout APNsSimulator.Configuration) -> Void = { _ in },
        dispatcher tweakDispatcher: @escaping @Sendable (inout Dispatcher.Configuration) -> Void = { _ in },
        _ body: @escaping @Sendable (Context) async throws -> Result
    ) async throws -> Result {
        let directory = try TemporaryDirectory()
        let key = P256.Signing.PrivateKey()
        var simulatorConfiguration = APNsSimulator.Configuration()
        simulatorConfiguration.tokenKeys = [
            ProviderTokenKey(keyID: "KEY1234567", teamID: "TEAM123456", publicKey: key.publicKey)
        ]
        simulatorConfiguration.logger = TestLogger.make("simulator")
        tweakSimulator(&simulatorConfiguration)
        return try await APNsSimulator.withRunning(simulatorConfiguration) { simulator in
            let signer = try ProviderTokenSigner(privateKey: key, keyID: "KEY1234567", teamID: "TEAM123456")
            var client = APNsClient.Configuration(
                endpoint: .init(host: "127.0.0.1", port: simulator.port),
                authentication: .token(ProviderTokenManager(signer: signer)),
                trustRoots: .caFile(simulator.caCertificatePath!)
            )
            client.eventLoopThreads = 1
            client.shutdownGracePeriod = .seconds(1)
            var udp = UDPIngress.Configuration()
            udp.host = "127.0.0.1"
            udp.registrationPort = 0
            udp.notificationPort = 0
            var dispatcher = Dispatcher.Configuration(instanceID: InstanceID("test"))
            dispatcher.retryPolicy = RetryPolicy(
                backoff: Backoff(base: .milliseconds(20), multiplier: 2, cap: .milliseconds(200))
            )
            dispatcher.idleInterval = .milliseconds(100)
            tweakDispatcher(&dispatcher)
            var configuration = Gateway.Configuration(
                databasePath: directory.path("gateway.db"),
                udp: udp,
                client: client,
                topic: try Topic(topic),
                dispatcher: dispatcher
            )
            configuration.shutdownSignals = []
            let gateway = Gateway(configuration: configuration)
            let (ready, readyContinuation) = AsyncStream<Gateway.Running>.makeStream()
            return try await withThrowingTaskGroup(of: Result?.self) { group in
                group.addTask {
                    try await gateway.run(logger: TestLogger.make("gateway")) { running in
                        readyContinuation.yield(running)
                    }
                    return nil
                }
                var iterator = ready.makeAsyncIterator()
                guard let running = await iterator.next() else {
                    throw ExternalTools.ToolError("gateway did not start")
                }
                let context = Context(
                    simulator: simulator,
                    gateway: running,
                    registration: try UDPSender(port: running.udp.registrationPort),
                    notification: try UDPSender(port: running.udp.notificationPort)
                )
                let result = try await body(context)
                group.cancelAll()
                _ = try? await group.next()
                _ = directory
                return result
            }
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
