import Foundation
import Hummingbird
import HummingbirdTesting
import PushgateCore
import Testing

@testable import PushgateHTTP

/// Every `/v1` route and method, asked without a key, with a wrong key and with a key limited to another
/// app, under every spelling a router or a proxy may read as the same route, over a raw socket (no client
/// normalises anything): none may be answered 2xx, and none may change the store. The canonical spelling
/// with the right key is the control that shows the requests would have worked.
@Suite("HTTP API: route x spelling x key matrix (raw requests, store checked)")
struct RouteSpellingMatrixTests {
    /// One request of the matrix: a route's canonical path (or absolute target), its method and body.
    struct Call: Sendable, CustomStringConvertible {
        var method: String
        var path: String
        var body: String?
        var description: String { "\(method) \(path)" }
    }

    static let group = "g1"

    /// The routes of an API serving `apps`, acting on `app` (whose stored request is `requestID`).
    static func calls(app: String, implicit: Bool, requestID: String) -> [Call] {
        var prefixes = ["/v1/apps/\(app)"]
        if implicit { prefixes.append("/v1") }
        var calls: [Call] = []
        for prefix in prefixes {
            calls += [
                Call(method: "PUT", path: "\(prefix)/groups/\(group)/devices/\(tokenB)"),
                Call(method: "DELETE", path: "\(prefix)/groups/\(group)/devices/\(tokenA)"),
                Call(method: "GET", path: "\(prefix)/groups/\(group)/devices"),
                Call(method: "GET", path: "\(prefix)/devices/\(tokenA)"),
                Call(method: "DELETE", path: "\(prefix)/devices/\(tokenA)"),
            ]
        }
        let body = #"{"app": "\#(app)", "groups": ["\#(group)"], "payload": {"aps": {"alert": "hi"}}}"#
        calls.append(Call(method: "POST", path: "/v1/notifications", body: body))
        calls.append(Call(method: "GET", path: "/v1/notifications/\(requestID)"))
        return calls
    }

    /// Spellings of `path` that some router, server or proxy reads as `path` (or that try to), each
    /// different from it. `port` makes the absolute-form targets.
    static func spellings(of path: String, port: Int) -> [String] {
        let rest = String(path.dropFirst())  // "v1/..."
        let segments = rest.split(separator: "/").map(String.init)
        let afterV1: String = segments.dropFirst().joined(separator: "/")
        let origin = "http://127.0.0.1:\(port)"
        var spellings: [String] = ["/" + path, "//" + path, path + "/", path + "//"]
        spellings.append(path.replacingOccurrences(of: "/v1/", with: "/v1//"))
        spellings += ["/./" + rest, "/v1/./" + afterV1, "/x/../" + rest, "/v1/x/../" + afterV1]
        spellings += ["/%2e/" + rest, "/%2E%2E/" + rest, "/v1/%2e%2e/v1/" + afterV1]
        spellings += ["/V1/" + afterV1, path.uppercased(), "/v1;x=1/" + afterV1, path + ";x=1"]
        spellings.append("/v1\\" + segments.dropFirst().joined(separator: "\\"))
        spellings.append("/v1%2F" + segments.dropFirst().joined(separator: "%2F"))
        spellings += [origin + "/" + path, origin + path + "/", origin + "//" + rest]
        // A percent-encoded letter in each segment in turn, literal or parameter.
        for (index, segment) in segments.enumerated() {
            guard let first = segment.unicodeScalars.first, first.isASCII else { continue }
            var encoded = segments
            encoded[index] = String(format: "%%%02X", first.value) + segment.dropFirst()
            spellings.append("/" + encoded.joined(separator: "/"))
            encoded[index] = String(format: "%%%02x", first.value) + segment.dropFirst()
            spellings.append("/" + encoded.joined(separator: "/"))
        }
        return spellings.filter { $0 != path }
    }

    /// What the matrix's requests could change: every app's devices, its group and every notification
    /// request the API handed on.
    struct StoreSnapshot: Equatable {
        var devices: [DeviceRecord?]
        var groups: [GroupPage?]
        var submitted: Int

