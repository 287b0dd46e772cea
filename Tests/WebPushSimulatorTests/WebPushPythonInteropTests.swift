import Foundation
import Logging
import PushTransport
import PushgateCore
import Synchronization
import Testing
import WebPush
import WebPushSimulator
import WebPushTransport

/// Code we did not write checks ours, and ours checks it: Python's http_ece decrypts what WebPush
/// encrypts, py_vapid verifies WebPush's VAPID header, and the simulator decrypts and verifies what
/// pywebpush sends. Skipped (saying why) without the modules, except under CI, where .ci/run installs
/// them and a missing one fails the run.
@Suite("Web Push: checked by code we did not write (Python http_ece, py_vapid, pywebpush)")
struct WebPushPythonInteropTests {
    @Test(
        "http_ece decrypts what WebPushEncryption encrypts, with the subscription's private key",
        .enabled(if: pythonCheck(["http_ece", "cryptography"]), webPushPythonMissing)
    )
    func httpECE() async throws {
        try await WebPushSimulator.withRunning { simulator in
            let simulated = try simulator.createSubscription()
            let subscription = try WebPushSubscription(jsonBytes: Array(simulated.json.utf8))
            let plaintexts = [#"{"aps":{"alert":"Goal"},"team":"Lyon"}"#, "", String(repeating: "é", count: 1996)]
            for plaintext in plaintexts {
                let body = try WebPushEncryption.encrypt(Array(plaintext.utf8), for: subscription)
                let result = try httpECEDecrypt(body, for: simulated)
                #expect(result.status == 0, "\(result.stderr)")
                #expect(result.stdout == plaintext)
            }
        }
    }

    @Test(
        "http_ece decrypts a whole message as WebPushPushService hands it to the client, for each device",
        .enabled(if: pythonCheck(["http_ece", "cryptography"]), webPushPythonMissing)
    )
    func httpECEWholeMessage() async throws {
        try await WebPushSimulator.withRunning { simulator in
            let simulated = try (0..<2).map { try simulator.createSubscription(originIndex: $0) }
            let transport = CapturingWebPushTransport()
            let request = NotificationRequest(
                id: try RequestID("interop"),
                expiration: .at(epochSeconds: Int64(Date().timeIntervalSince1970) + 3600),
                payload: try Payload(jsonString: #"{"aps":{"alert":"Goal"},"team":"Lyon"}"#),
                createdAt: Date()
            )
            let prepared = try WebPushPushService(transport: transport).prepare(request, logger: Logger(label: "test"))
            let sends = try simulated.enumerated().map {
                PushSend(
                    token: try WebPushSubscription(jsonBytes: Array($0.element.json.utf8)).deviceToken,
                    tag: UInt64($0.offset)
                )
            }
            let submission = prepared.submit(sends, sentAt: Date(), to: IgnoringReceiver())
            #expect(submission.submitted == 2)
            let sent = transport.taken
            try #require(sent.count == 2)
            for (request, subscription) in zip(sent, simulated) {
                #expect(request.path == "/push/\(subscription.id)")
                #expect((3590...3600).contains(request.headers.ttl))
                let result = try httpECEDecrypt(Array(request.body.readableBytesView), for: subscription)
                #expect(result.status == 0, "\(result.stderr)")
                #expect(result.stdout == #"{"aps":{"alert":"Goal"},"team":"Lyon"}"#)
            }
            // Each device's message has its own key and salt.
            #expect(sent[0].body.getBytes(at: 0, length: 86) != sent[1].body.getBytes(at: 0, length: 86))
        }
    }

    @Test(
        "py_vapid verifies the signature of our VAPID header; its claims are aud, exp (<= 24 h) and sub",
        .enabled(if: pythonCheck(["py_vapid"]), webPushPythonMissing)
    )
    func pyVAPID() throws {
        let key = VAPIDKey.generate()
        var cache = VAPIDTokenCache()
        let origin = try WebPushSubscription(
            jsonBytes: Array(
                #"{"endpoint":"https://updates.push.services.mozilla.com/wpush/v2/gAAA","keys":{"p256dh":"BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4","auth":"BTBZMqHH6r4Tts7J_aSIgg"}}"#
                    .utf8
            )
        ).origin
        let now = Date()
        let authorization = cache.authorization(
            for: origin,
            now: now,
            key: key,
            subject: try VAPIDSubject("mailto:ops@example.com")
        )
        let script = """
            import json, sys, time
            from py_vapid import Vapid02, b64urldecode
            header = sys.argv[1]
            # py_vapid's parser splits "t=..,k=.." on "," and the scheme off at the last space, so it reads
            # the RFC 8292 example's form ("vapid t=.., k=..") only without the space after the comma.
            assert Vapid02.verify(header.replace(", k=", ",k=")), "signature does not verify"
            token = header.split("t=", 1)[1].split(",", 1)[0]
            claims = json.loads(b64urldecode(token.split(".")[1].encode()))
            assert claims["aud"] == "https://updates.push.services.mozilla.com", claims
            assert claims["sub"] == "mailto:ops@example.com", claims
            assert time.time() < claims["exp"] <= time.time() + 24 * 3600, claims
            signing_input, signature = token.rsplit(".", 1)
            mid = len(signature) // 2
            forged = signature[:mid] + ("A" if signature[mid] != "A" else "B") + signature[mid + 1:]
            tampered = header.replace(token, signing_input + "." + forged)
            assert not Vapid02.verify(tampered.replace(", k=", ",k=")), "a tampered token verified"
            print("verified")
            """
        let result = try run("python3", ["-c", script, authorization])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("verified"))
    }

    @Test(
        "the simulator decrypts what pywebpush encrypts and accepts its VAPID, on both origins, over loopback TLS",
        .enabled(if: pythonCheck(["pywebpush", "py_vapid", "requests"]), webPushPythonMissing)
    )
    func pywebpush() async throws {
        try await WebPushSimulator.withRunning { simulator in
            let key = VAPIDKey.generate()
            let keyPath = FileManager.default.temporaryDirectory
                .appendingPathComponent("vapid-\(UUID().uuidString).pem").path
            try key.pemRepresentation.write(toFile: keyPath, atomically: true, encoding: .utf8)
            defer { try? FileManager.default.removeItem(atPath: keyPath) }
            let subscriptions = [
                try simulator.createSubscription(originIndex: 0, applicationServerKey: key.publicKeyBase64URL),
                try simulator.createSubscription(originIndex: 1, applicationServerKey: key.publicKeyBase64URL),
            ]
            let script = """
                import json, sys
                from pywebpush import webpush
                for info in sys.argv[2:]:
                    response = webpush(json.loads(info), data='{"from":"pywebpush","team":"Lyon"}',
                                       vapid_private_key=sys.argv[1],
                                       vapid_claims={"sub": "mailto:py@example.com"},
                                       content_encoding="aes128gcm", ttl=120, timeout=30)
                    print(response.status_code)
                """
            let result = try run(
                "python3",
                ["-c", script, keyPath] + subscriptions.map(\.json),
                environment: ["REQUESTS_CA_BUNDLE": simulator.caCertificatePath]
            )
            #expect(result.status == 0, "\(result.stderr)")
            #expect(result.stdout.split(separator: "\n") == ["201", "201"])
            for subscription in subscriptions {
                let received = simulator.received(subscriptionID: subscription.id)
                #expect(received.count == 1)
                #expect(received.first?.text == #"{"from":"pywebpush","team":"Lyon"}"#)
                #expect(received.first?.ttl == 120)
                #expect(received.first?.vapidSubject == "mailto:py@example.com")
                #expect(received.first?.vapidAudience == simulator.origins[subscription.originIndex])
                #expect(received.first?.vapidPublicKey.hasPrefix(String(key.publicKeyBase64URL.prefix(40))) == true)
            }
        }
    }
}

/// Python's http_ece decrypts `body` with the subscription's private key and auth secret; its stdout is the
/// plaintext.
func httpECEDecrypt(
    _ body: [UInt8],
    for subscription: WebPushSimulatorSubscription
) throws -> (status: Int32, stdout: String, stderr: String) {
    let script = """
        import base64, sys, http_ece
        from cryptography.hazmat.primitives.asymmetric import ec
        def d(s): return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))
        body, private, auth = d(sys.argv[1]), d(sys.argv[2]), d(sys.argv[3])
        key = ec.derive_private_key(int.from_bytes(private, "big"), ec.SECP256R1())
        sys.stdout.write(http_ece.decrypt(body, private_key=key, auth_secret=auth,
                                          version="aes128gcm").decode("utf-8"))
        """
    return try run("python3", ["-c", script, base64URLString(body), subscription.privateKey, subscription.auth])
}

/// A stand-in for `WebPushClient` that keeps what it is handed, answering nothing.
final class CapturingWebPushTransport: WebPushNotificationTransport, Sendable {
    private let requests = Mutex<[WebPushSendRequest]>([])

    var taken: [WebPushSendRequest] { requests.withLock { $0 } }
    var inFlightCapacity: Int { 100 }

    func submit(_ requests: [WebPushSendRequest]) -> [UInt64] {
        self.requests.withLock { $0 += requests }
        return requests.indices.map { UInt64($0) }
    }

    func withdraw(_ ids: some Sequence<UInt64>) -> Int { 0 }
}

final class IgnoringReceiver: PushOutcomeReceiver {
    func receive(_ outcome: PushOutcome, token: DeviceToken, tag: UInt64) {}
}

func base64URLString(_ bytes: [UInt8]) -> String {
    Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        .replacingOccurrences(of: "=", with: "")
}
