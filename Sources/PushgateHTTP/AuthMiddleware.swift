import Foundation
import Hummingbird
import PushgateCore

extension APIError.Code {
    static let unauthorized = APIError.Code("unauthorized")
}

extension ValidationError.Code {
    /// The API key is limited to another app than the one the request acts on (403).
    static let forbiddenApp = ValidationError.Code("forbidden_app")
}

extension ValidationError {
    /// A request for another app than `scope`, the one its API key may act on.
    static func forbiddenApp(scope: String) -> ValidationError {
        ValidationError(code: .forbiddenApp, field: "app", message: "this API key may act on app \"\(scope)\" only")
    }
}

/// Guards everything under `/v1` when API keys are configured: 401 without a known bearer key, 403
/// when the key is limited to another app than the one the request acts on. `/healthz`, `/readyz`
/// and the other top-level routes stay open (probes and scrapers carry no keys).
///
/// The app a request acts on: the `{app}` of `/v1/apps/{app}/...`; the only app for the app-less
/// routes; the stored request's app for `GET /v1/notifications/{id}` (an id that names no stored
/// request acts on no app: it goes on to the route's 404). For `POST /v1/notifications` the app is in the
/// body: the key's app goes to the route in the context (`AppScopedContext.appScope`), and the route
/// refuses another app from its own strict parse of the body (`NotificationBody`), so there is one parse
/// and one reading of `app`, and a body whose app cannot be told is refused by that parse.
struct APIKeyMiddleware<Context: AppScopedContext>: RouterMiddleware {
    let keyring: APIKeyring
    let apps: AppNames
    let store: any PushStore

    func handle(
        _ request: Request,
        context: Context,
        next: (Request, Context) async throws -> Response
    )
        async throws -> Response
    {
        let path = request.uri.path
        guard path == "/v1" || path.hasPrefix("/v1/") else { return try await next(request, context) }
        switch keyring.authenticate(authorization: request.headers[.authorization]) {
        case .missing:
            return Self.unauthorized("an API key is required: send Authorization: Bearer KEY")
        case .invalid:
            return Self.unauthorized("the API key is not valid")
        case .allowed(app: nil):
            return try await next(request, context)
        case .allowed(app: let scope?):
            if Self.appIsInBody(request) {
                var context = context
                context.appScope = scope
                return try await next(request, context)
            }
            if let app = try await app(of: request), app != scope {
                throw APIError(ValidationError.forbiddenApp(scope: scope))
            }
            return try await next(request, context)
        }
    }

    private static func unauthorized(_ message: String) -> Response {
        var response = APIError(.unauthorized, .unauthorized, field: "authorization", message: message).response()
        response.headers[.wwwAuthenticate] = "Bearer"
        return response
    }

    /// `POST /v1/notifications`: the route reads the app from the body.
    private static func appIsInBody(_ request: Request) -> Bool {
        request.method == .post && request.uri.path.split(separator: "/") == ["v1", "notifications"]
    }

    /// The app the request acts on, from its path (or the stored request it names); nil when it acts on no
    /// app.
    private func app(of request: Request) async throws -> String? {
        let parts = request.uri.path.split(separator: "/", omittingEmptySubsequences: true)
        if parts.count >= 3, parts[1] == "apps" {
            return String(parts[2]).removingPercentEncoding ?? String(parts[2])
        }
        if parts.count == 3, parts[1] == "notifications" {
            guard let id = try? PushgateCore.RequestID(String(parts[2]), field: "id"),
                let stored = try await store.request(id)
            else { return nil }
            return stored.app
        }
        return apps.implicit
    }
}
