import Crypto
import Foundation
import PushgateCore
import PushgatePostgres
import Testing

/// Two instances registering one browser at once (same endpoint, different keys: it subscribed again
/// while an old registration was still in flight) keep one device: `device_by_webpush_endpoint` refuses the
/// second insert, whose batch fails and is sent again.
@Suite(
    "PostgreSQL store: one device per browser endpoint across instances",
    .enabled(if: TestDatabase.isAvailable, TestDatabase.skipReason)
)
struct PostgresWebPushRegistrationTests {
    static func subscription(_ number: Int) -> DeviceToken {
        let key = P256.KeyAgreement.PrivateKey().publicKey.x963Representation
        return DeviceToken(
            webPush: try! WebPushSubscription(
                endpoint: "https://push.example.net/wpush/v2/race-\(number)",
                p256dh: Base64URL.encode(Array(key)),
                auth: Base64URL.encode((0..<16).map { _ in UInt8.random(in: 0...255) })
            )
        )
    }

    @Test("the same endpoint with other keys from two instances at once: one device, holding one of the two")
    func concurrentRegistrationsKeepOneDevice() async throws {
        try await TestDatabase.withFreshSchema { schema in
            let configuration = try TestDatabase.configuration(schema: schema)
            try await PostgresStore.withStore(configuration: configuration, logger: TestDatabase.quietLogger) { a in
                try await PostgresStore.withStore(configuration: configuration, logger: TestDatabase.quietLogger) {
                    b in
                    for round in 0..<40 {
                        let first = Self.subscription(round)
                        let second = Self.subscription(round)
                        let at = Date(timeIntervalSince1970: 1_800_000_000)
                        // Each instance sends its registration until it is stored, as the UDP intake does.
                        func registerUntilStored(_ store: PostgresStore, _ token: DeviceToken) async throws {
                            for attempt in 0..<10 {
                                do {
                                    _ = try await store.register(Registration(token: token, group: "g", at: at))
                                    return
                                } catch  where attempt < 9 {
                                    continue
                                }
                            }
                        }
                        async let one: Void = registerUntilStored(a, first)
                        async let other: Void = registerUntilStored(b, second)
                        _ = try await (one, other)
                        let found = try await a.device(
                            app: "default",
                            token: DeviceToken(webPushEndpoint: String(first.webPushEndpoint))
                        )
                        let device = try #require(found, "round \(round): the browser is registered")
                        #expect([first, second].contains(device.token), "round \(round): one of the two keys")
                    }
                    let page = try await a.devices(app: "default", group: "g", after: nil, limit: 1_000)
                    #expect(page.devices.count == 40, "one device per endpoint, none twice")
                }
            }
        }
    }
}