        init(_ fixture: APIFixture, apps: [String]) async throws {
            devices = []
            groups = []
            for app in apps {
                for token in [tokenA, tokenB] {
                    devices.append(try await fixture.store.device(app: app, token: DeviceToken(hex: token)))
                }
                groups.append(try? await fixture.store.devices(app: app, group: group, after: nil, limit: 100))
            }
            submitted = fixture.intake.submitted.count
        }
    }

    /// Seeds `tokenA` in `g1` of every app and one notification request of `app`; returns its id.
    static func seed(_ fixture: APIFixture, apps: [String], app: String, port: Int) async throws -> String {
        for each in apps {
            _ = try await fixture.store.register(
                Registration(app: each, token: try DeviceToken(hex: tokenA), group: group, at: APIFixture.start)
            )
        }
        let body = #"{"app": "\#(app)", "groups": ["\#(group)"], "payload": {"aps": {"alert": "seed"}}}"#
        let seeded = try await RawHTTP.send(
            port: port,
            method: "POST",
            target: "/v1/notifications",
            key: TestKeys.all,
            body: body
        )
        #expect(seeded.status == 202, "the seed request: \(seeded.body)")
        return (try? JSONSerialization.jsonObject(with: Data(seeded.body.utf8)) as? [String: Any])?["id"] as? String
            ?? ""
    }

    /// Asks every route under every spelling with every key that must not get through, checking the
    /// store after each; then the canonical spelling with the right key, which must work.
    static func checkMatrix(apps: [String], keys: [APIKey], app: String, refusedKeys: [String?]) async throws {
        try await withKeyedAPI(apps: apps, keys: keys) { fixture in
            try await fixture.api.buildApplication().test(.live) { client in
                let port = try #require(client.port)
                let requestID = try await seed(fixture, apps: apps, app: app, port: port)
                let before = try await StoreSnapshot(fixture, apps: apps)
                var asked = 0
                for call in calls(app: app, implicit: apps.count == 1, requestID: requestID) {
                    for target in [call.path] + spellings(of: call.path, port: port) {
                        for key in refusedKeys {
                            let answer = try await RawHTTP.send(
                                port: port,
                                method: call.method,
                                target: target,
                                key: key,
                                body: call.body
                            )
                            asked += 1
                            #expect(
                                !(200..<300).contains(answer.status),
                                "\(call.method) \(target) with key \(key ?? "none"): \(answer.status) \(answer.body)"
                            )
                            let after = try await StoreSnapshot(fixture, apps: apps)
                            #expect(
                                after == before,
                                "\(call.method) \(target) with key \(key ?? "none") changed the store"
                            )
                        }
                    }
                }
                #expect(asked > 500)
                // The control: the same calls, canonically spelled, with a key that may act on the app.
                for call in calls(app: app, implicit: apps.count == 1, requestID: requestID) {
                    let answer = try await RawHTTP.send(
                        port: port,
                        method: call.method,
                        target: call.path,
                        key: TestKeys.all,
                        body: call.body
                    )
                    #expect(
                        (200..<300).contains(answer.status) || answer.status == 404,
                        "control \(call): \(answer.status) \(answer.body)"
                    )
                }
                #expect(try await StoreSnapshot(fixture, apps: apps) != before, "the control changed nothing")
            }
        }
    }

    @Test("two apps: no key, a wrong key and another app's key get nothing under any spelling")
    func twoApps() async throws {
        let keys = TestKeys.configured + [APIKey(secret: "weather-only-key-0123456789", app: "weather")]
        try await Self.checkMatrix(
            apps: ["news", "weather"],
            keys: keys,
            app: "news",
            refusedKeys: [nil, "not-a-configured-key", "weather-only-key-0123456789"]
        )
    }

    @Test("one app, with the app-less routes: no key and a wrong key get nothing under any spelling")
    func oneApp() async throws {
        try await Self.checkMatrix(
            apps: ["news"],
            keys: [APIKey(secret: TestKeys.all)],
            app: "news",
            refusedKeys: [nil, "not-a-configured-key"]
        )
    }

    @Test("only /healthz, /readyz, /metrics and /openapi.yaml are open without a key, and only spelled canonically")
    func openRoutes() async throws {
        try await withKeyedAPI { fixture in
            try await fixture.api.buildApplication().test(.live) { client in
                let port = try #require(client.port)
                for path in ["/healthz", "/readyz", "/openapi.yaml"] {
                    let open = try await RawHTTP.send(port: port, method: "GET", target: path, key: nil)
                    #expect(open.status == 200, "\(path): \(open.status)")
                    for spelling in ["/" + path, path + "/", "/./" + path.dropFirst(), "/x/.." + path] {
                        let answer = try await RawHTTP.send(port: port, method: "GET", target: spelling, key: nil)
                        #expect(answer.status == 400, "\(spelling): \(answer.status)")
                    }
                }
                // An unknown path needs a key too: nothing tells a caller without one what exists.
                let unknown = try await RawHTTP.send(port: port, method: "GET", target: "/v2/anything", key: nil)
                #expect(unknown.status == 401)
                let known = try await RawHTTP.send(port: port, method: "GET", target: "/v2/anything", key: TestKeys.all)
                #expect(known.status == 404)
            }
        }
    }

    @Test("every route the API serves is guarded by the table, and only the explicit list is open")
    func accessTable() async throws {
        try await withKeyedAPI(apps: ["news"], keys: [APIKey(secret: TestKeys.all)]) { fixture in
            let routes = fixture.api.handlers.routes
            let open = Set(routes.filter { $0.access == .open }.map { RouteAccess.endpointPath(of: $0.template) })
            #expect(open.isSubset(of: RouteAccess.openWithoutKey))
            #expect(RouteAccess.openWithoutKey == ["/healthz", "/readyz", "/metrics", "/openapi.yaml"])
            for route in routes where route.template.hasPrefix("v1/") {
                #expect(route.access != .open, "\(route.template)")
            }
            // The router reports templates in the form the table is keyed by.
            #expect(RouteAccess.endpointPath(of: "v1/apps/{app}/devices/{token}") == "/v1/apps/{app}/devices/{token}")
        }
    }
}

