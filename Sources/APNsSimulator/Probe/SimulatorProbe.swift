import Foundation
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL

/// A minimal raw HTTP/2 client for checking the simulator from tests and diagnostics: one TLS
/// connection, requests written on explicit streams, responses, GOAWAY and SETTINGS observed as
/// they arrive. It is not an APNs client (no pooling, no retries, no token minting).
public final class SimulatorProbe: Sendable {
    public struct Request: Sendable {
        public var method: String
        public var path: String
        /// Regular headers, in order (duplicates are sent as given).
        public var headers: [(String, String)]
        public var body: [UInt8]

        public init(method: String = "POST", path: String, headers: [(String, String)] = [], body: [UInt8] = []) {
            self.method = method
            self.path = path
            self.headers = headers
            self.body = body
        }

        /// A push to `/3/device/<token>` with a JSON body.
        public static func push(
            token: String,
            headers: [(String, String)] = [],
            payload: String = #"{"aps":{"alert":"hello"}}"#
        ) -> Request {
            Request(path: "/3/device/\(token)", headers: headers, body: Array(payload.utf8))
        }
    }

    public struct Response: Sendable, Equatable {
        public var streamID: Int
        public var status: Int
        /// Response headers (last value per name).
        public var headers: [String: String]
        public var body: [UInt8]

        /// The `reason` of an error body.
        public var reason: String? {
            self.json?["reason"] as? String
        }

        /// The 410 body's `timestamp`.
        public var timestamp: Int64? {
            (self.json?["timestamp"] as? NSNumber)?.int64Value
        }

        private var json: [String: Any]? {
            guard !self.body.isEmpty else { return nil }
            return try? JSONSerialization.jsonObject(with: Data(self.body)) as? [String: Any]
        }
    }

    public enum Outcome: Sendable, Equatable {
        case response(Response)
        /// The stream ended without a response (closed by GOAWAY, reset, or the connection closed).
        case unanswered(streamID: Int)

        public var response: Response? {
            if case .response(let response) = self { return response }
            return nil
        }
    }

    public struct ProbeError: Error, CustomStringConvertible {
        public var description: String
    }

    private let channel: any Channel
    private let handler: NIOLoopBound<ProbeHandler>

    private init(channel: any Channel, handler: NIOLoopBound<ProbeHandler>) {
        self.channel = channel
        self.handler = handler
    }

