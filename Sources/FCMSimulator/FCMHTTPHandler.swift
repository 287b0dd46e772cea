import NIOCore
import NIOHTTP1

/// Collects one request at a time (an HTTP/2 stream through NIO's HTTP/1 codec, or an HTTP/1.1
/// connection) and answers it with `route`, held `latencyMilliseconds()` first when that is above 0
/// (scheduled on the event loop, so a held answer costs no thread and no CPU).
final class FCMHTTPHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    static let maximumBodyBytes = 1 << 20

    private let route: @Sendable (FCMSimulatorRequest) -> FCMSimulatorResponse
    private let latencyMilliseconds: @Sendable () -> Int
    private var head: HTTPRequestHead?
    private var body: [UInt8] = []
    private var tooLarge = false

    init(
        route: @escaping @Sendable (FCMSimulatorRequest) -> FCMSimulatorResponse,
        latencyMilliseconds: @escaping @Sendable () -> Int = { 0 }
    ) {
        self.route = route
        self.latencyMilliseconds = latencyMilliseconds
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            body = []
            tooLarge = false
        case .body(let buffer):
            if body.count + buffer.readableBytes > Self.maximumBodyBytes {
                tooLarge = true
            } else {
                body += buffer.readableBytesView
            }
        case .end:
            guard let head else { return }
            self.head = nil
            let response =
                tooLarge
                ? FCMSimulatorResponse.json(413, ["error": "body too large"])
                : route(
                    FCMSimulatorRequest(
                        method: head.method.rawValue,
                        uri: head.uri,
                        headers: head.headers.map { ($0.name, $0.value) },
                        body: body
                    )
                )
            let latency = latencyMilliseconds() + response.extraLatencyMilliseconds
            guard latency > 0 else { return write(response, head: head, context: context) }
            context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(Int64(latency))) {
                guard context.channel.isActive else { return }
                self.write(response, head: head, context: context)
            }
        }
    }

    private func write(_ response: FCMSimulatorResponse, head request: HTTPRequestHead, context: ChannelHandlerContext)
    {
        if response.dropsConnection {
            // The whole connection, not only an HTTP/2 stream: as a load balancer dropping it would.
            (context.channel.parent ?? context.channel).close(promise: nil)
            return
        }
        var headers = HTTPHeaders()
        headers.add(name: "content-type", value: "application/json; charset=UTF-8")
        headers.add(name: "content-length", value: String(response.body.count))
        for (name, value) in response.headers { headers.add(name: name, value: value) }
        let isHTTP1 = request.version.major == 1
        let keepAlive = !isHTTP1 || request.isKeepAlive
        if isHTTP1 && !keepAlive { headers.add(name: "connection", value: "close") }
        let head = HTTPResponseHead(
            version: request.version,
            status: HTTPResponseStatus(statusCode: response.status),
            headers: headers
        )
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.write(
            wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: response.body)))),
            promise: nil
        )
        if keepAlive {
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        } else {
            context.writeAndFlush(wrapOutboundOut(.end(nil))).assumeIsolated().whenComplete { _ in
                context.close(promise: nil)
            }
        }
    }
}
