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

/// Guards every route but the explicitly open ones (``RouteAccess/openWithoutKey``) when API keys are
/// configured: 401 without a known bearer key, 403 when the key is limited to another app than the one the
/// request acts on.
///
/// The decision is made on the route the router resolved, never on the raw path: Hummingbird runs a
/// router's middleware after it has matched the request, with the matched template in
/// `context.endpointPath` and its parameters in `context.parameters`, so the route checked is the route
/// that runs, under any spelling of its path. (Non-canonical spellings are refused before, by
/// `CanonicalPathMiddleware`, so that a proxy in front reads the path as the router does.) A request that
/// matches no route (nil `endpointPath`) still needs a key, and then goes on to the router's 404 or 405.
///
/// The app a request acts on (``RouteAccess``): the route's `{app}`, read by the same function as the
/// route's; the only app for the app-less routes; the stored request's app for `GET /v1/notifications/{id}`
/// (an id that names no stored request acts on no app: it goes on to the route's 404). For `POST
/// /v1/notifications` the app is in the body: the key's app goes to the route in the context
/// (`AppScopedContext.appScope`), and the route refuses another app from its own strict parse of the body
/// (`NotificationBody`), so there is one parse and one reading of `app`. A route this table does not know
/// is refused to a key limited to one app (fail closed).
struct APIKeyMiddleware<Context: AppScopedContext>: RouterMiddleware {
    let keyring: APIKeyringSlot
    let apps: AppNames
    let store: any PushStore
    /// ``RouteAccess`` by the router's template string (`APIHandlers.accessByEndpointPath`).
    let access: [String: RouteAccess]

    func handle(
        _ request: Request,
        context: Context,
        next: (Request, Context) async throws -> Response
    )
        async throws -> Response
    {
        let route = context.endpointPath
        if let route, RouteAccess.openWithoutKey.contains(route) { return try await next(request, context) }
        switch keyring.current.authenticate(authorization: request.headers[.authorization]) {
        case .missing:
            return Self.unauthorized("an API key is required: send Authorization: Bearer KEY")
        case .invalid:
            return Self.unauthorized("the API key is not valid")
        case .allowed(app: nil):
            return try await next(request, context)
        case .allowed(app: let scope?):
            guard let route else { return try await next(request, context) }  // no route runs: 404 or 405
            switch access[route] {
            case .appInBody:
                var context = context
                context.appScope = scope
                return try await next(request, context)
            case .appInPath:
                try Self.require(APIHandlers.pathParameter(context, "app"), scope: scope)
            case .onlyApp:
                try Self.require(apps.implicit, scope: scope)
            case .appOfStoredRequest:
                if let app = try await appOfStoredRequest(context) { try Self.require(app, scope: scope) }
            case .open, nil:
                // A route missing from the table, or marked open without being in the open list: only a key
                // for every app may use it.
                throw APIError(ValidationError.forbiddenApp(scope: scope))
            }
            return try await next(request, context)
        }
    }

    private static func require(_ app: String?, scope: String) throws(APIError) {
        guard app == scope else { throw APIError(ValidationError.forbiddenApp(scope: scope)) }
    }

    private static func unauthorized(_ message: String) -> Response {
        var response = APIError(.unauthorized, .unauthorized, field: "authorization", message: message).response()
        response.headers[.wwwAuthenticate] = "Bearer"
        return response
    }

    /// The app of the stored request the route's `{id}` names; nil when it names none.
    private func appOfStoredRequest(_ context: Context) async throws -> String? {
        guard let id = try? PushgateCore.RequestID(APIHandlers.pathParameter(context, "id"), field: "id"),
            let stored = try await store.request(id)
        else { return nil }
        return stored.app
    }
}

extension APIError.Code {
    static let nonCanonicalPath = APIError.Code("non_canonical_path")
}

/// Refuses (400 `non_canonical_path`) a request whose path is not in its one canonical spelling
/// (``CanonicalPath``), before any route or key check runs, with or without API keys.
struct CanonicalPathMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(
        _ request: Request,
        context: Context,
        next: (Request, Context) async throws -> Response
    )
        async throws -> Response
    {
        if let problem = CanonicalPath.problem(of: request.uri.path) {
            throw APIError(.badRequest, .nonCanonicalPath, field: "path", message: problem)
        }
        return try await next(request, context)
    }
}
