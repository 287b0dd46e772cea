import Foundation
import NIOCore
import NIOHTTP1

/// Serves `ControlAPI` over HTTP/1.1 (keep-alive), one request at a time per connection.
final class ControlAPIHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    static let maximumBodyBytes = 1 << 20

    private let api: ControlAPI
    private var head: HTTPRequestHead?
    private var body = Data()
    private var bodyTooLarge = false

    init(api: ControlAPI) {
        self.api = api
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch self.unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            self.body = Data()
            self.bodyTooLarge = false
        case .body(let buffer):
            if self.body.count + buffer.readableBytes > Self.maximumBodyBytes {
                self.bodyTooLarge = true
            } else {
                self.body.append(contentsOf: buffer.readableBytesView)
            }
        case .end:
            guard let head = self.head else { return }
            self.head = nil
            let response =
                self.bodyTooLarge
                ? ControlAPI.error(413, "body larger than \(Self.maximumBodyBytes) bytes")
                : self.api.handle(method: head.method.rawValue, uri: head.uri, body: self.body)
            self.write(response, keepAlive: head.isKeepAlive, version: head.version, context: context)
        }
    }

    private func write(
        _ response: ControlAPI.Response,
        keepAlive: Bool,
        version: HTTPVersion,
        context: ChannelHandlerContext
    ) {
        var headers = HTTPHeaders()
        headers.add(name: "content-type", value: "application/json")
        headers.add(name: "content-length", value: String(response.body.count))
        if !keepAlive { headers.add(name: "connection", value: "close") }
        let head = HTTPResponseHead(
            version: version,
            status: HTTPResponseStatus(statusCode: response.status),
            headers: headers
        )
        context.write(self.wrapOutboundOut(.head(head)), promise: nil)
        context.write(
            self.wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: response.body)))),
            promise: nil
        )
        if keepAlive {
            context.writeAndFlush(self.wrapOutboundOut(.end(nil)), promise: nil)
        } else {
            context.writeAndFlush(self.wrapOutboundOut(.end(nil))).assumeIsolated().whenComplete { _ in
                context.close(promise: nil)
            }
        }
    }
}