    /// Connects over TLS and completes the HTTP/2 preface.
    ///
    /// - Parameters:
    ///   - trustRootsPEM: CA certificates to trust (the simulator's CA); nil skips verification.
    ///   - applicationProtocols: ALPN offer; `[]` tests HTTP/2 with prior knowledge over TLS.
    public static func connect(
        host: String = "127.0.0.1",
        port: Int,
        trustRootsPEM: String?,
        clientCertificatePEM: String? = nil,
        clientPrivateKeyPEM: String? = nil,
        applicationProtocols: [String] = ["h2"],
        serverHostname: String = "localhost"
    ) async throws -> SimulatorProbe {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.applicationProtocols = applicationProtocols
        if let trustRootsPEM {
            tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMBytes(Array(trustRootsPEM.utf8)))
        } else {
            tls.certificateVerification = .none
        }
        if let clientCertificatePEM, let clientPrivateKeyPEM {
            tls.certificateChain = try NIOSSLCertificate.fromPEMBytes(Array(clientCertificatePEM.utf8)).map {
                .certificate($0)
            }
            tls.privateKey = .privateKey(try NIOSSLPrivateKey(bytes: Array(clientPrivateKeyPEM.utf8), format: .pem))
        }
        let sslContext = try NIOSSLContext(configuration: tls)
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(NIOSSLClientHandler(context: sslContext, serverHostname: serverHostname))
                    try sync.addHandler(NIOHTTP2Handler(mode: .client))
                    try sync.addHandler(ProbeHandler())
                }
            }
            .connect(host: host, port: port)
            .get()
        let handler = try await channel.eventLoop.submit {
            NIOLoopBound(
                try channel.pipeline.syncOperations.handler(type: ProbeHandler.self),
                eventLoop: channel.eventLoop
            )
        }.get()
        let probe = SimulatorProbe(channel: channel, handler: handler)
        // The server's first SETTINGS frame proves the TLS handshake and the preface went through.
        _ = try await probe.waitForRemoteSettings(timeout: .seconds(10)) { _ in true }
        return probe
    }

    /// Sends the requests on new streams (1, 3, 5, ... in order) in one flush and waits until
    /// each is answered or ends unanswered.
    public func send(_ requests: [Request], timeout: Duration = .seconds(10)) async throws -> [Outcome] {
        let timeout = TimeAmount(timeout)
        let handler = self.handler
        let eventLoop = self.channel.eventLoop
        let futures = try await eventLoop.submit {
            handler.value.send(requests, timeout: timeout)
        }.get()
        var outcomes: [Outcome] = []
        for entry in futures {
            outcomes.append(try await entry.future.get())
        }
        return outcomes
    }

    /// A request written but not necessarily answered yet.
    public struct PendingOutcome: Sendable {
        public let streamID: Int
        fileprivate let future: EventLoopFuture<Outcome>
        fileprivate let handler: NIOLoopBound<ProbeHandler>

        /// Waits for the outcome.
        public func outcome() async throws -> Outcome {
            try await self.future.get()
        }

        /// Whether the outcome is already known.
        public var isComplete: Bool {
            get async {
                let handler = self.handler
                let streamID = self.streamID
                return (try? await self.future.eventLoop.submit { !handler.value.isPending(streamID) }.get()) ?? false
            }
        }
    }

    /// Writes the requests (in one flush) and returns without waiting for answers.
    public func start(_ requests: [Request], timeout: Duration = .seconds(60)) async throws -> [PendingOutcome] {
        let timeout = TimeAmount(timeout)
        let handler = self.handler
        let futures = try await self.channel.eventLoop.submit {
            handler.value.send(requests, timeout: timeout)
        }.get()
        return futures.map { PendingOutcome(streamID: $0.streamID, future: $0.future, handler: handler) }
    }

    /// Sends a PING and waits for its ACK: a barrier proving the server has read every frame
    /// written before it.
    public func ping(timeout: Duration = .seconds(10)) async throws {
        let handler = self.handler
        let future = try await self.channel.eventLoop.submit {
            handler.value.ping(timeout: TimeAmount(timeout))
        }.get()
        try await future.get()
    }

    /// Sends one request and waits for its outcome.
    public func send(_ request: Request, timeout: Duration = .seconds(10)) async throws -> Outcome {
        try await self.send([request], timeout: timeout)[0]
    }

    /// Waits until the server's latest `SETTINGS_MAX_CONCURRENT_STREAMS` equals `value`.
    public func waitForMaxConcurrentStreams(_ value: Int, timeout: Duration = .seconds(10)) async throws {
        _ = try await self.waitForRemoteSettings(timeout: TimeAmount(timeout)) { $0[.maxConcurrentStreams] == value }
    }

    /// The server's latest `SETTINGS_MAX_CONCURRENT_STREAMS`, once its SETTINGS arrived.
    public func remoteMaxConcurrentStreams() async throws -> Int? {
        let handler = self.handler
        return try await self.channel.eventLoop.submit { handler.value.remoteSettings[.maxConcurrentStreams] }.get()
    }

    /// The last-stream-id of the GOAWAY the server sent, if any.
    public func goAwayLastStreamID() async throws -> Int? {
        let handler = self.handler
        return try await self.channel.eventLoop.submit { handler.value.goAwayLastStreamID }.get()
    }

    /// Completes when the server closes the connection (fails after `timeout`).
    public func waitForClose(timeout: Duration = .seconds(10)) async throws {
        let timeout = TimeAmount(timeout)
        let closeFuture = self.channel.closeFuture
        let eventLoop = self.channel.eventLoop
        let promise = eventLoop.makePromise(of: Void.self)
        closeFuture.cascade(to: promise)
        let deadline = eventLoop.scheduleTask(in: timeout) {
            promise.fail(ProbeError(description: "connection still open after \(timeout)"))
        }
        defer { deadline.cancel() }
        try await promise.futureResult.get()
    }

    public var isActive: Bool {
        self.channel.isActive
    }

    public func close() async {
        try? await self.channel.close()
    }

    private func waitForRemoteSettings(
        timeout: TimeAmount,
        _ predicate: @escaping @Sendable ([HTTP2SettingsParameter: Int]) -> Bool
    ) async throws -> [HTTP2SettingsParameter: Int] {
        let handler = self.handler
        let future = try await self.channel.eventLoop.submit {
            handler.value.waitForSettings(timeout: timeout, predicate)
        }.get()
        return try await future.get()
    }
}

