import Foundation
import Logging
import NIOCore
import PushgateCore

/// The per-socket handler: parses each datagram on the event loop (the receive buffer is then free to be
/// reused for the next read), queues what parses, rejects the rest, and holds socket reads while the
/// queue is full.
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
    private var context: ChannelHandlerContext?
    private var readHeld = false

    init(
        port: UDPIngressPort,
        queue: IngressQueue<Command>,
        clock: any WallClock,
        maximumDatagramBytes: Int,
        counters: UDPIngressCounters,
        logger: Logger,
        parse: @escaping Parse,
        describe: @escaping (Command) -> Logger.Metadata
    ) {
        self.port = port
        self.queue = queue
        self.clock = clock
        self.maximumDatagramBytes = maximumDatagramBytes
        self.counters = counters
        self.logger = logger
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
            queue.received(command)
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
        logger.warning(
            "UDP socket error",
            metadata: [UDPIngressMetadata.port: "\(port)", UDPIngressMetadata.error: "\(error)"]
        )
    }

    private func resumeHeldRead() {
        guard readHeld, let context else { return }
        readHeld = false
        read(context: context)
    }

    private func reject(reason: String, message: String, size: Int, from address: SocketAddress) {
        counters.rejected(on: port, reason: reason)
        logger.warning(
            "Datagram rejected",
            metadata: [
                UDPIngressMetadata.port: "\(port)",
                UDPIngressMetadata.reason: "\(reason)",
                UDPIngressMetadata.detail: "\(message)",
                UDPIngressMetadata.bytes: "\(size)",
                UDPIngressMetadata.sender: "\(address)",
            ]
        )
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
}
