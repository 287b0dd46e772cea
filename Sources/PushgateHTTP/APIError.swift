import Foundation
import Hummingbird
import Logging
import PushgateCore

/// A 4xx or 5xx answer: `{"error": {"code": ..., "message": ..., "field": ...}}`.
///
/// Equality is on status, code and field, so tests need not repeat message text. Messages never carry
/// payloads; they may quote a (short) name the client sent.
package struct APIError: Error, Hashable, Sendable, CustomStringConvertible {
    package struct Code: Hashable, Sendable, CustomStringConvertible {
        package let rawValue: String
        init(_ rawValue: String) { self.rawValue = rawValue }
        package var description: String { rawValue }

        static let malformedJSON = Code("malformed_json")
        static let notAnObject = Code("not_an_object")
        static let duplicateKey = Code("duplicate_key")
        static let wrongType = Code("wrong_type")
        static let unknownField = Code("unknown_field")
        static let missingField = Code("missing_field")
        static let bodyTooLarge = Code("body_too_large")
        static let unknownApp = Code("unknown_app")
        static let unknownGroup = Code("unknown_group")
        static let unknownDevice = Code("unknown_device")
        static let notAMember = Code("not_a_member")
        static let unknownNotification = Code("unknown_notification")
        static let unknownType = Code("unknown_type")
        static let invalidGroup = Code("invalid_group")
        static let invalidApp = Code("invalid_app")
        static let invalidLimit = Code("invalid_limit")
        static let invalidCursor = Code("invalid_cursor")
        static let noTargets = Code("no_targets")
        static let idempotencyKeyReused = Code("idempotency_key_reused")
        static let notFound = Code("not_found")
        static let methodNotAllowed = Code("method_not_allowed")
        static let storeUnavailable = Code("store_unavailable")
        static let diskLow = Code("disk_low")
        static let apnsUnavailable = Code("apns_unavailable")
        static let fcmUnavailable = Code("fcm_unavailable")
        static let configurationAlarm = Code("configuration_alarm")
        static let internalError = Code("internal_error")
    }

    let status: HTTPResponse.Status
    package let code: Code
    let field: String?
    let message: String

    init(_ status: HTTPResponse.Status, _ code: Code, field: String?, message: String) {
        self.status = status
        self.code = code
        self.field = field
        self.message = message
    }

    /// A rule of the core vocabulary (token, push type, payload...) broken by the request: 400; an app
    /// this API does not serve: 404; an app the API key may not act on: 403.
    init(_ error: ValidationError) {
        let status: HTTPResponse.Status =
            switch error.code {
            case .unknownApp: .notFound
            case .forbiddenApp: .forbidden
            default: .badRequest
            }
        self.init(status, Code(error.code.rawValue), field: error.field, message: error.message)
    }

    static func unknownApp(_ app: String, field: String = "app") -> APIError {
        APIError(AppNames.unknown(app, field: field))
    }

    static func missing(_ field: String) -> APIError {
        APIError(.badRequest, .missingField, field: field, message: "\(field) is required")
    }

    static func bodyTooLarge(limit: Int) -> APIError {
        APIError(.contentTooLarge, .bodyTooLarge, field: "body", message: "the request body exceeds \(limit) bytes")
    }

    package var description: String { "\(status.code) \(code)\(field.map { " (\($0))" } ?? ""): \(message)" }

    package static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.status == rhs.status && lhs.code == rhs.code && lhs.field == rhs.field
    }
    package func hash(into hasher: inout Hasher) {
        hasher.combine(code)
        hasher.combine(field)
    }

    /// The JSON answer.
    func response() -> Response {
        JSONResponse.make(ErrorBody(error: .init(code: code.rawValue, message: message, field: field)), status: status)
    }

    private struct ErrorBody: Encodable {
        struct Detail: Encodable {
            var code: String
            var message: String
            var field: String?

            func encode(to encoder: any Encoder) throws {
                var container = encoder.container(keyedBy: CodingKeys.self)
                try container.encode(code, forKey: .code)
                try container.encode(message, forKey: .message)
                try container.encode(field, forKey: .field)  // null when the request as a whole is at fault
            }

            enum CodingKeys: String, CodingKey { case code, message, field }
        }
        var error: Detail
    }
}

