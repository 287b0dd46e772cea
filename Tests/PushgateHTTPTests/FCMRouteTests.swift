import Foundation
import Hummingbird
import HummingbirdTesting
import PushgateCore
import PushgateHTTP
import Testing

/// An FCM registration token as Google's look: an instance id, a colon, `APA91b` and URL-safe characters.
let fcmToken = "cXJ5dGVzdC1pbnN0YW5jZQ:APA91bH" + String(repeating: "Xy_9-kQ", count: 22)

@Suite("HTTP API: FCM devices (?platform=fcm) and requests (fcm, fcm_devices)")
struct FCMRouteTests {
    @Test("?platform=fcm registers an FCM device (read back from the store as FCM); GET and DELETE reach it with it")
    func fcmDeviceRoutes() async throws {
        try await withRouterClient { client, fixture in
            let put = try await client.send(.put, "/v1/apps/default/groups/news/devices/\(fcmToken)?platform=fcm")
            #expect(put.status == .noContent)
            let device = try DeviceToken(fcm: fcmToken)
            let record = try #require(try await fixture.store.device(app: "default", token: device))
            #expect(record.token.platform == .fcm)
            #expect(record.token.value == fcmToken)
            #expect(record.groups == ["news"])

            let get = try await client.send(.get, "/v1/apps/default/devices/\(fcmToken)?platform=fcm")
            #expect(get.status == .ok)
            #expect(get.json["token"] as? String == fcmToken)
            #expect(get.json["platform"] as? String == "fcm")

            // Without the parameter the token is read as an APNs token, which it is not.
            let apns = try await client.send(.get, "/v1/apps/default/devices/\(fcmToken)")
            #expect(apns.status == .badRequest)
            #expect(apns.error.code == "invalid_token" && apns.error.field == "token")

            let unassign = try await client.send(
                .delete,
                "/v1/apps/default/groups/news/devices/\(fcmToken)?platform=fcm"
            )
            #expect(unassign.status == .noContent)
            #expect(try await fixture.store.device(app: "default", token: device)?.groups == [])
            let remove = try await client.send(.delete, "/v1/apps/default/devices/\(fcmToken)?platform=fcm")
            #expect(remove.status == .noContent)
            #expect(try await fixture.store.device(app: "default", token: device) == nil)
        }
    }

    @Test("the single-app routes take ?platform too")
    func singleAppRoutes() async throws {
        try await withRouterClient { client, fixture in
            let put = try await client.send(.put, "/v1/groups/news/devices/\(fcmToken)?platform=fcm")
            #expect(put.status == .noContent)
            #expect(try await fixture.store.device(app: "default", token: DeviceToken(fcm: fcmToken)) != nil)
            let get = try await client.send(.get, "/v1/devices/\(fcmToken)?platform=fcm")
            #expect(get.json["platform"] as? String == "fcm")
        }
    }

    @Test("a group mixing platforms lists each device with its platform; an APNs device says apns")
    func mixedGroupListing() async throws {
        try await withRouterClient { client, _ in
            _ = try await client.send(.put, "/v1/apps/default/groups/news/devices/\(tokenA)")
            _ = try await client.send(.put, "/v1/apps/default/groups/news/devices/\(fcmToken)?platform=fcm")
            let page = try await client.send(.get, "/v1/apps/default/groups/news/devices")
            #expect(page.status == .ok)
            let devices = try #require(page.json["devices"] as? [[String: Any]])
            let platforms = Dictionary(
                uniqueKeysWithValues: devices.map { ($0["token"] as? String ?? "", $0["platform"] as? String ?? "") }
            )
            #expect(platforms == [tokenA: "apns", fcmToken: "fcm"])
            let apns = try await client.send(.get, "/v1/apps/default/devices/\(tokenA)?platform=apns")
            #expect(apns.json["platform"] as? String == "apns")
        }
    }

