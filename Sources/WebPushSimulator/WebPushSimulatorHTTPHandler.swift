import NIOCore
import NIOHTTP1
import NIOPosix

/// Collects one request at a time (an HTTP/2 stream through NIO's HTTP/1 codec, or an HTTP/1.1
/// connection) and answers it with `route`, held `latencyMilliseconds()` first when above 0 (scheduled
/// on the event loop: a held answer costs no thread). With `workers`, `route` runs on that pool's
/// threads (a push's VAPID check and decryption are most of the simulator's CPU: one HTTP/2 connection's
/// messages would otherwise all be checked on its one event loop), and the answer is written back on
/// the event loop.
final class WebPushSimulatorHTTPHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    /// Far above the 4,096 bytes a push message may have, so that an oversized one is read and answered
    /// 413 rather than cut off.
    static let maximumBodyBytes = 1 << 20

    private let route: @Sendable (WebPushSimulatorRequest) -> WebPushSimulatorResponse
    private let latencyMilliseconds: @Sendable () -> Int
    private let originIndex: Int
    private let isHTTP2: Bool
    private let workers: NIOThreadPool?
    private var head: HTTPRequestHead?
    private var body: [UInt8] = []
    private var tooLarge = false

    init(
        originIndex: Int,
        isHTTP2: Bool,
        route: @escaping @Sendable (WebPushSimulatorRequest) -> WebPushSimulatorResponse,
        latencyMilliseconds: @escaping @Sendable () -> Int = { 0 },
        workers: NIOThreadPool? = nil
    ) {
        self.workers = workers
        self.originIndex = originIndex
        self.isHTTP2 = isHTTP2
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
            var request = WebPushSimulatorRequest(
                method: head.method.rawValue,
                uri: head.uri,
                headers: head.headers.map { ($0.name, $0.value) },
                body: body,
                httpVersion: isHTTP2 ? 2 : 1,
                originIndex: originIndex
            )
            if tooLarge {
                answer(.refusal(413, "body too large"), head: head, context: context)
            } else if let workers {
                let route = self.route
                request.onWorkerThread = true
                let onWorker = request
                workers.runIfActive(eventLoop: context.eventLoop) { route(onWorker) }.assumeIsolated().whenComplete {
                    result in
                    switch result {
                    case .success(let response): self.answer(response, head: head, context: context)
                    case .failure: context.close(promise: nil)  // the pool is shutting down
                    }
                }
            } else {
                answer(route(request), head: head, context: context)
            }
        }
    }

    /// Writes `response`, held first by the configured latency.
    private func answer(_ response: WebPushSimulatorResponse, head: HTTPRequestHead, context: ChannelHandlerContext) {
        let latency = latencyMilliseconds() + response.extraLatencyMilliseconds
        guard latency > 0 else { return write(response, head: head, context: context) }
        context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(Int64(latency))) {
            guard context.channel.isActive else { return }
            self.write(response, head: head, context: context)
        }
    }

    private func write(
        _ response: WebPushSimulatorResponse,
        head request: HTTPRequestHead,
        context: ChannelHandlerContext
    ) {
        if response.dropsConnection {
            // The whole connection, not only an HTTP/2 stream: as a load balancer dropping it would. (An
            // HTTP/1.1 channel's parent is the listener: closing it would stop the origin.)
            (isHTTP2 ? context.channel.parent ?? context.channel : context.channel).close(promise: nil)
            return
        }
        var headers = HTTPHeaders()
        if !response.body.isEmpty { headers.add(name: "content-type", value: response.contentType) }
        headers.add(name: "content-length", value: String(response.body.count))
        for (name, value) in response.headers { headers.add(name: name, value: value) }
        let keepAlive = isHTTP2 || request.isKeepAlive
        if !isHTTP2 && !keepAlive { headers.add(name: "connection", value: "close") }
        let head = HTTPResponseHead(
            version: request.version,
            status: HTTPResponseStatus(statusCode: response.status),
            headers: headers
        )
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        if !response.body.isEmpty {
            context.write(
                wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: response.body)))),
                promise: nil
            )
        }
        if keepAlive {
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        } else {
            context.writeAndFlush(wrapOutboundOut(.end(nil))).assumeIsolated().whenComplete { _ in
                context.close(promise: nil)
            }
        }
    }
}
