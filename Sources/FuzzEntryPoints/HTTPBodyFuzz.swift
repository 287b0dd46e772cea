import PushgateCore
import PushgateHTTP
import PushgateUDP

/// `POST /v1/notifications` bodies, read once and strictly (`NotificationBody`), with and without an
/// API key limited to one app, and the bearer header:
/// - a scoped key gets a request only for its own app, and exactly the request an unscoped key gets;
///   a body an unscoped key may send for another app is refused `forbidden_app`; what an unscoped key
///   cannot send, a scoped key cannot either (a scope never makes a body acceptable);
/// - with one app served, the API and the UDP port accept the same bodies as the same requests;
/// - an accepted request is well formed (as for datagrams);
/// - a bearer key read from a header is not empty, has no surrounding spaces, and reads back the same.
///
/// The first byte chooses the served apps and the key's scope; the rest is the body (and the header).
enum HTTPBodyFuzz {
    private static let target = FuzzTarget.httpBody
    private static let oneApp = [Registration.defaultApp]
    private static let twoApps = [Registration.defaultApp, "other"]

    static func run(_ input: UnsafeRawBufferPointer) throws(FuzzViolation) {
        guard let first = input.first else { return }
        let body = [UInt8](input.dropFirst())
        let apps = first & 1 == 0 ? oneApp : twoApps
        let scope: String? = [nil, Registration.defaultApp, "other"][Int(first >> 1) % 3]

        let unscoped = parse(body, apps: AppNames(apps), scope: nil)
        let scoped = parse(body, apps: AppNames(apps), scope: scope)
        if case .success(let request) = unscoped {
            try expect(apps.contains(request.app), target, "a request for an app not served")
            try JSONFuzz.checkWellFormed(request, input: body, parsed: try? StrictJSONParser.parse(body))
        }
        if let scope { try checkScope(scope, unscoped: unscoped, scoped: scoped) }
        if apps.count == 1 { try checkSameAsDatagram(body, unscoped) }
        try checkBearer(String(decoding: body, as: UTF8.self))
    }

    private static func parse(
        _ body: [UInt8],
        apps: AppNames,
        scope: String?
    ) -> Result<NotificationRequest, APIError> {
        do throws(APIError) {
            return .success(
                try NotificationBody.parse(
                    body,
                    apps: apps,
                    scope: scope,
                    id: JSONFuzz.id,
                    receivedAt: JSONFuzz.receivedAt
                )
            )
        } catch {
            return .failure(error)
        }
    }

    private static func checkScope(
        _ scope: String,
        unscoped: Result<NotificationRequest, APIError>,
        scoped: Result<NotificationRequest, APIError>
    ) throws(FuzzViolation) {
        switch (unscoped, scoped) {
        case (.success(let open), .success(let limited)):
            try expect(limited.app == scope, target, "a key for \(scope) got a request for \(limited.app)")
            try expect(open == limited, target, "the scope changed the request")
        case (.success(let open), .failure(let error)):
            try expect(open.app != scope, target, "a key for \(scope) was refused its own app: \(error)")
            try expect(error.code.rawValue == "forbidden_app", target, "another app refused as \(error), not 403")
        case (.failure(let error), .success(let limited)):
            throw FuzzViolation(target: target, message: "only the scoped key got \(limited.app) (open: \(error))")
        case (.failure, .failure):
            break
        }
    }

    /// One app served: the API reads what the UDP port reads (its app is the default one).
    private static func checkSameAsDatagram(
        _ body: [UInt8],
        _ viaAPI: Result<NotificationRequest, APIError>
    ) throws(FuzzViolation) {
        let viaUDP: NotificationRequest?
        do {
            viaUDP = try NotificationDatagram.parse(body, id: JSONFuzz.id, receivedAt: JSONFuzz.receivedAt)
        } catch {
            viaUDP = nil
        }
        switch (viaAPI, viaUDP) {
        case (.success(let api), let udp?):
            try expect(api == udp, target, "the API and the UDP port read one body as two requests")
        case (.success, nil):
            throw FuzzViolation(target: target, message: "the API accepts a body the UDP port refuses")
        case (.failure(let error), let udp?):
            let message = "the UDP port accepts a body the API refuses: \(error)"
            try expect(udp.app != Registration.defaultApp, target, message)
        case (.failure, nil):
            break
        }
    }

    private static func checkBearer(_ header: String) throws(FuzzViolation) {
        guard let key = APIKeyring.bearerKey(header) else { return }
        try expect(!key.isEmpty, target, "an empty bearer key")
        try expect(key.first != " " && key.last != " ", target, "a bearer key with surrounding spaces")
        try expect(APIKeyring.bearerKey("Bearer " + key) == key, target, "a bearer key does not read back")
    }
}