    @Test(
        "an unknown platform is 400 invalid_platform and a bad FCM token 400 invalid_token; neither changes anything",
        arguments: [
            ("/v1/apps/default/groups/news/devices/\(fcmToken)?platform=huawei", "invalid_platform", "platform"),
            ("/v1/apps/default/groups/news/devices/\(fcmToken)?platform=FCM", "invalid_platform", "platform"),
            ("/v1/apps/default/groups/news/devices/\(fcmToken)?platform=", "invalid_platform", "platform"),
            ("/v1/apps/default/groups/news/devices/tooShortForFCM?platform=fcm", "invalid_token", "token"),
            ("/v1/apps/default/groups/news/devices/\(fcmToken)%2Fx?platform=fcm", "invalid_token", "token"),
        ]
    )
    func refused(uri: String, code: String, field: String) async throws {
        try await withRouterClient { client, fixture in
            let response = try await client.send(.put, uri)
            #expect(response.status == .badRequest, "\(uri)")
            #expect(response.error.code == code && response.error.field == field, "\(uri): \(response.json)")
            #expect(try await fixture.store.device(app: "default", token: DeviceToken(fcm: fcmToken)) == nil)
            #expect(try await fixture.store.device(app: "default", token: DeviceToken(hex: tokenA)) == nil)
        }
    }

    @Test("a request with an fcm object and fcm_devices is stored with both")
    func fcmRequestStored() async throws {
        try await withRouterClient { client, fixture in
            let response = try await client.send(
                .post,
                "/v1/notifications",
                json: """
                    {"devices": ["\(tokenA)"], "fcm_devices": ["\(fcmToken)"], "type": "urgent",
                     "payload": {"aps": {"alert": "hi"}}, "fcm": {"android": {"notification": {"channel_id": "c"}}}}
                    """
            )
            #expect(response.status == .accepted, "\(response.json)")
            #expect(response.json["targets"] as? Int == 2)
            let expected = try FCMOverride(
                jsonBytes: Array(#"{"android": {"notification": {"channel_id": "c"}}}"#.utf8)
            )
            let handed = try #require(fixture.intake.submitted.first)
            #expect(handed.fcm == expected)
            #expect(handed.devices == [try DeviceToken(hex: tokenA), try DeviceToken(fcm: fcmToken)])
            let stored = try #require(try await fixture.store.request(PushgateCore.RequestID("req-1")))
            #expect(stored.fcm == expected)
            #expect(Set(stored.devices) == [try DeviceToken(hex: tokenA), try DeviceToken(fcm: fcmToken)])
        }
    }

    static let big = String(repeating: "x", count: FCMMessage.maximumBytes)

    @Test(
        "an FCM message FCM cannot take is 400 naming the field, and nothing is stored",
        arguments: [
            (
                #"{"devices": ["\#(tokenA)"], "payload": {}, "fcm": {"data": {"big": "\#(FCMRouteTests.big)"}}}"#,
                "payload_too_large", "fcm.data.big"
            ),
            (
                #"{"fcm_devices": ["\#(fcmToken)"], "payload": {"x": "\#(String(repeating: "y", count: 4080))"}}"#,
                "payload_too_large", "payload.x"
            ),
            (#"{"devices": ["\#(tokenA)"], "payload": {}, "fcm": {"token": "t"}}"#, "invalid_fcm_message", "fcm.token"),
            (
                #"{"devices": ["\#(tokenA)"], "payload": {}, "fcm": {"data": {"n": 1}}}"#, "invalid_fcm_message",
                "fcm.data.n"
            ),
            (#"{"devices": ["\#(tokenA)"], "payload": {}, "fcm": [1]}"#, "wrong_type", "fcm"),
            (#"{"fcm_devices": ["short"], "payload": {}}"#, "invalid_token", "fcm_devices"),
        ]
    )
    func fcmRequestRefused(body: String, code: String, field: String) async throws {
        try await withRouterClient { client, fixture in
            let response = try await client.send(.post, "/v1/notifications", json: body)
            #expect(response.status == .badRequest)
            #expect(response.error.code == code && response.error.field == field, "\(response.json)")
            #expect(fixture.intake.submitted.isEmpty)
            #expect(try await fixture.store.request(PushgateCore.RequestID("req-1")) == nil)
        }
    }
}
