import Hummingbird

/// How a route is guarded when API keys are configured, decided on the route the router resolved (its
/// template and its parameters), never on the raw path: what is checked is what will run.
enum RouteAccess: Sendable, Hashable {
    /// Open without a key: only the routes of ``RouteAccess/openWithoutKey``.
    case open
    /// A key is required; the app is the route's `{app}` parameter.
    case appInPath
    /// A key is required; the app is the only one served (`/v1/groups/...` with one app).
    case onlyApp
    /// A key is required; the app is in the body (`POST /v1/notifications`), read by the route's own parse.
    case appInBody
    /// A key is required; the app is the one of the stored request the `{id}` names.
    case appOfStoredRequest

    /// The only routes open without a key, by an explicit list of templates: probes and scrapers carry no
    /// keys. Every other route, `/v1` or not, present or future, needs one.
    static let openWithoutKey: Set<String> = ["/healthz", "/readyz", "/metrics", "/openapi.yaml"]

    /// The template string the router reports for a route (`context.endpointPath`), made by the router's
    /// own type so that the two always agree.
    static func endpointPath(of template: String) -> String {
        RouterPath(template).description
    }
}