/// Turns every error a route throws (and the router's own 404) into the JSON error body. Store failures
/// are logged here, where they are handled, and answered 503 without the backend's message.
struct APIErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    let logger: Logger
    let routes: RouteTable
    /// Store failures are logged at most once per second per route and code, with a count.
    let storeFailures: SharedFailureStorm<String>

    func handle(
        _ request: Request,
        context: Context,
        next: (Request, Context) async throws -> Response
    )
        async throws -> Response
    {
        do {
            return try await next(request, context)
        } catch let error as APIError {
            return error.response()
        } catch let error as any HTTPResponseError {
            if error.status == .notFound, let allowed = routes.allowedMethods(path: request.uri.path) {
                // The router answers 404 for a known path asked with a method it does not have.
                let allow = allowed.map(\.rawValue).joined(separator: ", ")
                var response = APIError(
                    .methodNotAllowed,
                    .methodNotAllowed,
                    field: nil,
                    message: "\(request.method) is not allowed here; use \(allow)"
                ).response()
                response.headers[.allow] = allow
                return response
            }
            return Self.translate(error.status).response()
        } catch let error as StoreError {
            let route = context.endpointPath ?? "?"
            if let count = storeFailures.record("\(route) \(error.code)") {
                logger.error(
                    "store failed while serving a request",
                    metadata: [
                        HTTPLogKey.route: "\(route)", HTTPLogKey.error: "\(error)", HTTPLogKey.repeated: "\(count)",
                    ]
                )
            }
            return APIError(
                .serviceUnavailable,
                .storeUnavailable,
                field: nil,
                message: "the store could not answer; try again"
            ).response()
        } catch {
            logger.error(
                "request failed",
                metadata: [HTTPLogKey.route: "\(context.endpointPath ?? "?")", HTTPLogKey.error: "\(error)"]
            )
            return APIError(.internalServerError, .internalError, field: nil, message: "internal error").response()
        }
    }

    static func translate(_ status: HTTPResponse.Status) -> APIError {
        switch status {
        case .notFound:
            APIError(.notFound, .notFound, field: nil, message: "no such route")
        case .methodNotAllowed:
            APIError(.methodNotAllowed, .methodNotAllowed, field: nil, message: "method not allowed on this route")
        case .contentTooLarge:
            APIError(.contentTooLarge, .bodyTooLarge, field: "body", message: "the request body is too large")
        default:
            APIError(
                status,
                APIError.Code("http_\(status.code)"),
                field: nil,
                message: status.reasonPhrase.isEmpty ? "request failed" : status.reasonPhrase
            )
        }
    }
}

/// The API's path templates and their methods, matched segment by segment (`{name}` matches any one
/// non-empty segment). `HEAD` is allowed wherever `GET` is, as the router does.
struct RouteTable: Sendable {
    private let routes: [(segments: [String], methods: [HTTPRequest.Method])]

    init(_ paths: [(String, [HTTPRequest.Method])]) {
        routes = paths.map { path, methods in
            (path.split(separator: "/").map(String.init), methods.contains(.get) ? methods + [.head] : methods)
        }
    }

    /// The methods of the first template `path` matches; nil when none does.
    func allowedMethods(path: String) -> [HTTPRequest.Method]? {
        let segments = path.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
        for route in routes where route.segments.count == segments.count {
            let matches = zip(route.segments, segments).allSatisfy { template, segment in
                template.hasPrefix("{") ? !segment.isEmpty : template == segment
            }
            if matches { return route.methods }
        }
        return nil
    }
}
