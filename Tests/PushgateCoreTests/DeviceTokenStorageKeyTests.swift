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
}
