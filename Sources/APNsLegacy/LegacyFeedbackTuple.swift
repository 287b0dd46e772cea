public import Foundation
public import NIOCore
public import PushgateCore

/// One entry of the legacy feedback service: a device that stopped accepting the app's notifications,
/// and when APNs found out. On the wire: `|timestamp (4, UNIX seconds)|token length (2)|token|`.
///
/// A device registered again after `timestamp` is still valid; only older registrations should be removed.
public struct LegacyFeedbackTuple: Hashable, Sendable, CustomStringConvertible {
    /// The UNIX time (seconds) as the wire carries it.
    public var timestampSeconds: UInt32
    public var token: DeviceToken

    public init(timestampSeconds: UInt32, token: DeviceToken) {
        self.timestampSeconds = timestampSeconds
        self.token = token
    }

    public var timestamp: Date { Date(timeIntervalSince1970: TimeInterval(self.timestampSeconds)) }

    /// Writes the tuple (what a feedback service, such as the simulator, sends). Returns the bytes written.
    @discardableResult
    public func write(into buffer: inout ByteBuffer) -> Int {
        let bytes = self.token.bytes  // 8 to 100 bytes: DeviceToken guarantees it
        buffer.writeInteger(self.timestampSeconds)
        buffer.writeInteger(UInt16(bytes.count))
        buffer.writeBytes(bytes)
        return 6 + bytes.count
    }

    public var description: String { "\(self.token) at \(self.timestampSeconds)" }
}
