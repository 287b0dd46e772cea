import Foundation
import Logging
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOSSL
import X509

/// One simulated APNs connection, placed after `NIOHTTP2Handler` (without a stream multiplexer):
/// it reads HEADERS and DATA frames per stream ID, keeps each stream's request in a dictionary,
/// and answers by writing HEADERS (plus DATA for error bodies) frames, flushing once per read
/// burst. Decisions about GOAWAY and dropping live in `SimulatorConnectionStateMachine`.
final class SimulatorConnectionHandler: ChannelDuplexHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    /// The connection window the simulator advertises (the stream window stays at 65,535).
    static let connectionWindowSize = 1 << 20
    static let streamWindowSize = 65_535
    /// Payload bytes kept per stream; longer bodies are counted, not stored (they are rejected
    /// as too large anyway).
    static let maximumStoredBodyBytes = 16 * 1024

    private struct PendingStream {
        var headers: HPACKHeaders
        var body: ByteBuffer?
        var bodyLength = 0
    }

    private let core: SimulatorCore
    private let rawFrames: RawFrameWriter
    let connectionID: Int
    private let initialMaxConcurrentStreams: Int
    private var context: ChannelHandlerContext?
    private var machine = SimulatorConnectionStateMachine()
    private var streams: [HTTP2StreamID: PendingStream] = [:]
    private var authentication: ConnectionAuthentication?
    private var faults: SimulatorFaults
    private var faultsGeneration: Int
    private var identifiers = IdentifierGenerator()
    private var batch = RecorderBatch()
    /// Answers decided during a read burst, written in `channelReadComplete` after the recorder
    /// batch is committed: `NIOHTTP2Handler` flushes on its own read-complete, before ours, so a
    /// response written during `channelRead` could reach the client before the notification is
    /// visible in the recorder.
    private var pendingResponses: [(streamID: HTTP2StreamID, headers: HPACKHeaders, body: ByteBuffer?)] = []
    /// Answers held while the `holdAnswers` fault is set, in the order they were decided.
    private var heldResponses: [(streamID: HTTP2StreamID, headers: HPACKHeaders, body: ByteBuffer?)] = []
    private var needsFlush = false
    private var closeAfterFlush = false
    private var completedRequests = 0
    private var registered = false

    private static let okHeaders: HPACKHeaders = [":status": "200"]
    private static let errorHeadersByStatus: [Int: HPACKHeaders] = {
        var result: [Int: HPACKHeaders] = [:]
        for status in [400, 403, 404, 405, 410, 413, 429, 500, 503] {
            result[status] = [":status": String(status), "content-type": "application/json"]
        }
        return result
    }()

    init(core: SimulatorCore, rawFrames: RawFrameWriter, connectionID: Int, initialMaxConcurrentStreams: Int) {
        self.core = core
        self.rawFrames = rawFrames
        self.connectionID = connectionID
        self.initialMaxConcurrentStreams = initialMaxConcurrentStreams
        self.faultsGeneration = core.faultsGenerationValue
        self.faults = core.faults
    }

    // MARK: Channel events

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        if context.channel.isActive { self.becameActive(context: context) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.becameInactive()
        self.context = nil
    }

    func channelActive(context: ChannelHandlerContext) {
        self.becameActive(context: context)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.becameInactive()
        context.fireChannelInactive()
    }

    private func becameActive(context: ChannelHandlerContext) {
        guard !self.registered else { return }
        self.registered = true
        self.core.register(
            connectionID: self.connectionID,
            .init(eventLoop: context.eventLoop, handler: NIOLoopBound(self, eventLoop: context.eventLoop))
        )
        self.refreshFaults()
        if SimulatorConnectionStateMachine.dropsOnAccept(dropAfterStreams: self.faults.dropAfterStreams) {
            self.machine.closing()
            context.close(promise: nil)
            return
        }
        // Raise the connection-level receive window once; stream windows are topped up as used.
        let increment = Self.connectionWindowSize - 65_535
        context.write(
            self.wrapOutboundOut(
                HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: increment))
            ),
            promise: nil
        )
        // A fault may have changed the limit between pipeline set-up and now.
        let limit = self.core.effectiveMaxConcurrentStreams(self.faults)
        if limit != self.initialMaxConcurrentStreams {
            self.writeMaxConcurrentStreams(limit, context: context)
        }
        context.flush()
    }

    private func becameInactive() {
        guard self.registered else { return }
        self.registered = false
        self.machine.closing()
        self.commitBatch()
        let open = self.machine.openStreamCount
        self.core.streams.closed(connectionID: self.connectionID, count: open)
        self.machine.forgetOpenStreams()
        self.streams.removeAll()
        self.core.unregister(connectionID: self.connectionID)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = self.unwrapInboundIn(data)
        switch frame.payload {
        case .headers(let headers):
            self.headersReceived(headers, streamID: frame.streamID, context: context)
        case .data(let payload):
            self.dataReceived(payload, streamID: frame.streamID, context: context)
        default:
            break
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.commitBatch()
        if !self.pendingResponses.isEmpty {
            var responses: [(streamID: HTTP2StreamID, headers: HPACKHeaders, body: ByteBuffer?)] = []
            swap(&responses, &self.pendingResponses)
            for response in responses {
                self.writeResponse(
                    streamID: response.streamID,
                    headers: response.headers,
                    body: response.body,
                    context: context
                )
            }
            // Hand the storage back for the next burst.
            responses.removeAll(keepingCapacity: true)
            if self.pendingResponses.isEmpty { self.pendingResponses = responses }
            self.needsFlush = true
        }
        if self.needsFlush {
            self.needsFlush = false
            context.flush()
        }
        if self.closeAfterFlush {
            self.closeAfterFlush = false
            context.close(promise: nil)
        }
        context.fireChannelReadComplete()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let closed = event as? StreamClosedEvent {
            self.streamClosed(closed.streamID, context: context)
        } else if let window = event as? NIOHTTP2WindowUpdatedEvent {
            self.windowUpdated(window, context: context)
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        self.core.logger.debug(
            "connection error",
            metadata: ["apns.simulator.connection_id": "\(self.connectionID)", "error": "\(error)"]
        )
        context.close(promise: nil)
    }

    // MARK: Control (called on the event loop by SimulatorCore)

    func applyMaxConcurrentStreams(_ limit: Int) {
        guard let context, self.registered else { return }
        self.writeMaxConcurrentStreams(limit, context: context)
        context.flush()
    }

    /// The `holdAnswers` fault was cleared: every held answer goes out now (on this connection's loop,
    /// after any request read before the fault changed, so none stays held).
    func releaseHeldAnswers() {
        guard let context, self.registered, !self.heldResponses.isEmpty else { return }
        let held = self.heldResponses
        self.heldResponses = []
        self.commitBatch()
        for response in held {
            self.writeResponse(
                streamID: response.streamID,
                headers: response.headers,
                body: response.body,
                context: context
            )
        }
        context.flush()
        if self.closeAfterFlush {
            self.closeAfterFlush = false
            context.close(promise: nil)
        }
    }

    func dropNow() {
        guard let context, self.registered else { return }
        self.machine.closing()
        context.close(promise: nil)
    }

    private func writeMaxConcurrentStreams(_ limit: Int, context: ChannelHandlerContext) {
        let setting = HTTP2Setting(parameter: .maxConcurrentStreams, value: limit)
        context.write(
            self.wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: .settings(.settings([setting])))),
            promise: nil
        )
    }

    // MARK: Frames

    private func headersReceived(
        _ payload: HTTP2Frame.FramePayload.Headers,
        streamID: HTTP2StreamID,
        context: ChannelHandlerContext
    ) {
        if self.streams[streamID] != nil {
            // Trailers: nothing in them matters to APNs.
            if payload.endStream { self.requestCompleted(streamID: streamID, context: context) }
            return
        }
        self.refreshFaults()
        switch self.machine.streamOpened(id: Int(streamID), goAwayAfterStreams: self.faults.goAwayAfterStreams) {
        case .ignore:
            return
        case .sendGoAwayAndProcess(let lastStreamID):
            // Flush NIOHTTP2's frames first so the raw frame lands on a frame boundary.
            context.flush()
            self.rawFrames.writeGoAway(lastStreamID: lastStreamID)
            self.core.goAwaysSent.add(1, ordering: .relaxed)
        case .process:
            break
        }
        self.core.streams.opened(connectionID: self.connectionID)
        self.streams[streamID] = PendingStream(headers: payload.headers)
        if payload.endStream { self.requestCompleted(streamID: streamID, context: context) }
    }

    private func dataReceived(
        _ payload: HTTP2Frame.FramePayload.Data,
        streamID: HTTP2StreamID,
        context: ChannelHandlerContext
    ) {
        guard var stream = self.streams[streamID] else { return }
        if case .byteBuffer(var buffer) = payload.data, buffer.readableBytes > 0 {
            stream.bodyLength += buffer.readableBytes
            if stream.bodyLength <= Self.maximumStoredBodyBytes {
                if stream.body == nil {
                    stream.body = buffer
                } else {
                    stream.body!.writeBuffer(&buffer)
                }
            }
        }
        self.streams[streamID] = stream
        if payload.endStream { self.requestCompleted(streamID: streamID, context: context) }
    }

    private func streamClosed(_ streamID: HTTP2StreamID, context: ChannelHandlerContext) {
        self.streams.removeValue(forKey: streamID)
        let id = Int(streamID)
        guard self.machine.isOpen(id) else { return }
        self.core.streams.closed(connectionID: self.connectionID)
        if self.machine.streamClosedUnanswered(id: id) == .close {
            self.closeAfterFlush = true
            self.needsFlush = true
        }
    }

    private func windowUpdated(_ event: NIOHTTP2WindowUpdatedEvent, context: ChannelHandlerContext) {
        guard let size = event.inboundWindowSize else { return }
        let target: Int
        if event.streamID == .rootStream {
            target = Self.connectionWindowSize
        } else {
            guard self.streams[event.streamID] != nil else { return }
            target = Self.streamWindowSize
        }
        guard size <= target / 2 else { return }
        context.write(
            self.wrapOutboundOut(
                HTTP2Frame(streamID: event.streamID, payload: .windowUpdate(windowSizeIncrement: target - size))
            ),
            promise: nil
        )
        self.needsFlush = true
    }

    // MARK: Requests

    private func refreshFaults() {
        let generation = self.core.faultsGenerationValue
        if generation != self.faultsGeneration {
            self.faultsGeneration = generation
            self.faults = self.core.faults
        }
    }

    private func requestCompleted(streamID: HTTP2StreamID, context: ChannelHandlerContext) {
        guard let stream = self.streams.removeValue(forKey: streamID) else { return }
        // Closing (dropped after N streams, or GOAWAY drained): later requests get no answer.
        guard !self.machine.isClosed else { return }
        self.refreshFaults()
        self.batch.received += 1
        let requestIndex = self.completedRequests
        self.completedRequests += 1

        if self.faults.blackhole {
            self.batch.blackholed += 1
            return
        }

        let headers = stream.headers
        let requestAPNsID = headers.first(name: "apns-id")
        var deviceToken: String?
        var rejection: SimulatedRejection?

        if let injected = self.core.drawInjectedFailure(self.faults) {
            rejection = SimulatedRejection(injected)
        } else {
            switch self.core.handling {
            case .acceptAll:
                rejection = self.acceptAllDecision(headers: headers, deviceToken: &deviceToken)
            case .validating:
                rejection = self.validatingDecision(stream: stream, deviceToken: &deviceToken, context: context)
            case .scripted(let script):
                let route = APNsRequestValidator.route(
                    method: headers.first(name: ":method"),
                    path: headers.first(name: ":path")
                )
                deviceToken = try? route.get()
                let request = SimulatedRequest(
                    deviceToken: deviceToken,
                    headers: Self.dictionary(headers),
                    payload: stream.body.map { Array($0.readableBytesView) } ?? [],
                    connectionID: self.connectionID,
                    streamID: Int(streamID),
                    requestIndexOnConnection: requestIndex
                )
                switch script(request) {
                case .accept:
                    rejection = deviceToken == nil ? SimulatedRejection(.badPath) : nil
                case .reject(let scripted):
                    rejection = scripted
                case .validate:
                    rejection = self.validatingDecision(stream: stream, deviceToken: &deviceToken, context: context)
                case .noAnswer:
                    self.batch.blackholed += 1
                    return
                }
            }
        }
        // A token of the other environment passes every other check and is then refused, as APNs does.
        if rejection == nil, deviceToken != nil, self.faults.everyTokenBad {
            rejection = SimulatedRejection(.badDeviceToken)
        }

        let apnsID: String
        if let requestAPNsID, rejection == nil || APNsRequestValidator.isCanonicalUUID(requestAPNsID) {
            apnsID = requestAPNsID
        } else {
            apnsID = self.identifiers.uppercaseUUID()
        }

        if let rejection {
            self.batch.rejectedReasons.append(rejection.reason)
        } else if let deviceToken {
            self.recordAccepted(
                stream: stream,
                deviceToken: deviceToken,
                apnsID: apnsID,
                requestAPNsID: requestAPNsID,
                streamID: streamID
            )
        }
        self.respond(streamID: streamID, rejection: rejection, apnsID: apnsID, context: context)
    }

    private func acceptAllDecision(headers: HPACKHeaders, deviceToken: inout String?) -> SimulatedRejection? {
        switch APNsRequestValidator.route(method: headers.first(name: ":method"), path: headers.first(name: ":path")) {
        case .failure(let rejection):
            return rejection
        case .success(let token):
            deviceToken = token
            return self.core.devices.state(of: token).map(DeviceRegistry.rejection(for:))
        }
    }

    private func validatingDecision(
        stream: PendingStream,
        deviceToken: inout String?,
        context: ChannelHandlerContext
    ) -> SimulatedRejection? {
        let headers = stream.headers
        let token: String
        switch APNsRequestValidator.route(method: headers.first(name: ":method"), path: headers.first(name: ":path")) {
        case .failure(let rejection): return rejection
        case .success(let routed): token = routed
        }
        deviceToken = token
        var authentication = self.authentication ?? self.determineAuthentication(context: context)
        let emptyBody = ByteBuffer()
        let result = self.core.validator.validate(
            deviceToken: token,
            headers: headers,
            payload: (stream.body ?? emptyBody).readableBytesView,
            payloadLength: stream.bodyLength,
            authentication: &authentication,
            now: self.core.clock.now()
        )
        self.authentication = authentication
        switch result {
        case .failure(let rejection): return rejection
        case .success: return self.core.devices.state(of: token).map(DeviceRegistry.rejection(for:))
        }
    }

    /// Decided once per connection, at its first validated request (after the TLS handshake).
    private func determineAuthentication(context: ChannelHandlerContext) -> ConnectionAuthentication {
        if self.core.requiresClientCertificateAuthority,
            let peer = try? context.pipeline.syncOperations.nioSSL_peerCertificate()
        {
            self.core.recordClientCertificate(connectionID: self.connectionID, commonName: Self.commonName(of: peer))
            return .certificate(bundleID: Self.bundleID(of: peer))
        }
        if self.core.hasTokenKeys { return .providerToken(ProviderTokenTracker()) }
        return .open
    }

    /// The subject's UID attribute (OID 0.9.2342.19200300.100.1.1), as Apple's push certificates carry it.
    static func bundleID(of certificate: NIOSSLCertificate) -> String? {
        guard let der = try? certificate.toDERBytes() else { return nil }
        return Self.bundleID(ofDER: der)
    }

    /// The subject's common name, for the record of which certificate a connection presented.
    static func commonName(of certificate: NIOSSLCertificate) -> String {
        guard let der = try? certificate.toDERBytes(), let parsed = try? Certificate(derEncoded: der) else { return "" }
        for relativeName in parsed.subject {
            for attribute in relativeName where attribute.type == .RDNAttributeType.commonName {
                return String(attribute.value) ?? ""
            }
        }
        return ""
    }

    static func bundleID(ofDER der: [UInt8]) -> String? {
        guard let parsed = try? Certificate(derEncoded: der) else { return nil }
        for relativeName in parsed.subject {
            for attribute in relativeName where attribute.type == SimulatorCertificateAuthority.userIDAttribute {
                return String(attribute.value)
            }
        }
        return nil
    }

    private func recordAccepted(
        stream: PendingStream,
        deviceToken: String,
        apnsID: String,
        requestAPNsID: String?,
        streamID: HTTP2StreamID
    ) {
        let recorder = self.core.recorder
        var record: RecordedNotification?
        if recorder.wantsRecords {
            record = RecordedNotification(
                deviceToken: deviceToken,
                headers: Self.dictionary(stream.headers),
                payload: stream.body.map { Array($0.readableBytesView) } ?? [],
                apnsID: apnsID,
                arrivalTime: self.core.clock.now(),
                connectionID: self.connectionID,
                streamID: Int(streamID)
            )
        }
        var deliveryKey = 0
        if recorder.tracksDevices {
            var hasher = Hasher()
            if let requestAPNsID {
                hasher.combine(0)
                hasher.combine(requestAPNsID.lowercased())
            } else {
                hasher.combine(1)
                stream.body?.withUnsafeReadableBytes { hasher.combine(bytes: $0) }
            }
            deliveryKey = hasher.finalize()
        }
        self.batch.accepted.append(.init(record: record, deviceToken: deviceToken, deliveryKey: deliveryKey))
    }

    private static func dictionary(_ headers: HPACKHeaders) -> [String: String] {
        var result: [String: String] = [:]
        result.reserveCapacity(headers.count)
        for (name, value, _) in headers where result[name] == nil {
            result[name] = value
        }
        return result
    }

    // MARK: Responses

    private func respond(
        streamID: HTTP2StreamID,
        rejection: SimulatedRejection?,
        apnsID: String,
        context: ChannelHandlerContext
    ) {
        var headers =
            rejection.map {
                Self.errorHeadersByStatus[$0.status] ?? [
                    ":status": String($0.status), "content-type": "application/json",
                ]
            }
            ?? Self.okHeaders
        headers.add(name: "apns-id", value: apnsID, indexing: .nonIndexable)
        if self.core.sendsUniqueID {
            headers.add(name: "apns-unique-id", value: self.identifiers.lowercaseUUID(), indexing: .nonIndexable)
        }
        let body: ByteBuffer? = rejection.map { context.channel.allocator.buffer(string: $0.body) }

        if self.faults.holdAnswers {
            self.heldResponses.append((streamID, headers, body))
            return
        }
        let latency = self.faults.latencyMilliseconds
        if latency > 0 {
            context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(Int64(latency))) {
                guard let context = self.context, self.registered else { return }
                self.commitBatch()
                self.writeResponse(streamID: streamID, headers: headers, body: body, context: context)
                context.flush()
                if self.closeAfterFlush {
                    self.closeAfterFlush = false
                    context.close(promise: nil)
                }
            }
        } else {
            self.pendingResponses.append((streamID, headers, body))
        }
    }

    private func writeResponse(
        streamID: HTTP2StreamID,
        headers: HPACKHeaders,
        body: ByteBuffer?,
        context: ChannelHandlerContext
    ) {
        let id = Int(streamID)
        // Not if reset by the client meanwhile, or if the connection is closing.
        guard self.machine.isOpen(id), !self.machine.isClosed else { return }
        // Account first: writing HEADERS with END_STREAM closes the stream synchronously, and
        // NIOHTTP2 reports that (StreamClosedEvent) before `write` returns.
        self.core.streams.closed(connectionID: self.connectionID)
        if self.machine.streamAnswered(id: id, dropAfterStreams: self.faults.dropAfterStreams) == .close {
            self.closeAfterFlush = true
        }
        context.write(
            self.wrapOutboundOut(
                HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: headers, endStream: body == nil)))
            ),
            promise: nil
        )
        if let body {
            context.write(
                self.wrapOutboundOut(
                    HTTP2Frame(streamID: streamID, payload: .data(.init(data: .byteBuffer(body), endStream: true)))
                ),
                promise: nil
            )
        }
    }

    private func commitBatch() {
        guard !self.batch.isEmpty else { return }
        self.core.recorder.commit(self.batch)
        self.batch = RecorderBatch()
    }
}
