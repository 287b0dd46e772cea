public import Foundation
public import Hummingbird
import HummingbirdCore
public import Logging
public import PushgateCore

/// The HTTP API (JSON under `/v1`, plus `/healthz`, `/readyz`, `/metrics` and `/openapi.yaml`) over the
/// core ports: the device registry and delivery ledger of a `PushStore`, and a `NotificationIntake` for
/// new notifications.
///
/// Nothing starts in `init`. ``buildApplication()`` returns the Hummingbird application, which is a
/// `Service` (put it in the daemon's `ServiceGroup`: it binds in `run()` and serves until graceful
/// shutdown); tests run the same application in-process and live with HummingbirdTesting. ``run()`` is a
/// shorthand for running it alone. The routes are listed in `docs/http.md`.
///
/// (`HTTPAPI` itself does not conform to `Service`: that would need ServiceLifecycle as a direct
/// dependency of this target, and the application already is one.)
public struct HTTPAPI: Sendable {
    public let configuration: Configuration
    let handlers: APIHandlers
    let logger: Logger
    let requestMetrics: HTTPRequestMetrics
    let onBound: @Sendable (Int) async -> Void
    /// The API keys requests are checked against (when the API has keys): `configuration.apiKeys` until
    /// ``replaceAPIKeys(_:)``.
    let keyring: APIKeyringSlot

    /// - Parameters:
    ///   - clock: stamps registrations and notification requests.
    ///   - requestIDs: makes the id of each accepted notification request from its creation time.
    ///   - monitoring: request metrics, the `/metrics` text and the APNs half of `/readyz`.
    ///   - onBound: called with the bound TCP port once the server listens (useful with port 0).
    public init(
        configuration: Configuration = .init(),
        store: any PushStore,
        intake: any NotificationIntake,
        clock: any WallClock = SystemWallClock(),
        requestIDs: @escaping @Sendable (Date) -> PushgateCore.RequestID = { PushgateCore.RequestID.generate(at: $0) },
        logger: Logger = Logger(label: "pushgate.http"),
        monitoring: Monitoring = Monitoring(),
        onBound: @escaping @Sendable (Int) async -> Void = { _ in }
    ) throws(HTTPAPIConfigurationError) {
        try configuration.validate()
        self.configuration = configuration
        self.handlers = APIHandlers(
            apps: AppNames(configuration.apps),
            store: store,
            intake: intake,
            clock: clock,
            requestIDs: requestIDs,
            maximumBodyBytes: configuration.maximumBodyBytes,
            monitoring: monitoring,
            logger: logger
        )
        self.requestMetrics = HTTPRequestMetrics(factory: monitoring.metricsFactory)
        self.logger = logger
        self.onBound = onBound
        self.keyring = APIKeyringSlot(configuration.apiKeys)
    }

    /// Replaces the API keys (a reload): the next request is checked against `keys`, a request under way
    /// keeps the answer it got. Throws, changing nothing, what ``checkAPIKeys(_:)`` finds.
    public func replaceAPIKeys(_ keys: [APIKey]) throws(HTTPAPIConfigurationError) {
        try checkAPIKeys(keys)
        keyring.current = APIKeyring(keys)
    }

    /// Whether `keys` could replace the API's keys: each well formed and limited (if at all) to an app the
    /// API serves. Whether the API asks for keys at all is decided at start-up: an API that started without
    /// keys cannot be given some, and one that started with keys cannot lose them all (both need a restart).
    public func checkAPIKeys(_ keys: [APIKey]) throws(HTTPAPIConfigurationError) {
        guard !configuration.apiKeys.isEmpty else {
            throw HTTPAPIConfigurationError(
                key: "apiKeys",
                message: "the API started without keys; requiring them needs a restart"
            )
        }
        guard !keys.isEmpty else {
            throw HTTPAPIConfigurationError(
                key: "apiKeys",
                message: "the API started with keys; serving without them needs a restart"
            )
        }
        var changed = configuration
        changed.apiKeys = keys
        try changed.validate()
    }

    /// The Hummingbird application serving the API: a `Service` itself, and what tests run in-process.
    public func buildApplication() -> some ApplicationProtocol {
        let router = buildRouter()
        let logger = self.logger
        let onBound = self.onBound
        return Application(
            router: router,
            server: serverBuilder(),
            configuration: .init(
                address: .hostname(configuration.host, port: configuration.port),
                serverName: "pushgate"
            ),
            onServerRunning: { channel in
                let port = channel.localAddress?.port ?? 0
                logger.info("HTTP API listening", metadata: [HTTPLogKey.port: "\(port)"])
                await onBound(port)
            },
            logger: logger
        )
    }

    /// The router with every route and its guards. `innermost` runs after the guards, right before a
    /// route's handler (the fuzz target uses it to see what got past them).
    package func buildRouter(
        innermost: (any MiddlewareProtocol<Request, Response, APIRequestContext>)? = nil
    ) -> Router<APIRequestContext> {
        let router = Router(context: APIRequestContext.self)
        // Outermost, so that it counts the status the client gets.
        router.add(middleware: HTTPMetricsMiddleware(metrics: requestMetrics))
        router.add(
            middleware: APIErrorMiddleware(
                logger: logger,
                routes: handlers.routeTable,
                storeFailures: SharedFailureStorm(clock: handlers.clock)
            )
        )
        router.add(middleware: CanonicalPathMiddleware())
        if !configuration.apiKeys.isEmpty {
            router.add(
                middleware: APIKeyMiddleware(
                    keyring: keyring,
                    apps: handlers.apps,
                    store: handlers.store,
                    access: handlers.accessByEndpointPath
                )
            )
        }
        if let innermost { router.add(middleware: innermost) }
        // Hummingbird applies a router's middleware to the routes added after it: routes come last.
        handlers.addRoutes(to: router)
        return router
    }

    /// HTTP/1.1, inside TLS when ``Configuration/tls`` is set.
    private func serverBuilder() -> HTTPServerBuilder {
        guard let tls = configuration.tls else { return .http1() }
        return HTTPServerBuilder { responder in
            ReloadableTLSChannel(base: HTTP1Channel(responder: responder, configuration: .init()), tls: tls)
        }
    }

    /// Builds the application and runs it until it stops (graceful shutdown, or cancellation).
    public func run() async throws {
        try await buildApplication().run()
    }
}

/// Metadata keys of the HTTP API's log lines.
enum HTTPLogKey {
    static let port = "http.port"
    static let route = "http.route"
    static let error = "http.error"
    /// How many times the failure happened since its last line (one line per second at most).
    static let repeated = "http.repeated"
}
