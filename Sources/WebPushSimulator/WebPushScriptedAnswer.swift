/// An answer the simulator gives instead of 201, for the next `count` messages that pass its checks.
public struct WebPushScriptedAnswer: Sendable, Hashable {
    /// The status (404, 410, 413, 429, 500, 503...); ignored when `dropsConnection`.
    public var status: Int
    /// `Retry-After`, as sent (seconds or an HTTP-date).
    public var retryAfter: String?
    public var count: Int
    /// Only messages to this subscription, or to this origin; neither: any.
    public var subscriptionID: String?
    public var originIndex: Int?
    /// Held this much longer before it is written.
    public var latencyMilliseconds: Int
    /// No answer: the connection is closed.
    public var dropsConnection: Bool

    public init(
        status: Int = 503,
        retryAfter: String? = nil,
        count: Int = 1,
        subscriptionID: String? = nil,
        originIndex: Int? = nil,
        latencyMilliseconds: Int = 0,
        dropsConnection: Bool = false
    ) {
        self.status = status
        self.retryAfter = retryAfter
        self.count = count
        self.subscriptionID = subscriptionID
        self.originIndex = originIndex
        self.latencyMilliseconds = latencyMilliseconds
        self.dropsConnection = dropsConnection
    }

    func applies(to subscriptionID: String, originIndex: Int) -> Bool {
        (self.subscriptionID == nil || self.subscriptionID == subscriptionID)
            && (self.originIndex == nil || self.originIndex == originIndex)
    }
}
