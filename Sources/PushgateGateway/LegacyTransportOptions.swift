public import APNsLegacy

/// The app's route over Apple's legacy binary interface instead of HTTP/2 (`--transport legacy`), and
/// the feedback service that prunes its uninstalled devices. Apple's own servers stopped accepting
/// this protocol on 31 March 2021; it serves gateways and test rigs that still speak it.
public struct LegacyTransportOptions: Sendable {
    public var sender: LegacySender.Configuration
    /// nil: no feedback polling.
    public var feedback: FeedbackPoller.Configuration?

    public init(sender: LegacySender.Configuration, feedback: FeedbackPoller.Configuration?) {
        self.sender = sender
        self.feedback = feedback
    }
}
