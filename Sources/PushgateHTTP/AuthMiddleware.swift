import Foundation
import Hummingbird
import PushgateCore

extension APIError.Code {
    static let unauthorized = APIError.Code("unauthorized")
    static let forbiddenApp = APIError.Code("forbidden_app")
}

/// Guards everything under `/v1` when API keys are configured: 401 without a known bearer key, 403
/// when the key is limited to another app than the one the request acts on. `/healthz`, `/readyz`
/// and the other top-level routes stay open (probes and scrapers carry no keys).
///
/// The app a request acts on: the `{app}` of `/v1/apps/{app}/...`; the only app for the app-less
/// routes; the body's `app` for `POST /v1/notifications`, read by the route's own strict reader and rule
/// (`NotificationBody.app`), so both see the same app; the stored request's app for
/// `GET /v1/notifications/{id}`. A body whose app cannot be told (not strict JSON, a repeated key, `app`
/// not a string, no `app` while several apps are served) is refused here with the error the route would
/// give. Only a report id that names no stored request acts on no app: it goes on to the route's 404.
struct APIKeyMiddleware<Context: RequestContext>: RouterMiddleware {
    let keyring: APIKeyring
    let apps: AppNames
    let store: any PushStore
    let maximumBodyBytes: Int

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
            var request = request
            if let app = try await app(of: &request), app != scope {
                throw APIError(
                    .forbidden,
                    .forbiddenApp,
                    field: "app",
                    message: "this API key may act on app \"\(scope)\" only"
                )
            }
            return try await next(request, context)
        }
    }

    private static func unauthorized(_ message: String) -> Response {
        var response = APIError(.unauthorized, .unauthorized, field: "authorization", message: message).response()
        response.headers[.wwwAuthenticate] = "Bearer"
        return response
    }

    /// The app the request acts on, when it can be told.
    private func app(of request: inout Request) async throws -> String? {
        let parts = request.uri.path.split(separator: "/", omittingEmptySubsequences: true)
        if parts.count >= 3, parts[1] == "apps" {
            return String(parts[2]).removingPercentEncoding ?? String(parts[2])
        }
        if parts.count == 2, parts[1] == "notifications", request.method == .post {
            // Read once and put back, so the route reads the same bytes.
            let body = try await request.collectBody(upTo: maximumBodyBytes)
            return try NotificationBody.app(Array(body.readableBytesView), apps: apps)
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
