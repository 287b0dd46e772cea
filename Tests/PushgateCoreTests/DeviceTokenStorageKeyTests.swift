import PushgateCore
import Testing

@Suite("Device tokens: the stores' platform-qualified key")
struct DeviceTokenStorageKeyTests {
    let hex32 = String(repeating: "0123456789abcdef", count: 4)
    let fcm = "dK3v_00000001:APA91bH-" + String(repeating: "Qz7", count: 50)

    @Test("an APNs token's key is its hex, as releases before FCM stored it")
    func apnsKeyIsTheHex() throws {
        let token = try DeviceToken(hex: hex32.uppercased())
        #expect(token.storageKey == hex32)
        #expect(try DeviceToken(storageKey: hex32) == token)
    }

    @Test("an FCM token's key is fcm: and the token, and reads back as FCM")
    func fcmKeyIsPrefixed() throws {
        let token = try DeviceToken(fcm: fcm)
        #expect(token.storageKey == "fcm:" + fcm)
        let back = try DeviceToken(storageKey: token.storageKey)
        #expect(back == token)
        #expect(back.platform == .fcm)
    }

    @Test("the same text on both platforms gives two keys, each read back on its platform")
    func twinsDiffer() throws {
        let apns = try DeviceToken(hex: hex32)
        let twin = try DeviceToken(fcm: hex32)
        #expect(apns.storageKey != twin.storageKey)
        #expect(try DeviceToken(storageKey: apns.storageKey).platform == .apns)
        #expect(try DeviceToken(storageKey: twin.storageKey).platform == .fcm)
    }

    @Test("an FCM token that itself starts with fcm: keeps it")
    func fcmTokenStartingWithThePrefix() throws {
        let token = try DeviceToken(fcm: "fcm:" + fcm)
        #expect(try DeviceToken(storageKey: token.storageKey) == token)
    }

    @Test("a key that is neither hex nor fcm: is refused")
    func malformedKeyIsRefused() {
        #expect(throws: ValidationError.self) { try DeviceToken(storageKey: "fcm:short") }
        #expect(throws: ValidationError.self) { try DeviceToken(storageKey: "not-hex-" + hex32) }
    }

    let endpoint = "https://push.example.net/wpush/v2/gAAAAABkXyZ"
    let p256dh = "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4"
    let auth = "BTBZMqHH6r4Tts7J_aSIgg"

    @Test("a Web Push subscription's key is webpush: and its endpoint and keys, and reads back whole")
    func webPushKeyCarriesTheSubscription() throws {
        let subscription = try WebPushSubscription(endpoint: endpoint, p256dh: p256dh, auth: auth)
        let token = subscription.deviceToken
        #expect(token.platform == .webpush)
        #expect(token.value == "\(endpoint) \(p256dh) \(auth)")
        #expect(token.storageKey == "webpush:" + token.value)
        #expect(token.webPushEndpoint == endpoint)
        let back = try DeviceToken(storageKey: token.storageKey)
        #expect(back == token)
        #expect(try WebPushSubscription(deviceToken: back) == subscription)
        #expect(try DeviceToken(platform: .webpush, value: token.value) == token)
    }

    @Test("a Web Push device shows only the end of its endpoint")
    func webPushTokenIsShortenedInLogs() throws {
        let token = try WebPushSubscription(endpoint: endpoint, p256dh: p256dh, auth: auth).deviceToken
        #expect(token.description == "webpush:…" + endpoint.suffix(8))
        #expect(!token.description.contains("push.example.net"))
        #expect(!token.description.contains(auth))
    }

    @Test("a Web Push value without its keys, with a space in the endpoint, or off the curve is refused")
    func malformedWebPushValueIsRefused() {
        #expect(throws: ValidationError.self) { try DeviceToken(webPushValue: endpoint) }
        #expect(throws: ValidationError.self) { try DeviceToken(webPushValue: "\(endpoint) \(p256dh)") }
        #expect(throws: ValidationError.self) { try DeviceToken(webPushValue: "https://a b/x \(p256dh) \(auth)") }
        let offCurve = "B" + String(repeating: "A", count: 86)
        #expect(throws: ValidationError.self) { try DeviceToken(webPushValue: "\(endpoint) \(offCurve) \(auth)") }
        #expect(throws: ValidationError.self) { try WebPushSubscription(deviceToken: DeviceToken(hex: hex32)) }
    }
}