/// HTTP/1.1 over a plain socket, the request line exactly as given: no client normalises the target.
enum RawHTTP {
    struct Answer: Sendable {
        var status: Int
        var body: String
    }

    static func send(
        port: Int,
        method: String,
        target: String,
        key: String?,
        body: String? = nil
    ) async throws -> Answer {
        var head = "\(method) \(target) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n"
        if let key { head += "Authorization: Bearer \(key)\r\n" }
        if let body { head += "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n" }
        let request = Array((head + "\r\n" + (body ?? "")).utf8)
        // Blocking socket calls, off Swift's cooperative pool.
        let bytes = try await withCheckedThrowingContinuation {
            (continuation: CheckedContinuation<[UInt8], any Error>) in
            DispatchQueue.global().async {
                continuation.resume(with: Result { try exchange(port: port, request: request) })
            }
        }
        let text = String(decoding: bytes, as: UTF8.self)
        let statusLine = text.prefix { $0 != "\r" }.split(separator: " ")
        let status = statusLine.count > 1 ? Int(statusLine[1]) ?? 0 : 0
        let bodyText = text.range(of: "\r\n\r\n").map { String(text[$0.upperBound...]) } ?? ""
        return Answer(status: status, body: bodyText)
    }

    struct SocketError: Error { var call: String }

    private static func exchange(port: Int, request: [UInt8]) throws -> [UInt8] {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw SocketError(call: "socket") }
        defer { close(fd) }
        var timeout = timeval(tv_sec: 60, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else { throw SocketError(call: "connect") }
        var written = 0
        while written < request.count {
            let count = request[written...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            guard count > 0 else { throw SocketError(call: "write") }
            written += count
        }
        var answer: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count <= 0 { break }
            answer += buffer[0..<count]
        }
        return answer
    }
}
