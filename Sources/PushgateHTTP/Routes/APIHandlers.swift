import Foundation
import Hummingbird
import Logging
import PushgateCore

/// The routes' work, over the core ports. Each handler validates everything before touching the store,
/// and touches it with one call (one transaction), so nothing is half-applied.
struct APIHandlers: Sendable {
    let apps: AppNames
    let store: any PushStore
    let intake: any NotificationIntake
    let clock: any WallClock
    let requestIDs: @Sendable (Date) -> PushgateCore.RequestID
    let maximumBodyBytes: Int
    let monitoring: HTTPAPI.Monitoring
    let logger: Logger

    static let defaultPageSize = 100
    static let maximumPageSize = 1000

    func addRoutes(to router: Router<some AppScopedContext>) {
        router.get("healthz") { _, _ in JSONResponse.make(["status": "ok"]) }
        router.get("readyz") { _, _ in await readiness() }
        router.get("openapi.yaml") { _, _ in try OpenAPIDocument.response() }
        if let exposition = monitoring.metricsExposition {
            router.get("metrics") { _, _ in
                Response(
                    status: .ok,
                    headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                    body: ResponseBody(byteBuffer: ByteBuffer(bytes: await exposition()))
                )
            }
        }

        // The registry routes, per app; with one app, also without `/apps/{app}`.
        addRegistryRoutes(to: router.group("v1/apps/{app}"), fixedApp: nil)
        if let implicit = apps.implicit {
            addRegistryRoutes(to: router.group("v1"), fixedApp: implicit)
        }

        router.post("v1/notifications") { request, context in try await submit(request, scope: context.appScope) }
        router.get("v1/notifications/{id}") { _, context in
            try await report(id: context.parameters.get("id") ?? "")
        }
    }

    /// Every route the API serves: its template, its methods and how it is guarded. `APIErrorMiddleware`
    /// answers 405 with `Allow` (not the router's 404) for a known path asked with any other method, QUERY and
    /// made-up ones included; `APIKeyMiddleware` reads each route's ``RouteAccess``.
    var routes: [(template: String, methods: [HTTPRequest.Method], access: RouteAccess)] {
        var routes: [(String, [HTTPRequest.Method], RouteAccess)] = [
            ("healthz", [.get], .open), ("readyz", [.get], .open), ("openapi.yaml", [.get], .open),
            ("v1/notifications", [.post], .appInBody), ("v1/notifications/{id}", [.get], .appOfStoredRequest),
        ]
        if monitoring.metricsExposition != nil { routes.append(("metrics", [.get], .open)) }
        for (prefix, access) in [("v1/apps/{app}/", RouteAccess.appInPath)]
            + (apps.implicit == nil ? [] : [("v1/", .onlyApp)])
        {
            routes += [
                (prefix + "groups/{group}/devices/{token}", [.put, .delete], access),
                (prefix + "groups/{group}/devices", [.get], access),
                (prefix + "devices/{token}", [.get, .delete], access),
            ]
        }
        return routes
    }

    var routeTable: RouteTable { RouteTable(routes.map { ($0.template, $0.methods) }) }

    /// How each route is guarded, by the template the router reports for it (`context.endpointPath`).
    var accessByEndpointPath: [String: RouteAccess] {
        Dictionary(routes.map { (RouteAccess.endpointPath(of: $0.template), $0.access) }) { first, _ in first }
    }

    private func addRegistryRoutes<Context: RequestContext>(to group: RouterGroup<Context>, fixedApp: String?) {
        group.put("groups/{group}/devices/{token}") { request, context in
            var (app, group, token) = try membership(request, context, fixedApp: fixedApp)
            if token.platform == .webpush { token = try await subscription(of: request, endpoint: token) }
            _ = try await store.register(Registration(app: app, token: token, group: group, at: clock.now()))
            return Response(status: .noContent)
        }
        group.delete("groups/{group}/devices/{token}") { request, context in
            let (app, group, token) = try membership(request, context, fixedApp: fixedApp)
            guard try await store.unassign(app: app, token: token, group: group) else {
                throw APIError(
                    .notFound,
                    .notAMember,
                    field: "token",
                    message: "the device is not in group \"\(group.prefix(64))\""
                )
            }
            return Response(status: .noContent)
        }
        group.get("groups/{group}/devices") { request, context in
            let app = try self.app(context, fixedApp: fixedApp)
            let group = try groupName(context)
            return try await listDevices(app: app, group: group, query: request.uri.queryParameters)
        }
        group.delete("devices/{token}") { request, context in
            let app = try self.app(context, fixedApp: fixedApp)
            let token = try self.token(request, context)
            guard try await store.removeDevice(app: app, token: token) else { throw Self.unknownDevice() }
            return Response(status: .noContent)
        }
        group.get("devices/{token}") { request, context in
            let app = try self.app(context, fixedApp: fixedApp)
            let token = try self.token(request, context)
            guard let record = try await store.device(app: app, token: token) else { throw Self.unknownDevice() }
            return JSONResponse.make(DeviceBody(record))
        }
    }

