import Dispatch
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import NIOEmbedded
import PushgateCore
import PushgateHTTP
import PushgateSQLite
import Synchronization

/// Request paths (and methods and keys) through the API's real router and guards, with keys configured:
/// - a request without a key or with a wrong one never reaches a handler, except on the explicitly open
///   routes;
/// - a key limited to one app reaches a route only for that app (the route's own reading of `{app}`);
/// - a path that is not canonical never reaches a handler.
///
/// "Reaches a handler": the router's innermost middleware, right before the handler, saw the request (it
/// then answers without running the handler, so no input changes the store).
///
/// The first byte chooses the method (bits 0-2), the key (bits 3-4: none, a wrong one, one limited to
/// `default`, one for every app) and the apps served (bit 5: `default`, or `default` and `other`); the
/// rest is the path, as the request line carries it.
enum HTTPPathFuzz {
    private static let target = FuzzTarget.httpPath
    private static let methods: [HTTPRequest.Method] = [.get, .put, .delete, .post, .head, .patch, .options, .trace]
    private static let keys: [String?] = [nil, "wrong-key", "default-key", "every-app-key"]

    static func run(_ input: UnsafeRawBufferPointer) throws(FuzzViolation) {
        guard let first = input.first else { return }
        let method = methods[Int(first & 7)]
        let key = keys[Int(first >> 3) & 3]
        let api = first & 32 == 0 ? oneApp : twoApps
        let path = String(decoding: input.dropFirst(), as: UTF8.self)
        let reached = respond(api, method: method, path: path, key: key)
        guard let (route, app) = reached else { return }
        try expect(
            CanonicalPath.problem(of: Request(head: head(method, path, key), body: .init(buffer: .init())).uri.path)
                == nil,
            target,
            "a non-canonical path reached \(route): \(path.debugDescription)"
        )
        switch key {
        case nil, "wrong-key":
            try expect(
                ["/healthz", "/readyz", "/metrics", "/openapi.yaml"].contains(route),
                target,
                "\(method) \(path.debugDescription) reached \(route) with key \(key ?? "none")"
            )
        case "default-key":
            if route.contains("{app}") {
                try expect(app == "default", target, "a key for default reached \(route) for app \(app ?? "?")")
            }
        default:
            break
        }
    }

    /// An API with keys on a store in a temporary folder, and the middleware that records what got past
    /// the guards.
    private final class Harness: Sendable {
        let responder: any HTTPResponder<APIRequestContext>
        let recorder = Recorder()

        init(apps: [String]) {
            let folder = FileManager.default.temporaryDirectory
                .appendingPathComponent("pushgate-fuzz-path-\(ProcessInfo.processInfo.processIdentifier)-\(apps.count)")
            try? FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            var logger = Logger(label: "pushgate.fuzz")
            logger.logLevel = .critical
            let store = try! SQLiteStore(path: folder.appendingPathComponent("fuzz.sqlite").path, logger: logger)
            var configuration = HTTPAPI.Configuration(host: "127.0.0.1", port: 0, apps: apps)
            configuration.apiKeys = [APIKey(secret: "every-app-key"), APIKey(secret: "default-key", app: "default")]
            let api = try! HTTPAPI(configuration: configuration, store: store, intake: RefusingIntake(), logger: logger)
            responder = api.buildRouter(innermost: recorder).buildResponder()
        }
    }

    /// The innermost middleware: records the resolved route and its `{app}` (decoded as the routes decode
    /// it), and answers 299 instead of running the route.
    private final class Recorder: RouterMiddleware, Sendable {
        typealias Context = APIRequestContext
        let reached = Mutex<(route: String, app: String?)?>(nil)

        func handle(
            _ request: Request,
            context: APIRequestContext,
            next: (Request, APIRequestContext) async throws -> Response
        ) async throws -> Response {
            guard let route = context.endpointPath else { return try await next(request, context) }
            let raw = context.parameters.get("app")
            reached.withLock { $0 = (route, raw.map { $0.removingPercentEncoding ?? $0 }) }
            return Response(status: .init(code: 299))
        }
    }

    /// Never called: the recorder answers before any handler runs.
    private struct RefusingIntake: NotificationIntake {
        func submit(_ request: NotificationRequest) async throws -> EnqueueResult {
            throw StoreError(code: .backend, message: "the fuzz target's intake takes nothing")
        }
    }

    private static let oneApp = Harness(apps: ["default"])
    private static let twoApps = Harness(apps: ["default", "other"])

    private static func head(_ method: HTTPRequest.Method, _ path: String, _ key: String?) -> HTTPRequest {
        var head = HTTPRequest(method: method, scheme: "http", authority: "127.0.0.1", path: path)
        if let key { head.headerFields[.authorization] = "Bearer \(key)" }
        return head
    }

    /// Runs the request through the router; the route and app that reached a handler, if one did.
    private static func respond(
        _ harness: Harness,
        method: HTTPRequest.Method,
        path: String,
        key: String?
    ) -> (String, String?)? {
        harness.recorder.reached.withLock { $0 = nil }
        let request = Request(head: head(method, path, key), body: .init(buffer: ByteBuffer()))
        let context = APIRequestContext(
            source: ApplicationRequestContextSource(channel: EmbeddedChannel(), logger: Logger(label: "pushgate.fuzz"))
        )
        let done = DispatchSemaphore(value: 0)
        let responder = harness.responder
        // libFuzzer calls from a plain thread; the router is async. The replay test calls off the cooperative
        // pool too, so this wait never holds a thread the task needs.
        Task {
            _ = try? await responder.respond(to: request, context: context)
            done.signal()
        }
        done.wait()
        return harness.recorder.reached.withLock { $0.map { ($0.route, $0.app) } }
    }
}
