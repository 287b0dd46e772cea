public import Logging
public import NIOCore
import NIOPosix
import PushTransport
public import PushgateCore
public import ServiceLifecycle

/// A client for FCM's HTTP v1 `messages:send`: one pool of HTTP/2 connections for one service account
/// and one endpoint (Google, or a simulator).
///
/// Two ways to send, as `APNsClient`:
/// - `send(_:to:)` awaits one outcome (the `pushgate send` path);
/// - `submit(_:)` queues many messages whose outcomes go to an `FCMOutcomeReceiver` (the dispatcher's path).
///
/// Lifecycle, as `APNsClient`: `init` opens nothing (connections open on demand); `run()` (a `Service`)
/// keeps it alive until graceful shutdown, then lets open streams finish; or `withClient { ... }`.
public final class FCMClient: FCMNotificationTransport, Sendable {
    public let configuration: Configuration
    private let logger: Logger

    public init(
        configuration: Configuration,
        eventLoopGroup: (any EventLoopGroup)? = nil,
        logger: Logger? = nil
    ) throws {
        var logger = logger ?? Logger(label: "pushgate.fcm")
        logger[metadataKey: "fcm.endpoint"] = "\(configuration.endpoint)"
        self.logger = logger
        self.configuration = configuration
        _ = try configuration.effectiveServiceAccount()
        _ = try configuration.makeTLSContext()
    }

    /// Runs `body` with a client and shuts it down afterwards, whatever happens.
    public static func withClient<Result: Sendable>(
        configuration: Configuration,
        eventLoopGroup: (any EventLoopGroup)? = nil,
        logger: Logger? = nil,
        _ body: (FCMClient) async throws -> Result
    ) async throws -> Result {
        let client = try FCMClient(configuration: configuration, eventLoopGroup: eventLoopGroup, logger: logger)
        do {
            let result = try await body(client)
            await client.shutdown()
            return result
        } catch {
            await client.shutdown()
            throw error
        }
    }

    /// Queues messages; each outcome goes to its request's receiver exactly once. Never blocks.
    @discardableResult
    public func submit(_ requests: [FCMSendRequest]) -> [UInt64] {
        // Unfinished: the HTTP/2 pool is not wired yet.
        for request in requests { request.receiver.receive(.failed(.shutdown), for: request) }
        return requests.map { _ in 0 }
    }

    /// Takes back the messages among `ids` still queued (not yet written to any connection); each
    /// completes with a `cancelled` transport failure. Returns how many were taken back.
    @discardableResult
    public func withdraw(_ ids: some Sequence<UInt64>) -> Int { 0 }

    /// Abandons a message: dequeued if still queued, its stream reset if in flight.
    public func cancel(_ id: UInt64) {}

    /// Sends one message to one registration token and waits for the outcome.
    public func send(_ message: FCMMessage, to token: String, deadline: NIODeadline? = nil) async -> FCMOutcome {
        .failed(.shutdown)
    }

    /// Connections it may open times the streams each may carry (the server's
    /// SETTINGS_MAX_CONCURRENT_STREAMS, capped by `maxStreams`; 100 assumed until a connection says).
    public var inFlightCapacity: Int { configuration.maxConnections * min(configuration.maxStreams ?? 100, 100) }

    /// False while FCM cannot be reached: the last connection attempt failed and none succeeded since.
    public var isFCMReachable: Bool { true }

    /// Stops intake, fails queued messages with `shutdown`, lets in-flight streams finish for up to
    /// `configuration.shutdownGracePeriod`, closes the connections.
    public func shutdown() async {}
}

extension FCMClient: Service {
    /// Keeps the client until graceful shutdown (or cancellation), then shuts it down.
    public func run() async throws {
        try? await gracefulShutdown()
        await shutdown()
    }
}
