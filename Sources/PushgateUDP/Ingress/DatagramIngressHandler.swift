import Foundation
import Logging
import NIOCore
import PushgateCore

/// The per-socket handler: refuses datagrams from senders outside the allowed ranges, parses the others
/// on the event loop (the receive buffer is then free to be reused for the next read), queues what
/// parses, rejects the rest, and holds socket reads while the queue is full. Warnings about refused and
/// rejected datagrams go through `warnings`: at most one line a second per port and reason, so a flood
/// of bad datagrams cannot grow the log without bound.
final class DatagramIngressHandler<Command: Sendable>: ChannelDuplexHandler {
    typealias InboundIn = AddressedEnvelope<ByteBuffer>
    typealias OutboundIn = Never

    /// Parses one datagram received at the given time.
    typealias Parse = (ByteBuffer, Date) throws(ValidationError) -> Command

    private let port: UDPIngressPort
    private let queue: IngressQueue<Command>
    private let parse: Parse
    private let describe: (Command) -> Logger.Metadata
    private let clock: any WallClock
    private let maximumDatagramBytes: Int
    private let counters: UDPIngressCounters
    private let logger: Logger
    private let allowedSenders: [CIDRRange]?
    private let warnings: SharedFailureStorm<String>
    private var context: ChannelHandlerContext?
    private var readHeld = false

    init(
        port: UDPIngressPort,
        queue: IngressQueue<Command>,
        clock: any WallClock,
        maximumDatagramBytes: Int,
        counters: UDPIngressCounters,
        logger: Logger,
        allowedSenders: [CIDRRange]?,
        warnings: SharedFailureStorm<String>,
        parse: @escaping Parse,
        describe: @escaping (Command) -> Logger.Metadata
    ) {
        self.port = port
        self.queue = queue
        self.clock = clock
        self.maximumDatagramBytes = maximumDatagramBytes
        self.counters = counters
        self.logger = logger
        self.allowedSenders = allowedSenders
        self.warnings = warnings
        self.parse = parse
        self.describe = describe
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let envelope = unwrapInboundIn(data)
        let size = envelope.data.readableBytes
        counters.received(on: port, bytes: size)
        if let allowedSenders, !Self.isAllowed(envelope.remoteAddress, by: allowedSenders) {
            counters.refused(on: port)
            warn(
                "Datagram refused: the sender is not in udp.allow",
                reason: UDPIngressRejection.senderNotAllowed,
                metadata: [UDPIngressMetadata.bytes: "\(size)", UDPIngressMetadata.sender: "\(envelope.remoteAddress)"]
            )
            return
        }
        guard size < maximumDatagramBytes else {
            // A read that fills the buffer may have been cut short by the kernel: never parse part of one.
            reject(
                reason: UDPIngressRejection.datagramTooLarge,
                message: "datagram fills the \(maximumDatagramBytes)-byte receive buffer and may be truncated",
                size: size,
                from: envelope.remoteAddress
            )
            return
        }
        do {
            let command = try parse(envelope.data, clock.now())
            guard queue.received(command) else {
                counters.rejected(on: port, reason: UDPIngressRejection.storeOutageOverflow)
                warn(
                    "Datagram dropped: the store is out and the registrations waiting for it fill the outage buffer",
                    reason: UDPIngressRejection.storeOutageOverflow,
                    metadata: [
                        UDPIngressMetadata.bytes: "\(size)", UDPIngressMetadata.sender: "\(envelope.remoteAddress)",
                    ]
                )
                return
            }
            if logger.logLevel <= .debug {
                var metadata = describe(command)
                metadata[UDPIngressMetadata.port] = "\(port)"
                metadata[UDPIngressMetadata.bytes] = "\(size)"
                logger.debug("Datagram accepted", metadata: metadata)
            }
        } catch {
            reject(reason: error.code.rawValue, message: error.description, size: size, from: envelope.remoteAddress)
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        queue.readCycleCompleted()
        context.fireChannelReadComplete()
    }

    func read(context: ChannelHandlerContext) {
        let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
        let eventLoop = context.eventLoop
        let mayRead = queue.shouldRead {
            eventLoop.execute { loopBound.value.resumeHeldRead() }
        }
        if mayRead {
            context.read()
        } else {
            readHeld = true
            logger.trace("Queue full, holding socket reads", metadata: [UDPIngressMetadata.port: "\(port)"])
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A datagram socket survives errors such as ECONNREFUSED from an earlier send; NIO closes the
        // channel itself when the error is fatal.
        warn("UDP socket error", reason: "socket_error", metadata: [UDPIngressMetadata.error: "\(error)"])
    }

    private func resumeHeldRead() {
        guard readHeld, let context else { return }
        readHeld = false
        read(context: context)
    }

    private func reject(reason: String, message: String, size: Int, from address: SocketAddress) {
        counters.rejected(on: port, reason: reason)
        warn(
            "Datagram rejected",
            reason: reason,
            metadata: [
                UDPIngressMetadata.detail: "\(message)",
                UDPIngressMetadata.bytes: "\(size)",
                UDPIngressMetadata.sender: "\(address)",
            ]
        )
    }

    /// A warning line, unless this port already wrote one for `reason` within the last second; the line
    /// that ends a quiet second carries how many there were since the previous one (`udp.repeated`),
    /// itself included. Its metadata are those of the datagram that writes it.
    private func warn(_ message: Logger.Message, reason: String, metadata: Logger.Metadata) {
        guard logger.logLevel <= .warning, let count = warnings.record("\(port)/\(reason)") else { return }
        var metadata = metadata
        metadata[UDPIngressMetadata.port] = "\(port)"
        metadata[UDPIngressMetadata.reason] = "\(reason)"
        if count > 1 { metadata[UDPIngressMetadata.repeated] = "\(count)" }
        logger.warning(message, metadata: metadata)
    }

    /// The sender's address in one of `ranges` (a socket address without an IP is refused).
    static func isAllowed(_ address: SocketAddress, by ranges: [CIDRRange]) -> Bool {
        switch address {
        case .v4(let ipv4):
            withUnsafeBytes(of: ipv4.address.sin_addr) { bytes in ranges.contains { $0.contains(bytes) } }
        case .v6(let ipv6):
            withUnsafeBytes(of: ipv6.address.sin6_addr) { bytes in ranges.contains { $0.contains(bytes) } }
        case .unixDomainSocket:
            false
        }
    }
}

/// Logger metadata keys of the UDP ingress.
enum UDPIngressMetadata {
    static let port = "udp.port"
    static let bytes = "udp.bytes"
    static let reason = "udp.reason"
    static let detail = "udp.detail"
    static let sender = "udp.sender"
    static let error = "udp.error"
    static let address = "udp.address"
    static let count = "udp.count"
    static let receiveBuffer = "udp.receive_buffer"
    /// How many warnings of the line's kind there were since its previous line, this one included.
    static let repeated = "udp.repeated"
}