    // MARK: Handlers

    private func listDevices(app: String, group: String, query: Parameters) async throws -> Response {
        var limit = Self.defaultPageSize
        if let raw = query.get("limit") {
            guard let value = Int(raw), (1...Self.maximumPageSize).contains(value) else {
                throw APIError(
                    .badRequest,
                    .invalidLimit,
                    field: "limit",
                    message: "limit must be an integer from 1 to \(Self.maximumPageSize)"
                )
            }
            limit = value
        }
        var cursor: GroupCursor?
        if let raw = query.get("after") {
            guard !raw.isEmpty else {
                throw APIError(.badRequest, .invalidCursor, field: "after", message: "after must not be empty")
            }
            cursor = GroupCursor(raw)
        }
        let page: GroupPage
        do {
            page = try await store.devices(app: app, group: group, after: cursor, limit: limit)
        } catch let error as StoreError where error.code == .unknownGroup {
            throw APIError(.notFound, .unknownGroup, field: "group", message: error.message)
        } catch let error as StoreError where error.code == .invalidArgument && cursor != nil {
            throw APIError(
                .badRequest,
                .invalidCursor,
                field: "after",
                message: "after must be a cursor from a previous page"
            )
        }
        return JSONResponse.make(GroupPageBody(page))
    }

    /// `scope`: the one app the API key may act on (nil: any).
    ///
    /// With an `Idempotency-Key`, the store answers a retry (same app, key and body bytes within 24 h)
    /// with the first request's id and target count and stores nothing, and refuses the key with
    /// another body (409): see docs/http.md, "Idempotent requests".
    private func submit(_ request: Request, scope: String?) async throws -> Response {
        let key = try Self.idempotencyKey(request)
        let bytes = try await body(of: request)
        let now = clock.now()
        var notification = try NotificationBody.parse(
            bytes,
            apps: apps,
            scope: scope,
            id: requestIDs(now),
            receivedAt: now
        )
        notification.idempotency = key.map { Idempotency(key: $0, requestBytes: bytes) }
        let result: EnqueueResult
        do {
            result = try await intake.submit(notification)
        } catch let error as StoreError where error.code == .unknownGroup {
            throw APIError(.badRequest, .unknownGroup, field: "groups", message: error.message)
        } catch let error as StoreError where error.code == .noTargets {
            throw APIError(.badRequest, .noTargets, field: "groups", message: error.message)
        } catch let error as StoreError where error.code == .idempotencyKeyReused {
            throw APIError(
                .conflict,
                .idempotencyKeyReused,
                field: Self.idempotencyKeyHeader.rawName,
                message: "this Idempotency-Key names another notification request of the app (sent in the last 24 h "
                    + "with a different body): use a new key for a new request"
            )
        }
        logger.info(
            result.isReplay
                ? "notification request retried: answered with the request stored under its idempotency key"
                : "notification request accepted",
            metadata: [PushLogKey.requestID: "\(result.id)", "push.targets": "\(result.targetCount)"]
        )
        return JSONResponse.make(
            bytes: SubmitBody(id: result.id.value, targets: result.targetCount).json,
            status: .accepted
        )
    }

    /// (`HTTPField.Name`, through the one HTTPTypes type Hummingbird re-exports.)
    static let idempotencyKeyHeader = HTTPFields.Element.Name("Idempotency-Key")!

    /// The request's `Idempotency-Key` (nil without one), read before the body: a key given twice, or
    /// that is not 1-255 printable ASCII characters, is 400 `invalid_idempotency_key` and nothing is stored.
    private static func idempotencyKey(_ request: Request) throws(APIError) -> IdempotencyKey? {
        let values = request.headers[values: idempotencyKeyHeader]
        guard let value = values.first else { return nil }
        let field = idempotencyKeyHeader.rawName
        guard values.count == 1 else {
            throw APIError(
                .badRequest,
                APIError.Code(ValidationError.Code.invalidIdempotencyKey.rawValue),
                field: field,
                message: "Idempotency-Key must be given once"
            )
        }
        return try validated { () throws(ValidationError) in try IdempotencyKey(value, field: field) }
    }

    private func report(id raw: String) async throws -> Response {
        let id = try validated { () throws(ValidationError) in try PushgateCore.RequestID(raw, field: "id") }
        guard let report = try await store.report(id) else {
            throw APIError(
                .notFound,
                .unknownNotification,
                field: "id",
                message: "no notification request with this id"
            )
        }
        return JSONResponse.make(ReportBody(report))
    }

