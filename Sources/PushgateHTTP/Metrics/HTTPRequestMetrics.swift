import CoreMetrics
import Hummingbird
import Synchronization

/// Counts the API's requests by method, route template and status, and times them by route. The route
/// is the router's template (`/v1/apps/{app}/devices/{token}`), never the raw path: labels carry no
/// device token, app-provided group name or request id. Requests that match no route count as
/// `unmatched`.
///
/// Metric objects are made once per label set and kept (the HTTP API is not the 100k/s path, so one
/// lock per request for the lookup is fine).
final class HTTPRequestMetrics: Sendable {
    private struct Key: Hashable {
        var method: String
        var route: String
        var status: Int
    }

    private let factory: any MetricsFactory
    private let counters = Mutex<[Key: CoreMetrics.Counter]>([:])
    private let timers = Mutex<[String: CoreMetrics.Timer]>([:])

    static let requestsName = "pushgate_http_requests_total"
    static let durationName = "pushgate_http_request_duration_seconds"

    init(factory: any MetricsFactory) {
        self.factory = factory
    }

    func record(method: HTTPRequest.Method, route: String?, status: HTTPResponse.Status, duration: Duration) {
        let route = Self.routeLabel(route)
        let key = Key(method: Self.methodLabel(method), route: route, status: status.code)
        let counter = counters.withLock { counters in
            if let counter = counters[key] { return counter }
            let counter = CoreMetrics.Counter(
                label: Self.requestsName,
                dimensions: [("method", key.method), ("route", key.route), ("status", "\(key.status)")],
                factory: factory
            )
            counters[key] = counter
            return counter
        }
        counter.increment()
        let timer = timers.withLock { timers in
            if let timer = timers[route] { return timer }
            let timer = CoreMetrics.Timer(label: Self.durationName, dimensions: [("route", route)], factory: factory)
            timers[route] = timer
            return timer
        }
        timer.recordNanoseconds(
            duration.components.seconds * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000
        )
    }

    /// The router's template, or `unmatched` (Hummingbird names a miss `NotFound`).
    static func routeLabel(_ endpointPath: String?) -> String {
        guard let endpointPath, endpointPath != "NotFound" else { return "unmatched" }
        return endpointPath.hasPrefix("/") ? endpointPath : "/" + endpointPath
    }

    /// A method token is free text on the wire: anything but the standard ones is `other`.
    static func methodLabel(_ method: HTTPRequest.Method) -> String {
        switch method {
        case .get, .put, .post, .delete, .head, .options, .patch: method.rawValue
        default: "other"
        }
    }
}

/// The outermost middleware: sees the final status, after `APIErrorMiddleware` turned errors into answers.
struct HTTPMetricsMiddleware<Context: RequestContext>: RouterMiddleware {
    let metrics: HTTPRequestMetrics

    func handle(
        _ request: Request,
        context: Context,
        next: (Request, Context) async throws -> Response
    )
        async throws -> Response
    {
        let start = ContinuousClock.now
        do {
            let response = try await next(request, context)
            metrics.record(
                method: request.method,
                route: context.endpointPath,
                status: response.status,
                duration: .now - start
            )
            return response
        } catch {
            let status = (error as? any HTTPResponseError)?.status ?? .internalServerError
            metrics.record(method: request.method, route: context.endpointPath, status: status, duration: .now - start)
            throw error
        }
    }
}
