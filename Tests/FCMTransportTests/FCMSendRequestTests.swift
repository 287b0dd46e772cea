import Foundation
import NIOCore
import NIOHPACK
import PushTransport
import PushgateCore
import Synchronization
import Testing

@testable import FCMTransport

@Suite("FCM requests on the shared transport layer")
struct FCMSendRequestTests {
    final class Recorder: FCMOutcomeReceiver {
        let outcomes = Mutex<[(tag: UInt64, outcome: FCMOutcome)]>([])
        func receive(_ outcome: FCMOutcome, for request: FCMSendRequest) {
            outcomes.withLock { $0.append((request.tag, outcome)) }
        }
    }

    static func message() throws -> FCMMessage {
        try FCMMessage(
            payload: try Payload(jsonString: #"{"k":"v"}"#),
            pushType: .alert,
            priority: .immediate,
            expiration: .immediately,
            collapseID: nil,
            createdAt: Date(timeIntervalSince1970: 0)
        )
    }

    @Test("a pooled message that got no answer reaches its receiver as FCMOutcome.failed, classed as for APNs")
    func failuresReachTheReceiverAsFCMOutcomes() throws {
        let recorder = Recorder()
        let request = FCMSendRequest(message: try Self.message(), token: "t1", tag: 7, receiver: recorder)
        let pooled = FCMPooledRequest(request: request, poolRequestID: 1, deadline: .now())
        pooled.fail(PushTransportFailure.goAway)
        FCMPooledRequest(request: request, poolRequestID: 2, deadline: .now()).fail(.deadlineExceeded)
        let outcomes = recorder.outcomes.withLock { $0 }
        #expect(outcomes.map(\.tag) == [7, 7])
        #expect(outcomes.map(\.outcome.outcomeClass) == [.connectionFatal, .retryable])
        #expect(outcomes.map(\.outcome.transportFailure) == [.goAway, .deadlineExceeded])
    }

    @Test("the header block decodes to a messages:send POST with the bearer token; repeated fields become indices")
    func headerBlockDecodesAndRepeatsAreIndexed() throws {
        let headers = FCMRequestHeaders(authority: "127.0.0.1:8443", projectID: "demo-project")
        var encoder = HPACKRequestEncoder()
        var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
        var blocks: [ByteBuffer] = []
        for (token, length) in [("access-1", 120), ("access-2", 99)] {
            var block = ByteBuffer()
            let accessToken = FCMAccessToken(value: token, expiresAt: Date(timeIntervalSince1970: 3600))
            headers.write(accessToken: accessToken, contentLength: length, encoder: &encoder, into: &block)
            blocks.append(block)
            let decoded = try decoder.decodeHeaders(from: &block)
            let fields = decoded.map { [$0.name, $0.value] }
            #expect(
                fields == [
                    [":method", "POST"], [":scheme", "https"], [":path", "/v1/projects/demo-project/messages:send"],
                    [":authority", "127.0.0.1:8443"], ["content-type", "application/json; charset=UTF-8"],
                    ["authorization", "Bearer \(token)"], ["content-length", "\(length)"],
                ]
            )
            // The bearer token is a literal without indexing: the decoder's table never holds it.
            #expect(decoded.first(where: { $0.name == "authorization" })?.indexable == .nonIndexable)
        }
        // Second block: `:path`, `:authority` and `content-type` are one-byte indices now.
        let repeatedCost = blocks[0].readableBytes - blocks[1].readableBytes
        #expect(repeatedCost >= "/v1/projects/demo-project/messages:send".utf8.count)
    }
}
