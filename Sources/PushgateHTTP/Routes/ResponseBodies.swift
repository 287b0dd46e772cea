import Foundation
import PushgateCore

/// `202` to `POST /v1/notifications`.
struct SubmitBody: Encodable {
    var id: String
    var targets: Int

    /// The same bytes as `JSONResponse.make(self)` (sorted keys), written directly: this answer goes to every
    /// accepted notification request, the API's most frequent, and a `JSONEncoder` costs several
    /// microseconds more. A request id needs no JSON escaping (letters, digits, `.`, `_`, `-`:
    /// `RequestID`), so none is done.
    var json: [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(id.utf8.count + 32)
        bytes.append(contentsOf: #"{"id":""#.utf8)
        bytes.append(contentsOf: id.utf8)
        bytes.append(contentsOf: #"","targets":"#.utf8)
        bytes.append(contentsOf: String(targets).utf8)
        bytes.append(UInt8(ascii: "}"))
        return bytes
    }
}

/// `GET /v1/apps/{app}/devices/{token}`. Every body that names a device gives its `platform` (`apns`,
/// `fcm` or `webpush`, always present) beside its `token` (a browser's: its endpoint, as routes name it;
/// its keys are in `subscription`).
struct DeviceBody: Encodable {
    var record: DeviceRecord

    init(_ record: DeviceRecord) { self.record = record }

    enum CodingKeys: String, CodingKey {
        case app, token, platform, subscription, state, groups
        case registeredAt = "registered_at"
        case lastRegisteredAt = "last_registered_at"
        case invalidatedAt = "invalidated_at"
        case reason
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(record.app, forKey: .app)
        try container.encode(record.token.routeValue, forKey: .token)
        try container.encode(record.token.platform.rawValue, forKey: .platform)
        if let subscription = record.token.subscriptionBody {
            try container.encode(subscription, forKey: .subscription)
        }
        try container.encode(record.state.rawValue, forKey: .state)
        try container.encode(record.groups, forKey: .groups)
        try container.encode(record.registeredAt, forKey: .registeredAt)
        try container.encode(record.lastRegisteredAt, forKey: .lastRegisteredAt)
        try container.encode(record.invalidatedAt, forKey: .invalidatedAt)
        try container.encode(record.invalidReason.map { "\($0)" }, forKey: .reason)
    }
}

extension DeviceToken {
    /// How the API names the device: the token, or a browser's endpoint.
    var routeValue: String { platform == .webpush ? String(webPushEndpoint) : value }

    /// A browser's subscription as its `PushSubscription` JSON gives it (nil for phones).
    var subscriptionBody: SubscriptionBody? {
        guard let subscription = try? WebPushSubscription(deviceToken: self) else { return nil }
        return SubscriptionBody(
            endpoint: subscription.endpoint,
            keys: ["p256dh": subscription.p256dh, "auth": subscription.auth]
        )
    }
}

/// A subscription in an answer: `{"endpoint": …, "keys": {"p256dh": …, "auth": …}}`.
struct SubscriptionBody: Encodable {
    var endpoint: String
    var keys: [String: String]
}

/// `GET /v1/apps/{app}/groups/{group}/devices`.
struct GroupPageBody: Encodable {
    struct Member: Encodable {
        var token: String
        var platform: String
        var state: String
        var registeredAt: Date

        enum CodingKeys: String, CodingKey {
            case token, platform, state
            case registeredAt = "registered_at"
        }
    }

    var devices: [Member]
    var next: String?

    init(_ page: GroupPage) {
        self.devices = page.devices.map {
            Member(
                token: $0.token.routeValue,
                platform: $0.token.platform.rawValue,
                state: $0.state.rawValue,
                registeredAt: $0.registeredAt
            )
        }
        self.next = page.next?.value
    }

    enum CodingKeys: String, CodingKey { case devices, next }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(devices, forKey: .devices)
        try container.encode(next, forKey: .next)  // null on the last page
    }
}

/// `GET /v1/notifications/{id}`: the delivery report.
struct ReportBody: Encodable {
    var report: DeliveryReport

    init(_ report: DeliveryReport) { self.report = report }

    enum CodingKeys: String, CodingKey {
        case id, app, state, targets, accepted, failed, skipped
        case failedByReason = "failed_by_reason"
        case pendingRetries = "pending_retries"
        case createdAt = "created_at"
        case finishedAt = "finished_at"
        case unknownGroups = "unknown_groups"
        case services
    }

    /// One service's part of `services`.
    struct ServiceBody: Encodable {
        var targets: Int
        var accepted: Int
        var failed: Int
        var skipped: Int
    }

    /// `{"apns": {...}, "fcm": {...}, "webpush": {...}}`, every service, in that order; null for a request
    /// stored before the split.
    var services: KeyValuePairs<String, ServiceBody>? {
        guard let split = report.byService else { return nil }
        func part(_ platform: PushPlatform) -> ServiceBody {
            ServiceBody(
                targets: split.targets[platform],
                accepted: split.accepted[platform],
                failed: split.failed[platform],
                skipped: split.skipped[platform]
            )
        }
        return ["apns": part(.apns), "fcm": part(.fcm), "webpush": part(.webpush)]
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(report.id.value, forKey: .id)
        try container.encode(report.app, forKey: .app)
        try container.encode(report.state.rawValue, forKey: .state)
        try container.encode(report.targets, forKey: .targets)
        try container.encode(report.accepted, forKey: .accepted)
        try container.encode(report.failed, forKey: .failed)
        try container.encode(report.failedByReason, forKey: .failedByReason)
        try container.encode(report.skipped, forKey: .skipped)
        try container.encode(report.pendingRetries, forKey: .pendingRetries)
        try container.encode(report.createdAt, forKey: .createdAt)
        try container.encode(report.finishedAt, forKey: .finishedAt)
        try container.encode(report.unknownGroups, forKey: .unknownGroups)
        if let services {
            var nested = container.nestedContainer(keyedBy: ServiceKey.self, forKey: .services)
            for (name, body) in services { try nested.encode(body, forKey: ServiceKey(stringValue: name)) }
        } else {
            try container.encodeNil(forKey: .services)
        }
    }

    struct ServiceKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }
}
