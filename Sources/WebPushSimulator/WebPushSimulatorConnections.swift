import NIOCore

/// The TCP connections one origin accepted: for tests of a client's caps and idle closes.
public struct WebPushSimulatorConnections: Sendable, Hashable {
    /// Accepted since the start (`reset` does not forget them).
    public var opened = 0
    /// Open now.
    public var open = 0
    /// The most open at once.
    public var peak = 0
}

/// Counts an origin's connections as they open and close; first in each accepted channel's pipeline.
final class WebPushSimulatorConnectionCounter: ChannelInboundHandler, Sendable {
    typealias InboundIn = NIOAny

    /// The key of the counts over every origin.
    static let allOrigins = -1

    private let originIndex: Int
    private let core: WebPushSimulatorCore

    init(originIndex: Int, core: WebPushSimulatorCore) {
        self.originIndex = originIndex
        self.core = core
    }

    func channelActive(context: ChannelHandlerContext) {
        core.state.withLock { state in
            for key in [originIndex, Self.allOrigins] {
                var counts = state.connections[key, default: WebPushSimulatorConnections()]
                counts.opened += 1
                counts.open += 1
                counts.peak = max(counts.peak, counts.open)
                state.connections[key] = counts
            }
        }
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        core.state.withLock { state in
            for key in [originIndex, Self.allOrigins] { state.connections[key]?.open -= 1 }
        }
        context.fireChannelInactive()
    }
}