extension TimeAmount {
    init(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        self = .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
}

/// The probe's frame handler; all state lives on the channel's event loop.
final class ProbeHandler: ChannelDuplexHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    private struct Pending {
        var promise: EventLoopPromise<SimulatorProbe.Outcome>
        var status: Int?
        var headers: [String: String] = [:]
        var body: [UInt8] = []
    }

    private var context: ChannelHandlerContext?
    private var nextStreamID = 1
    private var pending: [Int: Pending] = [:]
    private(set) var remoteSettings: [HTTP2SettingsParameter: Int] = [:]
    private var settingsSeen = false
    private(set) var goAwayLastStreamID: Int?
    private typealias SettingsWaiter = (
        predicate: ([HTTP2SettingsParameter: Int]) -> Bool,
        promise: EventLoopPromise<[HTTP2SettingsParameter: Int]>
    )
    private var settingsWaiters: [SettingsWaiter] = []
    private var closed = false
    private var nextPing: UInt64 = 0
    private var pingWaiters: [UInt64: EventLoopPromise<Void>] = [:]

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func send(
        _ requests: [SimulatorProbe.Request],
        timeout: TimeAmount
    ) -> [(streamID: Int, future: EventLoopFuture<SimulatorProbe.Outcome>)] {
        guard let context else { return [] }
        var futures: [(streamID: Int, future: EventLoopFuture<SimulatorProbe.Outcome>)] = []
        for request in requests {
            let streamID = self.nextStreamID
            self.nextStreamID += 2
            let promise = context.eventLoop.makePromise(of: SimulatorProbe.Outcome.self)
            futures.append((streamID, promise.futureResult))
            if self.closed {
                promise.succeed(.unanswered(streamID: streamID))
                continue
            }
            self.pending[streamID] = Pending(promise: promise)
            var headers = HPACKHeaders()
            headers.add(name: ":method", value: request.method)
            headers.add(name: ":scheme", value: "https")
            headers.add(name: ":authority", value: "localhost")
            headers.add(name: ":path", value: request.path)
            for (name, value) in request.headers {
                headers.add(name: name.lowercased(), value: value)
            }
            let id = HTTP2StreamID(streamID)
            context.write(
                self.wrapOutboundOut(
                    HTTP2Frame(
                        streamID: id,
                        payload: .headers(.init(headers: headers, endStream: request.body.isEmpty))
                    )
                ),
                promise: nil
            )
            if !request.body.isEmpty {
                let buffer = context.channel.allocator.buffer(bytes: request.body)
                context.write(
                    self.wrapOutboundOut(
                        HTTP2Frame(streamID: id, payload: .data(.init(data: .byteBuffer(buffer), endStream: true)))
                    ),
                    promise: nil
                )
            }
            let deadline = context.eventLoop.assumeIsolated().scheduleTask(in: timeout) {
                promise.fail(SimulatorProbe.ProbeError(description: "stream \(streamID): no outcome after \(timeout)"))
            }
            promise.futureResult.whenComplete { _ in deadline.cancel() }
        }
        context.flush()
        return futures
    }

    func isPending(_ streamID: Int) -> Bool {
        self.pending[streamID] != nil
    }

