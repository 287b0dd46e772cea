import APNsLegacy
import NIOCore
import PushgateCore
import PushgateUDP

/// What each request pays once (intake, the FCM message, a provider token) and the legacy binary
/// codec, each the gateway's own code.
extension MicroCase {
    static var ingress: [MicroCase] {
        [
            MicroCase(
                name: "udp-notification",
                operation: "one pushd notification datagram parsed (strict JSON reader + the request schema's rules)",
                prepare: { try notificationDatagramWorkload() }
            ),
            MicroCase(
                name: "json-payload",
                operation: "the 133-byte alert payload read by the strict JSON reader alone",
                prepare: { try strictJSONWorkload() }
            ),
            MicroCase(
                name: "fcm-message",
                operation: "one request's FCM message derived (FCMMessage(request:): notification, data, android)",
                prepare: { try fcmMessageWorkload() }
            ),
            MicroCase(
                name: "fcm-body",
                operation: "one device's messages:send body (FCMMessage.requestBody(token:))",
                prepare: { try fcmBodyWorkload() }
            ),
            MicroCase(
                name: "jwt-sign",
                operation: "one ES256 provider token signed (ProviderTokenSigner.sign; once an hour per pool)",
                prepare: { try providerTokenWorkload() }
            ),
        ]
    }

    static var codecs: [MicroCase] {
        [
            MicroCase(
                name: "legacy-encode",
                operation:
                    "one notification written in the legacy binary format 2 (LegacyNotificationEncoder.writeFrame)",
                prepare: { try legacyEncodingWorkload() }
            ),
            MicroCase(
                name: "legacy-decode",
                operation: "one legacy format-2 frame read (LegacyNotificationDecoder.readFrame)",
                prepare: { try legacyDecodingWorkload() }
            ),
        ]
    }

    private static func parsedRequest() throws -> NotificationRequest {
        try NotificationDatagram.parse(
            MicroFixtures.notificationDatagram,
            id: RequestID("micro-1"),
            receivedAt: MicroFixtures.receivedAt
        )
    }

    private static func notificationDatagramWorkload() throws -> MicroWorkload {
        let request = try parsedRequest()
        try MicroCheckFailure.require(
            request.groups == ["customers"] && request.collapseID?.value == MicroFixtures.collapseID
                && request.expiration == .at(epochSeconds: MicroFixtures.expirationSeconds)
                && request.priority == .immediate && request.payload.bytes == Array(MicroFixtures.payloadJSON.utf8),
            "the datagram parsed as \(request)"
        )
        let id = request.id
        let datagram = MicroFixtures.notificationDatagram
        return MicroWorkload {
            for _ in 0..<10 {
                _ = try NotificationDatagram.parse(datagram, id: id, receivedAt: MicroFixtures.receivedAt)
            }
            return 10
        }
    }

    private static func strictJSONWorkload() throws -> MicroWorkload {
        let bytes = Array(MicroFixtures.payloadJSON.utf8)
        guard case .object(let object) = try StrictJSONParser.parse(bytes), object["aps"] != nil else {
            throw MicroCheckFailure("the payload did not read as an object with aps")
        }
        return MicroWorkload {
            for _ in 0..<10 { _ = try StrictJSONParser.parse(bytes) }
            return 10
        }
    }

    private static func fcmMessageWorkload() throws -> MicroWorkload {
        let request = try parsedRequest()
        let message = try FCMMessage(request: request)
        let json = message.jsonWithoutTarget
        for part in [#""title":"Flash sale""#, #""collapse_key":"sale-2041""#, #""priority":"HIGH""#, #""campaign""#] {
            try MicroCheckFailure.require(json.contains(part), "the FCM message has no \(part): \(json)")
        }
        return MicroWorkload {
            _ = try FCMMessage(request: request)
            return 1
        }
    }

    private static func fcmBodyWorkload() throws -> MicroWorkload {
        let message = try FCMMessage(request: try parsedRequest())
        // FCM registration tokens are about 160 characters.
        let tokens = (0..<100).map { index in "f" + String(repeating: "cmTokenBench", count: 13) + "\(1_000 + index)" }
        guard case .object(let body) = try StrictJSONParser.parse(message.requestBody(token: tokens[0])),
            case .object(let inner) = body["message"], inner["token"] == .string(tokens[0])
        else {
            throw MicroCheckFailure("the body does not carry message.token")
        }
        return MicroWorkload {
            for token in tokens { _ = message.requestBody(token: token) }
            return tokens.count
        }
    }

    private static func providerTokenWorkload() throws -> MicroWorkload {
        let signer = try MicroFixtures.signer()
        let token = try signer.sign(issuedAt: MicroFixtures.receivedAt)
        try MicroCheckFailure.require(token.jwt.split(separator: ".").count == 3, "not a JWT: \(token.jwt.count) bytes")
        return MicroWorkload {
            _ = try signer.sign(issuedAt: MicroFixtures.receivedAt)
            return 1
        }
    }

    /// 100 distinct devices, each one notification.
    private static func legacyNotifications() throws -> [(token: DeviceToken, identifier: UInt32)] {
        try (0..<100).map { (try MicroFixtures.deviceToken($0), UInt32($0)) }
    }

    private static func writeLegacy(
        _ device: (token: DeviceToken, identifier: UInt32),
        payload: Payload,
        into buffer: inout ByteBuffer
    ) throws {
        try LegacyNotificationEncoder.writeFrame(
            identifier: device.identifier,
            expiration: .at(epochSeconds: MicroFixtures.expirationSeconds),
            priority: .immediate,
            token: device.token,
            payload: payload,
            into: &buffer
        )
    }

    private static func legacyEncodingWorkload() throws -> MicroWorkload {
        let devices = try legacyNotifications()
        let payload = try Payload(jsonString: MicroFixtures.payloadJSON)
        var buffer = ByteBuffer()
        try writeLegacy(devices[1], payload: payload, into: &buffer)
        let decoded = try LegacyNotificationDecoder().readFrame(from: &buffer)
        let expected = LegacyNotification(
            format: .frame,
            identifier: 1,
            expiry: UInt32(MicroFixtures.expirationSeconds),
            token: devices[1].token.bytes,
            payload: payload.bytes,
            priority: 10
        )
        try MicroCheckFailure.require(decoded == expected, "wrote \(String(describing: decoded)), not \(expected)")
        return MicroWorkload {
            for device in devices {
                buffer.clear()
                try writeLegacy(device, payload: payload, into: &buffer)
            }
            return devices.count
        }
    }

    private static func legacyDecodingWorkload() throws -> MicroWorkload {
        let devices = try legacyNotifications()
        let payload = try Payload(jsonString: MicroFixtures.payloadJSON)
        var frames = ByteBuffer()
        for device in devices { try writeLegacy(device, payload: payload, into: &frames) }
        let decoder = LegacyNotificationDecoder()
        func read() throws -> Int {
            var bytes = frames
            var count = 0
            while let notification = try decoder.readFrame(from: &bytes) {
                try MicroCheckFailure.require(
                    notification.identifier == UInt32(count) && notification.payload.count == payload.count,
                    "frame \(count) read as \(notification)"
                )
                count += 1
            }
            try MicroCheckFailure.require(count == devices.count, "\(count) frames read, not \(devices.count)")
            return count
        }
        _ = try read()
        return MicroWorkload(round: read)
    }
}
