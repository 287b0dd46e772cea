import Logging
import NIOCore
import NIOHTTP1
import PushTransport
import PushgateCore

/// One HTTP/1.1 keep-alive connection to an origin that does not offer HTTP/2: behind NIOHTTP1's client
/// codec, it writes one request at a time and reads its answer. Its pool sees it as a connection of
/// capacity 1, so a busy origin gets several (up to its cap). Decisions are
/// ``WebPushHTTP1ConnectionStateMachine``'s; this class carries them out.
final class WebPushHTTP1Handler: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundOut = HTTPClientRequestPart

    struct Settings {
        var connectionID: Int
        var pool: ConnectionPool<WebPushPlugin>
        var origin: WebPushOrigin
        var authority: String
        var credentials: WebPushVAPIDCredentials
        var tickInterval: TimeAmount
        var answerTimeout: TimeAmount
        var logger: Logger
    }

    private struct InFlight {
        var request: WebPushPooledRequest
        var authorization: String
        var status: Int?
        var retryAfter: String?
        var keepAlive = true
    }

    private let settings: Settings
    private var machine: WebPushHTTP1ConnectionStateMachine
    private var inFlight: InFlight?
    private var released = 0
    private var context: ChannelHandlerContext?
    private var tickTask: RepeatedTask?
    private var lastError: String?

    init(settings: Settings, idleTimeout: TimeAmount?, now: NIODeadline) {
        self.settings = settings
        self.machine = WebPushHTTP1ConnectionStateMachine(idleTimeout: idleTimeout, now: now)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
        let interval = settings.tickInterval
        tickTask = context.eventLoop.scheduleRepeatedTask(initialDelay: interval, delay: interval) { _ in
            loopBound.value.tick()
        }
        settings.pool.connectionReady(settings.connectionID, capacity: 1)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        tickTask?.cancel()
        tickTask = nil
        self.context = nil
    }

    /// Queued work and this connection was parked: take the next request, if it is free.
    func wake() {
        guard let context, machine.mayWrite else { return }
        let taken = settings.pool.pull(connection: settings.connectionID, released: released, maximum: 1)
        released = 0
        guard let request = taken.first else { return }
        write(request, context: context)
    }

    private func write(_ request: WebPushPooledRequest, context: ChannelHandlerContext) {
        let submission = request.request
        let authorization = settings.credentials.authorization(for: settings.origin)
        var headers = HTTPHeaders()
        headers.reserveCapacity(9)
        headers.add(name: "host", value: settings.authority)
        for (name, value) in submission.headers.fields { headers.add(name: name, value: value) }
        headers.add(name: "authorization", value: authorization)
        headers.add(name: "content-length", value: String(submission.body.readableBytes))
        let head = HTTPRequestHead(version: .http1_1, method: .POST, uri: submission.path, headers: headers)
        inFlight = InFlight(request: request, authorization: authorization)
        machine.requestWritten(answerDeadline: context.eventLoop.now + settings.answerTimeout)
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(submission.body))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            inFlight?.status = Int(head.status.code)
            inFlight?.retryAfter = head.headers.first(name: "retry-after")
            inFlight?.keepAlive = head.isKeepAlive
        case .body:
            break
        case .end:
            answerCompleted(context: context)
        }
    }

    private func answerCompleted(context: ChannelHandlerContext) {
        let finished = inFlight
        inFlight = nil
        let action = machine.answerCompleted(keepAlive: finished?.keepAlive ?? false, now: context.eventLoop.now)
        if finished != nil { released += 1 }
        // The connection takes its next request (or parks) before the outcome is carried out, so that a
        // message sent again goes to the head of a queue this connection already drains.
        switch action {
        case .pullNext:
            wake()
        case .close:
            settings.pool.connectionRetiring(settings.connectionID)
            context.close(promise: nil)
        }
        guard let finished else { return }
        guard let status = finished.status else {
            finished.request.fail(.malformedResponse("no status"))
            return
        }
        switch settings.credentials.disposition(
            of: finished.request,
            status: status,
            retryAfter: finished.retryAfter,
            authorization: finished.authorization
        ) {
        case .complete(let outcome):
            finished.request.complete(outcome)
        case .requeue(let request, let failure):
            settings.pool.requeue([request], because: failure)
        }
    }

    /// Take nothing new; close once the answer in flight, if any, has arrived.
    func closeGracefully() {
        guard let context else { return }
        if machine.closeRequested() == .closeNow { context.close(promise: nil) }
    }

    private func tick() {
        guard let context else { return }
        switch machine.tick(now: context.eventLoop.now) {
        case .none:
            break
        case .closeIdle:
            settings.logger.debug("closing idle connection")
            settings.pool.connectionRetiring(settings.connectionID)
            context.close(promise: nil)
        case .answerTimedOut:
            let expired = inFlight
            inFlight = nil
            settings.pool.connectionRetiring(settings.connectionID)
            context.close(promise: nil)
            // Written: the service may have taken it; not sent again.
            expired?.request.fail(.answerTimeout)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        tickTask?.cancel()
        tickTask = nil
        if machine.channelClosed(), let lost = inFlight {
            inFlight = nil
            // Written, unanswered: sent again on another connection (see ``WebPushHTTP2Exchange``).
            settings.credentials.metrics.resent(.connectionLost)
            settings.pool.requeue([lost.request], because: .connectionLost)
        }
        settings.pool.connectionClosed(settings.connectionID, everReady: true, error: lastError)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        lastError = TransportTLS.describe(error)
        settings.logger.debug("connection error", metadata: ["webpush.error": "\(lastError ?? "")"])
        context.close(promise: nil)
    }
}
