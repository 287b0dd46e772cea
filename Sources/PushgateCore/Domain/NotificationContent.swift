/// Everything about a notification that is the same for every device it goes to: built and validated
/// once per request, then shared by every per-device send (the payload is never re-encoded per device).
public struct NotificationContent: Hashable, Sendable {
    public let topic: Topic
    public let pushType: PushType
    public let priority: Priority
    public let expiration: Expiration
    public let collapseID: CollapseID?
    public let payload: Payload

    /// Checks the rules that link fields: the payload limit of the push type, and the priorities the
    /// push type allows (background must be 5).
    public init(
        topic: Topic,
        pushType: PushType,
        priority: Priority,
        expiration: Expiration = .immediately,
        collapseID: CollapseID? = nil,
        payload: Payload
    ) throws(ValidationError) {
        try payload.validate(for: pushType)
        guard pushType.allows(priority) else {
            throw ValidationError(
                code: .invalidPriority,
                field: "priority",
                message: "\(pushType) notifications must use priority 5 (got \(priority.rawValue))"
            )
        }
        self.topic = topic
        self.pushType = pushType
        self.priority = priority
        self.expiration = expiration
        self.collapseID = collapseID
        self.payload = payload
    }

    /// The request headers APNs documents, other than `:path` and `authorization`, in a fixed order.
    /// `apns-id` is per device and added by the sender when it has one.
    public var headerFields: [(name: String, value: String)] {
        var fields: [(name: String, value: String)] = [
            ("apns-push-type", pushType.rawValue),
            ("apns-topic", topic.headerValue(for: pushType)),
            ("apns-priority", String(priority.rawValue)),
        ]
        if let expiration = expiration.headerValue { fields.append(("apns-expiration", expiration)) }
        if let collapseID { fields.append(("apns-collapse-id", collapseID.value)) }
        fields.append(("content-type", "application/json"))
        return fields
    }

    public static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.topic == rhs.topic && lhs.pushType == rhs.pushType && lhs.priority == rhs.priority
            && lhs.expiration == rhs.expiration && lhs.collapseID == rhs.collapseID && lhs.payload == rhs.payload
    }
    public func hash(into hasher: inout Hasher) {
        hasher.combine(topic)
        hasher.combine(pushType)
        hasher.combine(payload)
    }
}

extension DeviceToken {
    /// `:path` for a device push.
    public var requestPath: String { "/3/device/" + hex }
}