    func ping(timeout: TimeAmount) -> EventLoopFuture<Void> {
        guard let context, !self.closed else {
            return MultiThreadedEventLoopGroup.singleton.next().makeFailedFuture(
                SimulatorProbe.ProbeError(description: "probe not connected")
            )
        }
        self.nextPing &+= 1
        let data = HTTP2PingData(withInteger: self.nextPing)
        let promise = context.eventLoop.makePromise(of: Void.self)
        self.pingWaiters[self.nextPing] = promise
        context.writeAndFlush(
            self.wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: .ping(data, ack: false))),
            promise: nil
        )
        let deadline = context.eventLoop.assumeIsolated().scheduleTask(in: timeout) {
            promise.fail(SimulatorProbe.ProbeError(description: "no PING ACK after \(timeout)"))
        }
        promise.futureResult.whenComplete { _ in deadline.cancel() }
        return promise.futureResult
    }

    func waitForSettings(
        timeout: TimeAmount,
        _ predicate: @escaping ([HTTP2SettingsParameter: Int]) -> Bool
    ) -> EventLoopFuture<[HTTP2SettingsParameter: Int]> {
        guard let context else {
            return MultiThreadedEventLoopGroup.singleton.next().makeFailedFuture(
                SimulatorProbe.ProbeError(description: "probe not connected")
            )
        }
        let promise = context.eventLoop.makePromise(of: [HTTP2SettingsParameter: Int].self)
        if self.settingsSeen && predicate(self.remoteSettings) {
            promise.succeed(self.remoteSettings)
            return promise.futureResult
        }
        if self.closed {
            promise.fail(SimulatorProbe.ProbeError(description: "connection closed"))
            return promise.futureResult
        }
        self.settingsWaiters.append((predicate, promise))
        let deadline = context.eventLoop.assumeIsolated().scheduleTask(in: timeout) {
            promise.fail(SimulatorProbe.ProbeError(description: "settings not seen after \(timeout)"))
        }
        promise.futureResult.whenComplete { _ in deadline.cancel() }
        return promise.futureResult
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = self.unwrapInboundIn(data)
        let streamID = Int(frame.streamID)
        switch frame.payload {
        case .headers(let headers):
            guard var entry = self.pending[streamID] else { return }
            for (name, value, _) in headers.headers {
                if name == ":status" {
                    entry.status = Int(value)
                } else {
                    entry.headers[name] = value
                }
            }
            self.pending[streamID] = entry
            if headers.endStream { self.finish(streamID) }
        case .data(let data):
            guard var entry = self.pending[streamID] else { return }
            if case .byteBuffer(let buffer) = data.data {
                entry.body.append(contentsOf: buffer.readableBytesView)
            }
            self.pending[streamID] = entry
            if data.endStream { self.finish(streamID) }
        case .settings(.settings(let settings)):
            for setting in settings {
                self.remoteSettings[setting.parameter] = setting.value
            }
            self.settingsSeen = true
            var remaining: [SettingsWaiter] = []
            for waiter in self.settingsWaiters {
                if waiter.predicate(self.remoteSettings) {
                    waiter.promise.succeed(self.remoteSettings)
                } else {
                    remaining.append(waiter)
                }
            }
            self.settingsWaiters = remaining
        case .goAway(let lastStreamID, _, _):
            self.goAwayLastStreamID = Int(lastStreamID)
        case .ping(let data, ack: true):
            self.pingWaiters.removeValue(forKey: data.integer)?.succeed(())
        default:
            break
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let closed = event as? StreamClosedEvent {
            let id = Int(closed.streamID)
            if let entry = self.pending.removeValue(forKey: id) {
                entry.promise.succeed(.unanswered(streamID: id))
            }
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.closed = true
        let pending = self.pending
        self.pending.removeAll()
        for (id, entry) in pending {
            entry.promise.succeed(.unanswered(streamID: id))
        }
        let pings = self.pingWaiters
        self.pingWaiters.removeAll()
        for promise in pings.values {
            promise.fail(SimulatorProbe.ProbeError(description: "connection closed"))
        }
        let waiters = self.settingsWaiters
        self.settingsWaiters.removeAll()
        for waiter in waiters {
            waiter.promise.fail(SimulatorProbe.ProbeError(description: "connection closed"))
        }
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }

    private func finish(_ streamID: Int) {
        guard let entry = self.pending.removeValue(forKey: streamID) else { return }
        let response = SimulatorProbe.Response(
            streamID: streamID,
            status: entry.status ?? 0,
            headers: entry.headers,
            body: entry.body
        )
        entry.promise.succeed(.response(response))
    }
}