    /// Ready when the store answers a cheap query (a primary-key lookup), its volume has room
    /// (`store.minimumFreeBytes`, SQLite), an APNs connection is
    /// possible and, when some app has FCM configured, an FCM connection is too (the gateway's
    /// answers, see `HTTPAPI.Monitoring.apnsReachable` and `fcmReachable`).
    private func readiness() async -> Response {
        do {
            // Promptly, even when the database went silent (`Monitoring.readinessStoreDeadline`).
            _ = try await withDeadline(monitoring.readinessStoreDeadline) { [store] in
                try await store.request(Self.readinessProbeID)
            }
        } catch {
            logger.warning("readiness check failed: the store did not answer", metadata: [HTTPLogKey.error: "\(error)"])
            return APIError(.serviceUnavailable, .storeUnavailable, field: nil, message: "the store does not answer")
                .response()
        }
        if let problem = await monitoring.diskSpaceProblem() {
            logger.warning("readiness check failed: the store's volume is running out of space")
            return APIError(.serviceUnavailable, .diskLow, field: nil, message: problem).response()
        }
        guard await monitoring.dispatcherReady() else {
            logger.warning("readiness check failed: the dispatcher's store operations fail")
            return APIError(.serviceUnavailable, .storeUnavailable, field: nil, message: "the store does not answer")
                .response()
        }
        guard await monitoring.apnsReachable() else {
            logger.warning("readiness check failed: no APNs connection is possible")
            return APIError(
                .serviceUnavailable,
                .apnsUnavailable,
                field: nil,
                message: "no APNs connection is possible: the last attempts to connect failed"
            ).response()
        }
        guard await monitoring.fcmReachable() else {
            logger.warning("readiness check failed: no FCM connection is possible")
            return APIError(
                .serviceUnavailable,
                .fcmUnavailable,
                field: nil,
                message: "no FCM connection is possible: the last attempts to connect failed"
            ).response()
        }
        let alarms = await monitoring.configurationAlarms()
        guard alarms.isEmpty else {
            logger.warning("readiness check failed: a configuration alarm holds an app's sending")
            return APIError(
                .serviceUnavailable,
                .configurationAlarm,
                field: nil,
                message: alarms.joined(separator: "; ")
            )
            .response()
        }
        return JSONResponse.make(["status": "ready"])
    }

    private static let readinessProbeID = try! PushgateCore.RequestID("readyz-probe")

    // MARK: Request parts

    /// The request body, refused (413) beyond `maximumBodyBytes` without reading further.
    private func body(of request: Request) async throws -> [UInt8] {
        var bytes: [UInt8] = []
        for try await buffer in request.body {
            guard bytes.count + buffer.readableBytes <= maximumBodyBytes else {
                throw APIError.bodyTooLarge(limit: maximumBodyBytes)
            }
            bytes.append(contentsOf: buffer.readableBytesView)
        }
        return bytes
    }

    private func app(_ context: some RequestContext, fixedApp: String?) throws(APIError) -> String {
        if let fixedApp { return fixedApp }
        let name = Self.pathParameter(context, "app")
        guard apps.contains(name) else { throw APIError.unknownApp(name) }
        return name
    }

    private func groupName(_ context: some RequestContext) throws(APIError) -> String {
        let name = Self.pathParameter(context, "group")
        try validated { () throws(ValidationError) in try RequestNames.validateGroup(name, field: "group") }
        return name
    }

    /// The `{token}` path segment, validated for the platform the `platform` query parameter names
    /// (`apns` when absent, as the UDP registration's `platform` member). A browser (`webpush`) is named
    /// by its endpoint, percent-encoded (`https:%2F%2Fpush.example%2Fsub%2F1`): the registry finds its
    /// device whatever keys it holds.
    private func token(_ request: Request, _ context: some RequestContext) throws(APIError) -> DeviceToken {
        let value = Self.pathParameter(context, "token")
        let platform = request.uri.queryParameters.get("platform")
        return try validated { () throws(ValidationError) in
            let platform = try PushPlatform(requestValue: platform)
            if platform == .webpush { return try DeviceToken(webPushEndpoint: value, field: "token") }
            return try DeviceToken(platform: platform, value: value, field: "token")
        }
    }

    /// A browser's registration carries its subscription in the body (`{"subscription": {…}}`), for the
    /// endpoint the path names.
    private func subscription(of request: Request, endpoint: DeviceToken) async throws -> DeviceToken {
        let bytes = try await body(of: request)
        return try validated { () throws(ValidationError) in
            try bytes.withRequestBytes { raw throws(ValidationError) in
                try RegistrationSchema.readSubscriptionBody(raw, dialect: .body, endpoint: endpoint.webPushEndpoint)
            }
        }
    }

    private func membership(
        _ request: Request,
        _ context: some RequestContext,
        fixedApp: String?
    ) throws(APIError)
        -> (app: String, group: String, token: DeviceToken)
    {
        (try app(context, fixedApp: fixedApp), try groupName(context), try token(request, context))
    }

    /// A path segment, percent-decoded (the router matches on the raw path). The key check reads `{app}`
    /// through this function too, so that it and the route act on one app.
    static func pathParameter(_ context: some RequestContext, _ name: String) -> String {
        let raw = context.parameters.get(name) ?? ""
        return raw.removingPercentEncoding ?? raw
    }

    private static func unknownDevice() -> APIError {
        APIError(.notFound, .unknownDevice, field: "token", message: "no such device in this app")
    }
}
