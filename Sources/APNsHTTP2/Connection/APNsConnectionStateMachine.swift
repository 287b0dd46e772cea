public import PushTransport

/// The APNs connection's decisions are those of any HTTP/2 push connection (moved to `PushTransport`).
public typealias APNsConnectionStateMachine = HTTP2ConnectionStateMachine
