import Logging
import NIOCore
import NIOSSL
import NIOTLS

/// One connection to the simulated legacy gateway (after TLS and `LegacyGatewayParser`). Accepts
/// notifications in order; at the first bad one it writes the 6-byte error response
/// `|8|status|identifier|` and closes, discarding everything after it, as Apple's gateway did. Success
/// is never answered.
final class LegacyGatewayHandler: ChannelInboundHandler {
    typealias InboundIn = LegacyGatewayInput
    typealias OutboundOut = ByteBuffer

    private let core: LegacyGatewayCore
    private let connectionID: Int
    private var context: ChannelHandlerContext?
    private var batch = LegacyGatewayCore.Batch()
    private var accepted = 0
    /// The identifier of the last notification processed (0 before any, or for the simple format).
    private var lastProcessed: UInt32 = 0
    private var closing = false

    init(core: LegacyGatewayCore, connectionID: Int) {
        self.core = core
        self.connectionID = connectionID
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        core.register(
            connectionID,
            .init(eventLoop: context.eventLoop, handler: NIOLoopBound(self, eventLoop: context.eventLoop))
        )
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        commit()
        core.unregister(connectionID)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // TLS failures and resets: the connection is over; nothing to answer.
        context.close(promise: nil)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .handshakeCompleted? = event as? TLSUserEvent,
            !LegacyAuthentication.admits(context: context, core: core)
        {
            closing = true
            batch.refused = true
            commit()
            context.close(promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !closing else { return }
        switch unwrapInboundIn(data) {
        case .unreadable(let identifier, let problem):
            core.logger.debug("legacy gateway: unreadable message", metadata: ["apns.simulator.problem": "\(problem)"])
            answer(status: .protocolError, identifier: identifier ?? 0)
        case .notification(let notification):
            batch.received += 1
            let identifier = notification.identifier ?? 0
            if let status = LegacyGatewayStatus.check(notification) {
                answer(status: status, identifier: identifier)
                return
            }
            let token = LegacyFeedbackList.hex(notification.token)
            switch core.devices.state(of: token) {
            case .bad:
                answer(status: .invalidToken, identifier: identifier)
                return
            case .unregistered:
                batch.discardedUnregistered += 1
            case nil:
                batch.accepted.append(
                    LegacyRecordedNotification(
                        command: notification.command,
                        identifier: notification.identifier,
                        expiry: notification.expiry,
                        priority: notification.priority,
                        deviceToken: token,
                        payload: notification.payload,
                        connectionID: connectionID,
                        arrivalTime: core.clock.now()
                    )
                )
            }
            lastProcessed = identifier
            accepted += 1
            switch core.faultAfterAccepting(accepted) {
            case .none: break
            case .shutdown: answer(status: .shutdown, identifier: lastProcessed)
            case .drop: drop()
            }
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        commit()
        context.fireChannelReadComplete()
    }

    /// Answers Shutdown naming the last notification processed, and closes.
    func shutDown() {
        guard !closing else { return }
        answer(status: .shutdown, identifier: lastProcessed)
    }

    /// Closes without an error response.
    func drop() {
        guard !closing, let context else { return }
        closing = true
        commit()
        context.close(promise: nil)
    }

    private func answer(status: LegacyGatewayStatus, identifier: UInt32) {
        guard !closing, let context else { return }
        closing = true
        batch.errorStatus = status.rawValue
        commit()
        var buffer = context.channel.allocator.buffer(capacity: 6)
        buffer.writeInteger(UInt8(8))
        buffer.writeInteger(status.rawValue)
        buffer.writeInteger(identifier)
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(buffer)).whenComplete { _ in channel.close(promise: nil) }
    }

    private func commit() {
        guard batch.received > 0 || batch.errorStatus != nil || batch.refused else { return }
        core.commit(batch)
        batch = .init()
    }
}

/// The legacy feedback service: right after the TLS handshake it writes one tuple
/// `|timestamp (4)|token length (2)|token|` per device marked unregistered and not yet reported, then
/// closes. Entries go only once (back on the list if the write fails).
final class LegacyFeedbackHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let core: LegacyGatewayCore

    init(core: LegacyGatewayCore) {
        self.core = core
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard case .handshakeCompleted? = event as? TLSUserEvent else {
            context.fireUserInboundEventTriggered(event)
            return
        }
        guard LegacyAuthentication.admits(context: context, core: core) else {
            context.close(promise: nil)
            return
        }
        let entries = core.devices.feedback.take()
        var buffer = context.channel.allocator.buffer(capacity: entries.count * 38)
        for entry in entries {
            buffer.writeInteger(entry.timestampSeconds)
            buffer.writeInteger(UInt16(entry.token.count))
            buffer.writeBytes(entry.token)
        }
        let core = self.core
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(buffer)).whenComplete { result in
            switch result {
            case .success: core.feedbackServed(tuples: entries.count)
            case .failure: core.devices.feedback.restore(entries)
            }
            channel.close(promise: nil)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // A feedback client sends nothing; whatever it sends is ignored.
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}

/// The legacy ports' credential check, the same as the HTTP/2 port's for certificates: with a client
/// CA configured a certificate chaining to it is required (TLS verified the chain; this checks one was
/// presented). Provider tokens do not exist in the legacy protocol, so with token keys and no client
/// CA nobody gets in.
enum LegacyAuthentication {
    static func admits(context: ChannelHandlerContext, core: LegacyGatewayCore) -> Bool {
        if core.refusesEveryone { return false }
        guard core.requiresClientCertificate else { return true }
        return (try? context.pipeline.syncOperations.nioSSL_peerCertificate()) != nil
    }
}
